// fbl.Attention forward, flash style: o and the row log-sum-exp (as its max and log-sum), no score
// matrix in memory.
// Work-group (query block of TILE rows, batch * head); key/value tiles of TILE rows stream past
// the block's queries. Register-tiled like the backward's block kernels, with the same roles and
// head-dim chunks (flash_attention_common.cl): score blocks, then P through local memory to the
// accumulation of o.
// Online softmax: each score work-item writes its rows' maxima over its columns, and
// every work-item that needs a row's new maximum (the score stage for P, the accumulation for
// the rescale exp(m_old - m_new)) takes the max of those partials and of its own copy of the
// running max, so the copies agree without a row owner. Tiles outside the rows' causal /
// sliding-window range are never loaded.
// With SPLITS > 1 each block's key tiles are shared by SPLITS work-groups: each writes its rows'
// o over its own keys with their max and sum, and _combine weighs them together.
{{COMMON}}

__kernel void WG_SIZE {{NAME}}({{PARAMS}}) {
  __local float qt[TILE * (CW + 1)], kt[TILE * (CW + 1)], vt[TILE * (CWV + 1)];
  __local float pt[TILE * PSTRIDE];                  // P, [query][key]
  __local float pmax[TILE * SX], psum[TILE * SX];  // per row: each score work-item's max and sum
  const uint l = get_local_id(0), sy = l / SX, sx = l % SX, oy = l / EX, ox = l % EX;
  const uint bh = get_group_id(1), b = bh / HEADS, h = bh % HEADS, kvh = h / GROUP;
  const uint q0 = get_group_id(0) / SPLITS * TILE, sp = get_group_id(0) % SPLITS;
#if NCH == 1
  STAGE_ROWS(qt, TILE, D, SQ, q0, q, offQ, b, h);
#endif
  float mS[MR];                             // running row maxima, the score stage's copy
  float mA[AR], sum[AR], acc[AR][DV / EX];  // the accumulation's copy, sums and o
  for (uint a = 0; a < MR; ++a) mS[a] = -INFINITY;
  for (uint a = 0; a < AR; ++a) {
    mA[a] = -INFINITY;
    sum[a] = 0.0f;
    for (uint c = 0; c < DV / EX; ++c) acc[a][c] = 0.0f;
  }
  uint t0, t1;
  splitTiles(attnKeyBegin(q0) / TILE, (attnKeyEnd(min(SQ, q0 + TILE)) + TILE - 1u) / TILE, sp, &t0, &t1);
  for (uint k0 = t0 * TILE; k0 < t1 * TILE; k0 += TILE) {
    float s[MR][MC];
    for (uint a = 0; a < MR; ++a)
      for (uint c = 0; c < MC; ++c) s[a][c] = 0.0f;
    for (uint n = 0; n < NCH; ++n) {
      barrier(CLK_LOCAL_MEM_FENCE);  // every work-item is done with the previous chunk or tile
#if NCH > 1
      STAGE_COLS(qt, TILE, CW, n * CW, SQ, q0, q, offQ, b, h);
#else
      STAGE_ROWS(vt, TILE, DV, SK, k0, v, offV, b, kvh);
#endif
      STAGE_COLS(kt, TILE, CW, n * CW, SK, k0, k, offK, b, kvh);
      barrier(CLK_LOCAL_MEM_FENCE);
      SCORE_BLOCK(s, qt, kt, CW);
    }
    for (uint a = 0; a < MR; ++a) {
      const uint ir = sy + SY * a;
      float mx = -INFINITY, slope;
      for (uint c = 0; c < MC; ++c) {
        s[a][c] = attnScore(s[a][c], b, h, q0 + ir, k0 + sx + SX * c, MASK, &slope);
        mx = fmax(mx, s[a][c]);
      }
      pmax[ir * SX + sx] = mx;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint a = 0; a < MR; ++a) {
      const uint ir = sy + SY * a;
      for (uint u = 0; u < SX; ++u) mS[a] = fmax(mS[a], pmax[ir * SX + u]);
      float ps = 0.0f;
      for (uint c = 0; c < MC; ++c) {
        const float p = s[a][c] == -INFINITY ? 0.0f : attnExp(s[a][c], mS[a]);
        pt[ir * PSTRIDE + sx + SX * c] = p;
        ps += p;
      }
      psum[ir * SX + sx] = ps;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint a = 0; a < AR; ++a) {
      const uint ir = oy + OY * a;
      float mNew = mA[a], ps = 0.0f;
      for (uint u = 0; u < SX; ++u) {
        mNew = fmax(mNew, pmax[ir * SX + u]);
        ps += psum[ir * SX + u];
      }
      const float alpha = mNew == -INFINITY ? 1.0f : attnExp(mA[a], mNew);  // nothing visible yet: all zeros
      sum[a] = sum[a] * alpha + ps;
      for (uint c = 0; c < DV / EX; ++c) acc[a][c] *= alpha;
      mA[a] = mNew;
    }
#pragma unroll
    for (int n = 0; n < NCH; ++n) {
#if NCH > 1
      if (n > 0) barrier(CLK_LOCAL_MEM_FENCE);  // every work-item is done with the previous chunk
      STAGE_COLS(vt, TILE, CWV, n * CWV, SK, k0, v, offV, b, kvh);
      barrier(CLK_LOCAL_MEM_FENCE);
#endif
      ACCUMULATE_ROWS(acc, pt, vt, CWV, n);
    }
  }
  for (uint a = 0; a < AR; ++a) {
    const uint i = q0 + oy + OY * a;
    if (i >= SQ) continue;
#if SPLITS > 1
    // Partials [SPLITS, batch * heads, SQ(, DV)]; a split that saw no key of the row writes o = 0,
    // sum 0, max -inf, which _combine weighs 0.
    const uint row = (sp * get_num_groups(1) + bh) * SQ + i;
    const float inv = sum[a] > 0.0f ? 1.0f / sum[a] : 0.0f;
    for (uint c = 0; c < DV / EX; ++c) oPart[row * DV + ox + EX * c] = acc[a][c] * inv;
    if (ox == 0u) {
      mPart[row] = mA[a];
      sumPart[row] = sum[a];
    }
#else
    const float inv = 1.0f / sum[a];
    for (uint c = 0; c < DV / EX; ++c) o[offO(b, h, i, ox + EX * c)] = acc[a][c] * inv;
    if (ox == 0u) {
      lse[offLse(b, h, i, 0u)] = mA[a];
      lse[offLse(b, h, i, 1u)] = log(sum[a]);
    }
#endif
  }
}

#if SPLITS > 1
// o and lse of every row from its splits' partials: split s's o weighs sum_s exp(m_s - m), m the
// largest max, as if one work-group had seen every key. One work-item an element of o.
__kernel void {{NAME}}_combine(__global const float* oPart, __global const float* mPart, __global const float* sumPart,
                               __global float* o, __global float* lse) {
  const uint rows = BH * SQ, x = get_global_id(0);
  if (x >= rows * DV) return;
  const uint row = x / DV, e = x % DV, bh = row / SQ, b = bh / HEADS, h = bh % HEADS, i = row % SQ;
  float m = -INFINITY;
  for (uint s = 0; s < SPLITS; ++s) m = fmax(m, mPart[s * rows + row]);
  float total = 0.0f, acc = 0.0f;
  for (uint s = 0; s < SPLITS; ++s) {
    const uint r = s * rows + row;
    const float w = m == -INFINITY ? 0.0f : sumPart[r] * attnExp(mPart[r], m);
    total += w;
    acc += w * oPart[r * DV + e];
  }
  o[offO(b, h, i, e)] = acc / total;
  if (e == 0u) {
    lse[offLse(b, h, i, 0u)] = m;
    lse[offLse(b, h, i, 1u)] = log(total);
  }
}
#endif
