// C[M x N] = L[M x K] * R[K x N], every operand in its own layout (row-major buffer, plain image,
// R-Tile image...). The layout is a parameter: codegen (compiler/codegen/rtile_kernels.cc) emits
// the ACCESS hole: functions that turn a stored (row, col) into a texel or buffer address,
// generated from the operand's Layout value. One source serves C = A*B, dA = dC*B^T and
// dB = A^T*dC: a transposed operand (L_T / R_T = 1) is read through the same stored layout,
// with the tile scattered transposed into local memory.
//
// Staging order: per K step the group reads a stored region of each operand a texel at a time,
// read t = tid + p * NT; STAGED_R / STAGED_C place read t in chunks of SR rows x SW texels,
// row-major inside a chunk and chunk by chunk (SW = 0: plain row-major, the chunk a whole row).
// Codegen picks the chunk whose wave footprint fetches the fewest texture-cache lines
// (compiler/layout/wave_footprint.h); any chunk reads the same texels, so results do not change.
//
// Work-group tile TM x TN, K walked TK at a time through local memory; each work-item holds
// RM x RN results in registers (RN a multiple of 4, as float4 columns). Stored tiles are read a
// texel (4 consecutive stored columns) at a time, neighbouring work-items on neighbouring texels.
// A work-item's RM rows are consecutive (float4 local reads, broadcast across the warp) and its
// float4 columns 4*WGX apart, so the R-tile reads of a warp hit distinct banks and output texels
// stay whole. SPLIT > 1 (split-K, when the output has too few tiles to fill the device): group z
// sums K slice [z*KS, z*KS + KS) into its own plane of a row-major partial buffer, and
// rtile_splitk.cl adds the planes into the output layout.
//
// Batched products: every operand is read through (b, row, col), b the flat index over the
// output's batch dims (the access functions broadcast it onto the operand's own batch dims), and
// group z is b * SPLIT + slice; split-K planes are numbered the same way.
//
// A launch covers the output columns [N0, N1) (a MatmulSchedule's main part or its tail,
// compiler/codegen/matmul_tiling.h); a split launch's partial planes are N1 - N0 wide.
//
// LOW_RANK: a low-rank term (rtile_low_rank.cl, in the ACCESS hole) joins the accumulators after
// the K walk as extra K tiles, before the epilogue; under split-K it joins slice 0's plane, so the
// sum adds it once.
#define M {{M}}u
#define N {{N}}u
#define N0 {{N0}}u
#define N1 {{N1}}u
#define K {{K}}u
#define TM {{TM}}u
#define TN {{TN}}u
#define TK {{TK}}u
#define RM {{RM}}
#define RM4 (RM / 4)
#define SPLIT {{SPLIT}}u
#define KS {{KS}}u
#define PIPE {{PIPE}}
#define ALIGNED {{ALIGNED}}
#define NBUF (PIPE >= 2 ? 2 : 1)
#define RN4 {{RN4}}
#define WGX (TN / (4u * RN4))
#define WGY (TM / RM)
#define NT (WGX * WGY)
#define L_T {{L_T}}
#define R_T {{R_T}}
#define L_SR {{L_SR}}u
#define L_SW {{L_SW}}u
#define R_SR {{R_SR}}u
#define R_SW {{R_SW}}u
#define LOW_RANK {{LOW_RANK}}
// Stored extents of the operands: a transposed operand is stored the other way round.
#define L_ROWS (L_T ? K : M)
#define L_COLS (L_T ? M : K)
#define R_ROWS (R_T ? N : K)
#define R_COLS (R_T ? K : N)
// Texels per stored row of a tile region, and texels each work-item moves per tile (codegen
// checks that the tiles divide evenly among the work-items).
#define L_SC (L_T ? TM / 4u : TK / 4u)
#define R_SC (R_T ? TK / 4u : TN / 4u)
#define LPT (TM * TK / 4u / NT)
#define RPT (TK * TN / 4u / NT)
// Row and first column of read t in a region of sc texels a row (the staging order above).
#define STAGED_R(t, sc, SR, SW) ((SW) == 0u ? (t) / (sc) : (t) / ((SR) * (SW)) / ((sc) / (SW)) * (SR) + (t) % ((SR) * (SW)) / (SW))
#define STAGED_C(t, sc, SR, SW) \
  (((SW) == 0u ? (t) % (sc) : ((t) / ((SR) * (SW))) % ((sc) / (SW)) * (SW) + (t) % (SW)) * 4u)

// loadL, loadR, storeOut and MASKED_B (compiler/codegen/rtile_kernels.cc, layoutAccess), and
// EPILOGUE(v, b, r, c): the fused elementwise work on outputs (b, r, c..c+3) before they are
// stored, `v` itself when nothing is fused (compiler/codegen/fused_elementwise.h).
{{ACCESS}}

// ALIGNED (codegen: the tiles divide M, N and K) puts every tile inside the operands, so texel
// reads skip the bounds checks: on the H200 those were an eighth of the K loop's instructions.
#if ALIGNED
#define TILE_TEXEL(load, arg, b, r, c, rows, cols) load(arg, b, r, c)
#else
#define TILE_TEXEL MASKED_B
#endif

// The attribute sits behind a macro: the plan builder rewrites the parameter list that follows
// the kernel's name, and finds kernels by their plain "kernel void" prefix. A profile's build
// options may drop it so that a register cap holds (docs/kernels.md, "Registers").
#ifdef FBL_NO_REQD_WORK_GROUP_SIZE
#define WG_SIZE
#else
#define WG_SIZE __attribute__((reqd_work_group_size(WGX, WGY, 1)))
#endif
__kernel void WG_SIZE {{NAME}}({{PARAMS}}) {
  // PIPE >= 2 keeps two copies of each local tile: tile i+1 is scattered into one while tile i is
  // multiplied out of the other, so a K step needs one barrier instead of two.
  // k-major tiles, rows float4-aligned; the alignment is stated for the compiler (docs/kernels.md).
  __local float ls[NBUF][TK][TM + 4] __attribute__((aligned(16)));  // L tile
  __local float rs[NBUF][TK][TN + 4] __attribute__((aligned(16)));  // R tile
  const uint tx = get_local_id(0), ty = get_local_id(1);
  const uint tid = ty * WGX + tx;
  const uint m0 = get_group_id(1) * TM, n0 = N0 + get_group_id(0) * TN;
  float4 acc[RM][RN4];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN4; ++j) acc[i][j] = (float4)(0.0f);

  // PIPE >= 1 (GPUs): software pipelining, the next tile's texels are read into registers (LPT +
  // RPT per work-item) while the current tile is multiplied out of local memory. PIPE = 0 (CPUs:
  // PoCL keeps every value live across a barrier in memory, so the prefetch costs a round trip).
  float4 lv[LPT], rv[RPT];
// FETCH_FROM reads a K tile's stored texels of two operands (orientations LT / RT, extents
// L_R x L_C and R_R x R_C) into registers, TEXEL the read; SCATTER_AS writes them k-major into
// local buffer `q`. FETCH / SCATTER are the product's own operands.
#define FETCH_FROM(kk, loadA, argA, LT, L_R, L_C, LSR, LSW, loadB, argB, RT, R_R, R_C, RSR, RSW, TEXEL) \
  do {                                                                                         \
    for (uint p = 0; p < LPT; ++p) {                                                           \
      const uint sc = (LT) ? TM / 4u : TK / 4u;                                                \
      const uint t = tid + p * NT, r = STAGED_R(t, sc, LSR, LSW), c = STAGED_C(t, sc, LSR, LSW); \
      lv[p] = TEXEL(loadA, argA, bat, ((LT) ? (kk) : m0) + r, ((LT) ? m0 : (kk)) + c, L_R, L_C); \
    }                                                                                          \
    for (uint p = 0; p < RPT; ++p) {                                                           \
      const uint sc = (RT) ? TK / 4u : TN / 4u;                                                \
      const uint t = tid + p * NT, r = STAGED_R(t, sc, RSR, RSW), c = STAGED_C(t, sc, RSR, RSW); \
      rv[p] = TEXEL(loadB, argB, bat, ((RT) ? n0 : (kk)) + r, ((RT) ? (kk) : n0) + c, R_R, R_C); \
    }                                                                                          \
  } while (0)
#define FETCH(kk) \
  FETCH_FROM(kk, loadL, lhs, L_T, L_ROWS, L_COLS, L_SR, L_SW, loadR, rhs, R_T, R_ROWS, R_COLS, R_SR, R_SW, TILE_TEXEL)
  // Scatter the fetched stored regions into the k-major local tiles of buffer `q` (transposed
  // reads land transposed, so the inner loop is the same for every operand orientation).
#define SCATTER_AS(q, LT, LSR, LSW, RT, RSR, RSW)                                              \
  do {                                                                                         \
    for (uint p = 0; p < LPT; ++p) {                                                           \
      const uint sc = (LT) ? TM / 4u : TK / 4u;                                                \
      const uint t = tid + p * NT, r = STAGED_R(t, sc, LSR, LSW), c = STAGED_C(t, sc, LSR, LSW); \
      const float4 v = lv[p];                                                                  \
      if (LT) {                                                                                \
        vstore4(v, 0, &ls[q][r][c]);                                                           \
      } else {                                                                                 \
        ls[q][c][r] = v.x; ls[q][c + 1][r] = v.y; ls[q][c + 2][r] = v.z; ls[q][c + 3][r] = v.w; \
      }                                                                                        \
    }                                                                                          \
    for (uint p = 0; p < RPT; ++p) {                                                           \
      const uint sc = (RT) ? TK / 4u : TN / 4u;                                                \
      const uint t = tid + p * NT, r = STAGED_R(t, sc, RSR, RSW), c = STAGED_C(t, sc, RSR, RSW); \
      const float4 v = rv[p];                                                                  \
      if (RT) {                                                                                \
        rs[q][c][r] = v.x; rs[q][c + 1][r] = v.y; rs[q][c + 2][r] = v.z; rs[q][c + 3][r] = v.w; \
      } else {                                                                                 \
        vstore4(v, 0, &rs[q][r][c]);                                                           \
      }                                                                                        \
    }                                                                                          \
  } while (0)
#define SCATTER(q) SCATTER_AS(q, L_T, L_SR, L_SW, R_T, R_SR, R_SW)
  // RM x RN outer products of one K tile out of local buffer `q`. PIPE = 3 also double-buffers the
  // fragments: row k + 1's a and b are read from local memory while row k's products run, so the
  // local-memory latency hides behind the FMAs of the same work-item.
#define LOAD_FRAG(q, k, a, b)                                                                  \
  do {                                                                                         \
    for (int i = 0; i < RM4; ++i) a[i] = vload4(0, &ls[q][k][ty * RM + 4u * i]);              \
    for (int j = 0; j < RN4; ++j) b[j] = vload4(0, &rs[q][k][(j * WGX + tx) * 4u]);            \
  } while (0)
#define OUTER(a, b)                                                                            \
  do {                                                                                         \
    for (int i = 0; i < RM4; ++i)                                                              \
      for (int j = 0; j < RN4; ++j) {                                                          \
        acc[4 * i][j] = mad((float4)(a[i].x), b[j], acc[4 * i][j]);                            \
        acc[4 * i + 1][j] = mad((float4)(a[i].y), b[j], acc[4 * i + 1][j]);                    \
        acc[4 * i + 2][j] = mad((float4)(a[i].z), b[j], acc[4 * i + 2][j]);                    \
        acc[4 * i + 3][j] = mad((float4)(a[i].w), b[j], acc[4 * i + 3][j]);                    \
      }                                                                                        \
  } while (0)
#if PIPE == 3
#define MULTIPLY(q)                                                                            \
  do {                                                                                         \
    float4 a0[RM4], b0[RN4], a1[RM4], b1[RN4];                                                 \
    LOAD_FRAG(q, 0u, a0, b0);                                                                  \
    _Pragma("unroll")                                                                          \
    for (uint k = 0; k < TK; k += 2u) {                                                        \
      LOAD_FRAG(q, k + 1u, a1, b1);                                                            \
      OUTER(a0, b0);                                                                           \
      if (k + 2u < TK) LOAD_FRAG(q, k + 2u, a0, b0);                                           \
      OUTER(a1, b1);                                                                           \
    }                                                                                          \
  } while (0)
#else
#define MULTIPLY(q)                                                                            \
  do {                                                                                         \
    for (uint k = 0; k < TK; ++k) {                                                            \
      float4 a[RM4];                                                                           \
      float4 b[RN4];                                                                           \
      LOAD_FRAG(q, k, a, b);                                                                   \
      OUTER(a, b);                                                                             \
    }                                                                                          \
  } while (0)
#endif

  const uint bat = get_group_id(2) / SPLIT, slice = get_group_id(2) % SPLIT;
  const uint kBegin = slice * KS, kEnd = min(K, kBegin + KS);
#if PIPE >= 2
  // Tile i is multiplied out of buffer i % 2 while tile i + 1 is fetched and scattered into the
  // other: the barrier that ends step i - 1 is also the one that frees buffer (i + 1) % 2.
  FETCH(kBegin);
  SCATTER(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  uint q = 0;
  for (uint k0 = kBegin; k0 < kEnd; k0 += TK) {
    const bool more = k0 + TK < kEnd;
    if (more) FETCH(k0 + TK);
    MULTIPLY(q);
    if (more) SCATTER(q ^ 1u);
    barrier(CLK_LOCAL_MEM_FENCE);
    q ^= 1u;
  }
#else
  if (PIPE) FETCH(kBegin);
  for (uint k0 = kBegin; k0 < kEnd; k0 += TK) {
    if (!PIPE) FETCH(k0);
    SCATTER(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (PIPE && k0 + TK < kEnd) FETCH(k0 + TK);
    MULTIPLY(0);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

#if LOW_RANK
  // The term's K tiles after the product's, through the same local tiles and inner loop (its
  // operands' own orientations; L2 scaled as it is fetched).
  if (slice == 0u)
    for (uint k0 = 0; k0 < K2; k0 += TK) {
      FETCH_FROM(k0, loadL2, lhs2, L2_T, L2_ROWS, L2_COLS, 1u, 0u, loadR2, rhs2, R2_T, R2_ROWS, R2_COLS, 1u, 0u, MASKED_B);
      for (uint p = 0; p < LPT; ++p) lv[p] *= SCALE;
      SCATTER_AS(0, L2_T, 1u, 0u, R2_T, 1u, 0u);
      barrier(CLK_LOCAL_MEM_FENCE);
      MULTIPLY(0);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif

  for (int i = 0; i < RM; ++i) {
    const uint m = m0 + ty * RM + i;
    if (!ALIGNED && m >= M) continue;
    for (int j = 0; j < RN4; ++j) {
      const uint n = n0 + (j * WGX + tx) * 4u;
      if (!ALIGNED && n >= N1) continue;
#if SPLIT > 1
      __global float* p = out + ((bat * SPLIT + slice) * M + m) * (N1 - N0) + (n - N0);
      p[0] = acc[i][j].x;
      if (n + 1u < N1) p[1] = acc[i][j].y;
      if (n + 2u < N1) p[2] = acc[i][j].z;
      if (n + 3u < N1) p[3] = acc[i][j].w;
#else
      storeOut(out, bat, m, n, EPILOGUE(acc[i][j], bat, m, n));
#endif
    }
  }
}
