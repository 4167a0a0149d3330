// fbl.AttentionGrad, flash style (the MLX order): three kernels, no atomics, no score matrix.
//   _rowterm  dr[row] = dO[row] . o[row], one work-item per query row;
//   _dq       work-group (query block, batch * head): key/value tiles through local memory,
//             P = exp2(s - lse), dS = P (dO . v - dr), dq = scale dS k;
//   _dkdv     work-group (key block, batch * kv head): for each query head of the group, query
//             tiles (q, dO, lse, dr) through local memory; dv = sum P dO, dk = scale sum dS q.
// Rows and tiles as in flash_attention_common.cl; blocks the causal / sliding-window mask hides
// are skipped. Work-items whose row lies past the end compute on zeros and write nothing.
{{COMMON}}

__kernel void {{NAME}}_rowterm({{ROWTERM_PARAMS}}) {
  const uint row = get_global_id(0);
  if (row >= {{BH}}u * SQ) return;
  const uint b = row / (HEADS * SQ), h = row / SQ % HEADS, i = row % SQ;
  float s = 0.0f;
  for (uint e = 0; e < DV; ++e) s += dout[offDO(b, h, i, e)] * o[offO(b, h, i, e)];
  dr[row] = s;
}

#define WG_SIZE __attribute__((reqd_work_group_size(WG, 1, 1)))
__kernel void WG_SIZE {{NAME}}_dq({{DQ_PARAMS}}) {
  __local float ks[COLS * D];
  __local float vs[COLS * DV];
  __local float ps[TD * PLANE];
  __local float pd[TD * PLANE];
  const uint l = get_local_id(0), r = l / TD, t = l % TD;
  const uint bh = get_group_id(1), b = bh / HEADS, h = bh % HEADS, kvh = h / GROUP;
  const uint q0 = get_group_id(0) * ROWS, i = q0 + r;
  const int live = i < SQ;
  float qr[DS], dor[VS], acc[DS];
  for (uint e = 0; e < DS; ++e) qr[e] = live ? q[offQ(b, h, i, e * TD + t)] : 0.0f;
  for (uint e = 0; e < VS; ++e) dor[e] = live ? dout[offDO(b, h, i, e * TD + t)] : 0.0f;
  for (uint e = 0; e < DS; ++e) acc[e] = 0.0f;
  const float lse2 = live ? attnLse2(lse[offLse(b, h, i)]) : 0.0f;
  const float rowTerm = live ? dr[bh * SQ + i] : 0.0f;
  const uint kEnd = attnKeyEnd(min(SQ, q0 + ROWS));
  for (uint k0 = attnKeyBegin(q0) / COLS * COLS; k0 < kEnd; k0 += COLS) {
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint x = l; x < COLS * D; x += WG) {
      const uint j = k0 + x / D;
      ks[x] = j < SK ? k[offK(b, kvh, j, x % D)] : 0.0f;
    }
    for (uint x = l; x < COLS * DV; x += WG) {
      const uint j = k0 + x / DV;
      vs[x] = j < SK ? v[offV(b, kvh, j, x % DV)] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint j = 0; j < COLS; ++j) {
      float s = 0.0f, dp = 0.0f;
      for (uint e = 0; e < DS; ++e) s += qr[e] * ks[j * D + e * TD + t];
      for (uint e = 0; e < VS; ++e) dp += dor[e] * vs[j * DV + e * TD + t];
      ps[PART(t, j, r)] = s;
      pd[PART(t, j, r)] = dp;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint j = 0; j < COLS; ++j) {
      float s = 0.0f, dp = 0.0f, slope;
      for (uint u = 0; u < TD; ++u) {
        s += ps[PART(u, j, r)];
        dp += pd[PART(u, j, r)];
      }
      const float sc = attnScore(s, b, h, i, k0 + j, MASK, &slope);
      if (sc == -INFINITY) continue;
      const float ds = exp2(sc - lse2) * (dp - rowTerm) * slope * SCALE;
      for (uint e = 0; e < DS; ++e) acc[e] += ds * ks[j * D + e * TD + t];
    }
  }
  if (!live) return;
  for (uint e = 0; e < DS; ++e) dq[offDQ(b, h, i, e * TD + t)] = acc[e];
}

__kernel void WG_SIZE {{NAME}}_dkdv({{DKDV_PARAMS}}) {
  __local float qs[COLS * D];
  __local float dos[COLS * DV];
  __local float lse2s[COLS];
  __local float rows[COLS];
  __local float ps[TD * PLANE];
  __local float pd[TD * PLANE];
  const uint l = get_local_id(0), r = l / TD, t = l % TD;
  const uint bkv = get_group_id(1), b = bkv / KV_HEADS, kvh = bkv % KV_HEADS;
  const uint k0 = get_group_id(0) * ROWS, j = k0 + r;
  const int live = j < SK;
  float kr[DS], vr[VS], dk[DS], dv[VS];
  for (uint e = 0; e < DS; ++e) kr[e] = live ? k[offK(b, kvh, j, e * TD + t)] : 0.0f;
  for (uint e = 0; e < VS; ++e) vr[e] = live ? v[offV(b, kvh, j, e * TD + t)] : 0.0f;
  for (uint e = 0; e < DS; ++e) dk[e] = 0.0f;
  for (uint e = 0; e < VS; ++e) dv[e] = 0.0f;
  const uint qEnd = attnQueryEnd(min(SK, k0 + ROWS));
  for (uint g = 0; g < GROUP; ++g) {
    const uint h = kvh * GROUP + g;
    for (uint i0 = attnQueryBegin(k0) / COLS * COLS; i0 < qEnd; i0 += COLS) {
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint x = l; x < COLS * D; x += WG) {
        const uint i = i0 + x / D;
        qs[x] = i < SQ ? q[offQ(b, h, i, x % D)] : 0.0f;
      }
      for (uint x = l; x < COLS * DV; x += WG) {
        const uint i = i0 + x / DV;
        dos[x] = i < SQ ? dout[offDO(b, h, i, x % DV)] : 0.0f;
      }
      for (uint x = l; x < COLS; x += WG) {
        const uint i = i0 + x;
        lse2s[x] = i < SQ ? attnLse2(lse[offLse(b, h, i)]) : 0.0f;
        rows[x] = i < SQ ? dr[(b * HEADS + h) * SQ + i] : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint c = 0; c < COLS; ++c) {
        float s = 0.0f, dp = 0.0f;
        for (uint e = 0; e < DS; ++e) s += kr[e] * qs[c * D + e * TD + t];
        for (uint e = 0; e < VS; ++e) dp += vr[e] * dos[c * DV + e * TD + t];
        ps[PART(t, c, r)] = s;
        pd[PART(t, c, r)] = dp;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint c = 0; c < COLS; ++c) {
        float s = 0.0f, dp = 0.0f, slope;
        for (uint u = 0; u < TD; ++u) {
          s += ps[PART(u, c, r)];
          dp += pd[PART(u, c, r)];
        }
        const float sc = attnScore(s, b, h, i0 + c, j, MASK, &slope);
        if (sc == -INFINITY) continue;
        const float p = exp2(sc - lse2s[c]);
        const float ds = p * (dp - rows[c]) * slope * SCALE;
        for (uint e = 0; e < VS; ++e) dv[e] += p * dos[c * DV + e * TD + t];
        for (uint e = 0; e < DS; ++e) dk[e] += ds * qs[c * D + e * TD + t];
      }
    }
  }
  if (!live) return;
  for (uint e = 0; e < DS; ++e) dkOut[offDK(b, kvh, j, e * TD + t)] = dk[e];
  for (uint e = 0; e < VS; ++e) dvOut[offDV(b, kvh, j, e * TD + t)] = dv[e];
}
