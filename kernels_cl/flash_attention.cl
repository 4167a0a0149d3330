// fbl.Attention forward, flash style: o and the row log-sum-exp, no score matrix in memory.
// Work-group (query block, batch * head) owning ROWS query rows, TD work-items a row: work-item t
// holds the head dims t, t + TD, ... of its row in registers, so a row of local memory is read by
// neighbouring work-items at neighbouring addresses. Key and value tiles of COLS rows go through
// local memory. A dot product is summed from the TD partials in local memory (PART: consecutive
// rows at consecutive addresses, so the work-items reading one column hit distinct banks). A row
// keeps an online softmax in base 2 (running max m, running sum l, the accumulator rescaled by
// exp2(m_old - m_new) once per tile). Tiles outside the rows' causal / sliding-window range
// are never loaded.
#define ROWS {{ROWS}}u
#define COLS {{COLS}}u
#define TD {{TD}}u
#define DS (D / TD)
#define VS (DV / TD)
#define WG (ROWS * TD)
// Partial sums part[t][col][row]. A warp of 32 holds 32 / TD rows of every t; padding each t
// plane by 32 / TD floats puts those rows of different t in different banks.
#define PLANE (COLS * ROWS + 32u / TD)
#define PART(t, c, r) ((t) * PLANE + (c) * ROWS + (r))
{{COMMON}}
__kernel void WG_SIZE {{NAME}}({{PARAMS}}) {
  __local float ks[COLS * (D + 1)];
  __local float vs[COLS * (DV + 1)];
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
    STAGE_ROWS(ks, COLS, D, SK, k0, k, offK, b, kvh);
    STAGE_ROWS(vs, COLS, DV, SK, k0, v, offV, b, kvh);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint j = 0; j < COLS; ++j) {
      float s = 0.0f;
      for (uint e = 0; e < DS; ++e) s += qr[e] * ks[j * (D + 1u) + e * TD + t];
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
      for (uint e = 0; e < VS; ++e) acc[e] += p * vs[j * (DV + 1u) + e * TD + t];
    }
    m = mNew;
  }
  if (!live) return;
  const float inv = 1.0f / sum;
  for (uint e = 0; e < VS; ++e) o[offO(b, h, i, e * TD + t)] = acc[e] * inv;
  if (t == 0) lse[offLse(b, h, i)] = (m + log2(sum)) * LN2;
}
