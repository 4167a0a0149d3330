// fbl.AttentionGrad, flash style (the MLX order): no atomics, no score matrix in memory.
//   _rowterm    dr[row] = dO[row] . o[row], a work-group (a tree) or one work-item per query row;
//   _dq         work-group (query block, batch * head): key/value tiles stream past the block's
//               queries; P = exp(s - lse), dS = P (dO . v - dr), dq = scale dS k;
//   _dkdv       work-group (key block, batch * kv head, or batch * head with SPLIT_GROUP): query
//               tiles (q, dO, lse, dr) stream past the block's keys; dv = sum P dO,
//               dk = scale sum dS q;
//   _dkdv_sum   with SPLIT_GROUP only: each query head of a GQA group wrote its own dk and dv
//               partials (more work-groups where a group's heads would leave SMs idle); sums them.
// Both block kernels are register-tiled like a GEMM. A tile pair is TILE x TILE: for the scores
// s and dp, work-item (sy, sx) computes rows sy + SY a and columns sx + SX c, reading MR + MC
// local values per MR x MC products; P and dS go through local memory to the accumulation, where
// work-item (oy, ox) owns rows oy + OY a and head dims ox + EX c of the block's gradients.
// Head dims pass through local memory NCH chunks at a time (CW of q and k, CWV of v and dO):
// with NCH = 1 the block's own rows stay resident while the other side streams; large head dims
// (Gemma's 256) take chunks so that 32-row tiles still fit local memory, the block's rows are
// staged again with each chunk, and the accumulation walks the chunks back (the last one staged
// is still there). Blocks the causal / sliding-window mask hides are skipped; rows past the end
// are zeros and write nothing.
// With SPLITS > 1 a block's streamed range (dq: its key tiles; dk/dv: its heads x query tiles)
// is shared by SPLITS work-groups, each writing partials to scratch that _dq_sum / _dkdv_sum add.
#define SPLIT_GROUP {{SPLIT_GROUP}}
#define BATCH {{BATCH}}u
{{COMMON}}

#define RT_WG {{RT_WG}}u  // work-items of a row term (reduceGroupSize); 1: a work-item a row

__kernel void {{NAME}}_rowterm({{ROWTERM_PARAMS}}) {
#if RT_WG > 1
  // A work-group a row: strided partial dots (consecutive work-items read consecutive dims),
  // then a tree.
  __local float part[RT_WG];
  const uint row = get_group_id(0), l = get_local_id(0);
#else
  const uint row = get_global_id(0), l = 0u;
  if (row >= BATCH * HEADS * SQ) return;
#endif
  const uint b = row / (HEADS * SQ), h = row / SQ % HEADS, i = row % SQ;
  float s = 0.0f;
  for (uint e = l; e < DV; e += RT_WG) s += dout[offDO(b, h, i, e)] * o[offO(b, h, i, e)];
#if RT_WG > 1
  part[l] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint span = RT_WG / 2u; span > 0u; span >>= 1) {
    if (l < span) part[l] += part[l + span];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0u) dr[row] = part[0];
#else
  dr[row] = s;
#endif
}

#if SPLITS > 1
// Split sp's partial dq, row-major [SPLITS, batch * heads, SQ, D].
#define DQ_AT(b, h, i, e) (((sp * (BATCH * HEADS) + bh) * SQ + (i)) * D + (e))
#else
#define DQ_AT(b, h, i, e) offDQ(b, h, i, e)
#endif

__kernel void WG_SIZE {{NAME}}_dq({{DQ_PARAMS}}) {
  __local float qt[TILE * (CW + 1)], dot[TILE * (CWV + 1)];  // the block's queries
  __local float kt[TILE * (CW + 1)], vt[TILE * (CWV + 1)];   // a key tile
  __local float dst[TILE * PSTRIDE];                          // dS, [query][key]
  const uint l = get_local_id(0), sy = l / SX, sx = l % SX, oy = l / EX, ox = l % EX;
  const uint bh = get_group_id(1), b = bh / HEADS, h = bh % HEADS, kvh = h / GROUP;
  const uint q0 = get_group_id(0) / SPLITS * TILE, sp = get_group_id(0) % SPLITS;
#if NCH == 1
  STAGE_ROWS(qt, TILE, D, SQ, q0, q, offQ, b, h);
  STAGE_ROWS(dot, TILE, DV, SQ, q0, dout, offDO, b, h);
#endif
  float rowMax[MR], logSum[MR], rowTerm[MR];
  for (uint a = 0; a < MR; ++a) {
    const uint i = q0 + sy + SY * a;
    rowMax[a] = i < SQ ? lse[offLse(b, h, i, 0u)] : 0.0f;
    logSum[a] = i < SQ ? lse[offLse(b, h, i, 1u)] : 0.0f;
    rowTerm[a] = i < SQ ? dr[bh * SQ + i] : 0.0f;
  }
  float acc[AR][D / EX];
  for (uint a = 0; a < AR; ++a)
    for (uint c = 0; c < D / EX; ++c) acc[a][c] = 0.0f;
  uint t0, t1;
  splitTiles(attnKeyBegin(q0) / TILE, (attnKeyEnd(min(SQ, q0 + TILE)) + TILE - 1u) / TILE, sp, &t0, &t1);
  for (uint k0 = t0 * TILE; k0 < t1 * TILE; k0 += TILE) {
    float s[MR][MC], dp[MR][MC];
    for (uint a = 0; a < MR; ++a)
      for (uint c = 0; c < MC; ++c) s[a][c] = dp[a][c] = 0.0f;
    for (uint n = 0; n < NCH; ++n) {
      barrier(CLK_LOCAL_MEM_FENCE);  // every work-item is done with the previous chunk or tile
#if NCH > 1
      STAGE_COLS(qt, TILE, CW, n * CW, SQ, q0, q, offQ, b, h);
      STAGE_COLS(dot, TILE, CWV, n * CWV, SQ, q0, dout, offDO, b, h);
#endif
      STAGE_COLS(kt, TILE, CW, n * CW, SK, k0, k, offK, b, kvh);
      STAGE_COLS(vt, TILE, CWV, n * CWV, SK, k0, v, offV, b, kvh);
      barrier(CLK_LOCAL_MEM_FENCE);
      SCORE_BLOCK(s, qt, kt, CW);
      SCORE_BLOCK(dp, dot, vt, CWV);
    }
    for (uint a = 0; a < MR; ++a)
      for (uint c = 0; c < MC; ++c) {
        float slope;
        const uint ir = sy + SY * a, jc = sx + SX * c;
        const float sc = attnScore(s[a][c], b, h, q0 + ir, k0 + jc, MASK, &slope);
        const float p = attnProb(sc, rowMax[a], logSum[a]);
        dst[ir * PSTRIDE + jc] = p * (dp[a][c] - rowTerm[a]) * slope * SCALE;
      }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int n = NCH - 1; n >= 0; --n) {
      if (n + 1 < NCH) {  // the last chunk staged is still in kt
        barrier(CLK_LOCAL_MEM_FENCE);
        STAGE_COLS(kt, TILE, CW, n * CW, SK, k0, k, offK, b, kvh);
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      ACCUMULATE_ROWS(acc, dst, kt, CW, n);
    }
  }
  for (uint a = 0; a < AR; ++a) {
    const uint i = q0 + oy + OY * a;
    if (i < SQ)
      for (uint c = 0; c < D / EX; ++c) dq[DQ_AT(b, h, i, ox + EX * c)] = acc[a][c];
  }
}

#if SPLITS > 1
// dq from its splits' partials, one work-item an element.
__kernel void {{NAME}}_dq_sum(__global const float* dqPart, __global float* dq) {
  const uint rows = BATCH * HEADS * SQ, x = get_global_id(0);
  if (x >= rows * D) return;
  const uint row = x / D, e = x % D, b = row / (HEADS * SQ), h = row / SQ % HEADS, i = row % SQ;
  float s = 0.0f;
  for (uint p = 0; p < SPLITS; ++p) s += dqPart[(p * rows + row) * D + e];
  dq[offDQ(b, h, i, e)] = s;
}
#endif

#if SPLIT_GROUP || SPLITS > 1
// Partials of split sp and work-group row get_group_id(1) (a head, or a key/value head without
// SPLIT_GROUP), row-major [SPLITS, groups, SK, W].
#define DK_AT(b, kvh, j, e) (((sp * get_num_groups(1) + get_group_id(1)) * SK + (j)) * D + (e))
#define DV_AT(b, kvh, j, e) (((sp * get_num_groups(1) + get_group_id(1)) * SK + (j)) * DV + (e))
#else
#define DK_AT(b, kvh, j, e) offDK(b, kvh, j, e)
#define DV_AT(b, kvh, j, e) offDV(b, kvh, j, e)
#endif

__kernel void WG_SIZE {{NAME}}_dkdv({{DKDV_PARAMS}}) {
  __local float kt[TILE * (CW + 1)], vt[TILE * (CWV + 1)];   // the block's keys
  __local float qt[TILE * (CW + 1)], dot[TILE * (CWV + 1)];  // a query tile
  __local float pt[TILE * PSTRIDE], dst[TILE * PSTRIDE];      // P and dS, [key][query]
  __local float maxt[TILE], logt[TILE], rowt[TILE];  // the streamed rows' lse and row terms
  const uint l = get_local_id(0), sy = l / SX, sx = l % SX, oy = l / EX, ox = l % EX;
#if SPLIT_GROUP
  const uint b = get_group_id(1) / HEADS, hBegin = get_group_id(1) % HEADS, hEnd = hBegin + 1u;
  const uint kvh = hBegin / GROUP;
#else
  const uint b = get_group_id(1) / KV_HEADS, kvh = get_group_id(1) % KV_HEADS;
  const uint hBegin = kvh * GROUP, hEnd = hBegin + GROUP;
#endif
  const uint k0 = get_group_id(0) / SPLITS * TILE, sp = get_group_id(0) % SPLITS;
#if NCH == 1
  STAGE_ROWS(kt, TILE, D, SK, k0, k, offK, b, kvh);
  STAGE_ROWS(vt, TILE, DV, SK, k0, v, offV, b, kvh);
#endif
  float dk[AR][D / EX], dv[AR][DV / EX];
  for (uint a = 0; a < AR; ++a) {
    for (uint c = 0; c < D / EX; ++c) dk[a][c] = 0.0f;
    for (uint c = 0; c < DV / EX; ++c) dv[a][c] = 0.0f;
  }
  // The block's (head, query tile) pairs, head-major; this split's run of them.
  const uint tBegin = attnQueryBegin(k0) / TILE;
  const uint tiles = max(tBegin, (attnQueryEnd(min(SK, k0 + TILE)) + TILE - 1u) / TILE) - tBegin;
  uint x0, x1;
  splitTiles(0u, (hEnd - hBegin) * tiles, sp, &x0, &x1);
  for (uint pair = x0; pair < x1; ++pair) {
    const uint h = hBegin + pair / tiles, i0 = (tBegin + pair % tiles) * TILE;
    float s[MR][MC], dp[MR][MC];
    for (uint a = 0; a < MR; ++a)
      for (uint c = 0; c < MC; ++c) s[a][c] = dp[a][c] = 0.0f;
    for (uint n = 0; n < NCH; ++n) {
      barrier(CLK_LOCAL_MEM_FENCE);  // every work-item is done with the previous chunk or tile
#if NCH > 1
      STAGE_COLS(kt, TILE, CW, n * CW, SK, k0, k, offK, b, kvh);
      STAGE_COLS(vt, TILE, CWV, n * CWV, SK, k0, v, offV, b, kvh);
#endif
      STAGE_COLS(qt, TILE, CW, n * CW, SQ, i0, q, offQ, b, h);
      STAGE_COLS(dot, TILE, CWV, n * CWV, SQ, i0, dout, offDO, b, h);
      if (n == 0u)
        for (uint x = l; x < TILE; x += WG) {
          const uint i = i0 + x;
          maxt[x] = i < SQ ? lse[offLse(b, h, i, 0u)] : 0.0f;
          logt[x] = i < SQ ? lse[offLse(b, h, i, 1u)] : 0.0f;
          rowt[x] = i < SQ ? dr[(b * HEADS + h) * SQ + i] : 0.0f;
        }
      barrier(CLK_LOCAL_MEM_FENCE);
      SCORE_BLOCK(s, kt, qt, CW);
      SCORE_BLOCK(dp, vt, dot, CWV);
    }
    for (uint a = 0; a < MR; ++a)
      for (uint c = 0; c < MC; ++c) {
        float slope;
        const uint jr = sy + SY * a, ic = sx + SX * c;
        const float sc = attnScore(s[a][c], b, h, i0 + ic, k0 + jr, MASK, &slope);
        const float p = attnProb(sc, maxt[ic], logt[ic]);
        pt[jr * PSTRIDE + ic] = p;
        dst[jr * PSTRIDE + ic] = p * (dp[a][c] - rowt[ic]) * slope * SCALE;
      }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int n = NCH - 1; n >= 0; --n) {
      if (n + 1 < NCH) {  // the last chunk staged is still in qt and dot
        barrier(CLK_LOCAL_MEM_FENCE);
        STAGE_COLS(qt, TILE, CW, n * CW, SQ, i0, q, offQ, b, h);
        STAGE_COLS(dot, TILE, CWV, n * CWV, SQ, i0, dout, offDO, b, h);
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      for (uint i = 0; i < TILE; ++i) {
        float p[AR], ds[AR];
        for (uint a = 0; a < AR; ++a) {
          p[a] = pt[(oy + OY * a) * PSTRIDE + i];
          ds[a] = dst[(oy + OY * a) * PSTRIDE + i];
        }
        for (uint c = 0; c < CW / EX; ++c) {
          const float qv = qt[i * (CW + 1u) + ox + EX * c];
          for (uint a = 0; a < AR; ++a) dk[a][n * (CW / EX) + c] += ds[a] * qv;
        }
        for (uint c = 0; c < CWV / EX; ++c) {
          const float dov = dot[i * (CWV + 1u) + ox + EX * c];
          for (uint a = 0; a < AR; ++a) dv[a][n * (CWV / EX) + c] += p[a] * dov;
        }
      }
    }
  }
  for (uint a = 0; a < AR; ++a) {
    const uint j = k0 + oy + OY * a;
    if (j >= SK) continue;
    for (uint c = 0; c < D / EX; ++c) dkOut[DK_AT(b, kvh, j, ox + EX * c)] = dk[a][c];
    for (uint c = 0; c < DV / EX; ++c) dvOut[DV_AT(b, kvh, j, ox + EX * c)] = dv[a][c];
  }
}

#if SPLIT_GROUP || SPLITS > 1
// dk and dv of each key/value head: the sums of its partials (each split's, of each query head of
// the group with SPLIT_GROUP), one work-item an element.
#if SPLIT_GROUP
#define PART_GROUPS (BATCH * HEADS)
#define PART_HEADS GROUP
#else
#define PART_GROUPS (BATCH * KV_HEADS)
#define PART_HEADS 1u
#endif
__kernel void {{NAME}}_dkdv_sum(__global const float* dkPart, __global const float* dvPart, __global float* dkOut,
                                __global float* dvOut) {
  const uint x = get_global_id(0);
  if (x >= BATCH * KV_HEADS * SK * (D + DV)) return;
  const uint e = x % (D + DV), row = x / (D + DV), j = row % SK, b = row / SK / KV_HEADS, kvh = row / SK % KV_HEADS;
  float s = 0.0f;
  for (uint p = 0; p < SPLITS; ++p)
    for (uint g = 0; g < PART_HEADS; ++g) {
      const uint part = p * PART_GROUPS + (b * KV_HEADS + kvh) * PART_HEADS + g;
      s += e < D ? dkPart[(part * SK + j) * D + e] : dvPart[(part * SK + j) * DV + e - D];
    }
  if (e < D) dkOut[offDK(b, kvh, j, e)] = s;
  else dvOut[offDV(b, kvh, j, e - D)] = s;
}
#endif
