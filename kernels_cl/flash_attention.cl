// fbl.Attention forward, flash style: o and the row log-sum-exp, no score matrix in memory.
// Work-group (query block, batch * head); ROWS query rows, TD work-items each
// (flash_attention_common.cl). Key and value tiles of COLS rows go through local memory; a row
// keeps an online softmax in base 2 (running max m, running sum l, the accumulator rescaled by
// exp2(m_old - m_new) once per tile). Tiles outside the rows' causal / sliding-window range
// are never loaded.
{{COMMON}}
#define WG_SIZE __attribute__((reqd_work_group_size(WG, 1, 1)))
__kernel void WG_SIZE {{NAME}}({{PARAMS}}) {
  __local float ks[COLS * D];
  __local float vs[COLS * DV];
  __local float part[TD * PLANE];
  const uint l = get_local_id(0), r = l / TD, t = l % TD;
  const uint bh = get_group_id(1), b = bh / HEADS, h = bh % HEADS, kvh = h / GROUP;
  const uint q0 = get_group_id(0) * ROWS, i = q0 + r;
  const int live = i < SQ;
  float qr[DS], acc[VS];
  for (uint e = 0; e < DS; ++e) qr[e] = live ? q[offQ(b, h, i, e * TD + t)] : 0.0f;
  for (uint e = 0; e < VS; ++e) acc[e] = 0.0f;
  float m = -INFINITY, sum = 0.0f;
  const uint kEnd = attnKeyEnd(min(SQ, q0 + ROWS));
  for (uint k0 = attnKeyBegin(q0) / COLS * COLS; k0 < kEnd; k0 += COLS) {
    barrier(CLK_LOCAL_MEM_FENCE);  // every work-item is done with the previous tile
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
      float s = 0.0f;
      for (uint e = 0; e < DS; ++e) s += qr[e] * ks[j * D + e * TD + t];
      part[PART(t, j, r)] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float sc[COLS];
    float tileMax = -INFINITY, slope;
    for (uint j = 0; j < COLS; ++j) {
      float s = 0.0f;
      for (uint u = 0; u < TD; ++u) s += part[PART(u, j, r)];
      sc[j] = attnScore(s, b, h, i, k0 + j, MASK, &slope);
      tileMax = fmax(tileMax, sc[j]);
    }
    const float mNew = fmax(m, tileMax);
    if (mNew == -INFINITY) continue;  // nothing visible to this row yet
    const float alpha = exp2(m - mNew);
    sum *= alpha;
    for (uint e = 0; e < VS; ++e) acc[e] *= alpha;
    for (uint j = 0; j < COLS; ++j) {
      const float p = exp2(sc[j] - mNew);
      sum += p;
      for (uint e = 0; e < VS; ++e) acc[e] += p * vs[j * DV + e * TD + t];
    }
    m = mNew;
  }
  if (!live) return;
  const float inv = 1.0f / sum;
  for (uint e = 0; e < VS; ++e) o[offO(b, h, i, e * TD + t)] = acc[e] * inv;
  if (t == 0) lse[offLse(b, h, i)] = (m + log2(sum)) * LN2;
}
