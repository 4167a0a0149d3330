// C[M x N] = L[M x K] * R[K x N] where M or N is narrow (LoRA's rank side, r <= 16): too few
// outputs for the tiled kernel (rtile_matmul.cl) to fill a GPU without split-K, whose partial
// planes cost a second launch. Here one launch does it: the K walk is split among the
// work-items of a group and summed by a tree in local memory.
//
// A work-item owns a 4 x 4 output block (rows m..m+3, one output texel n..n+3) of its group's
// TM x TN tile and one of KS interleaved K slices: slice s reads K texels s, s + KS, s + 2 KS...
// Every operand is read a stored texel at a time through the same access functions as
// rtile_matmul.cl (the ACCESS hole), whatever its layout; a transposed operand's 4 x 4 block is
// transposed in registers. FAST names the index that neighbouring work-items differ in, chosen
// by codegen so that they read neighbouring texels of the large operand:
// 0 the K slice, 1 the row block, 2 the output texel. Where R is the narrow operand stored along K
// (B in dy B), the profile may ask for 2 as well (matmul.narrow.texel_walk_min_side): the group
// then spans all of N, so that a warp reads R's rows whole and shares each L texel.
// LOW_RANK: a low-rank term (rtile_low_rank.cl, in the ACCESS hole) is added before the epilogue.
// STAGE_R: R is the narrow operand, a buffer stored along K (R_T 0: B in dy B), and neighbouring
// work-items are K slices (FAST 0). Read in place, they would read rows 4 apart, a cache line
// each; instead the group first copies the round's 4 KS rows of its TN columns into local
// memory, neighbouring work-items on neighbouring texels, and every slice reads its rows there.
// KC > 1: K is cut into KC chunks of CHUNK (a multiple of 4 KS), a group each
// (get_group_id(0) = output tile column x KC + chunk), so that a product with a long K and few
// outputs (x A^T, dy B at the MLP's width) fills the GPU with groups that each cover many rows
// and all of N: each texel of L is read once and R once per TM rows, not once per 4 x 4 block.
// Each group writes its tile's sums to its plane of `partials` and counts itself in at
// `arrivals`; the group that counts last adds the KC planes in chunk order (the same sums every
// run) and stores them, then sets the count back to 0 for the next launch (the runtime zeroes
// counts at load: planfile::Role::Counter).
// BM x BN > 1 (matmul.narrow.wide_run): a work-item owns BM row blocks by BN output texels, all
// of the narrow side, where neighbouring work-items walk the wide one (FAST 1 with a narrow N,
// FAST 2 with a narrow M): it reads each texel of the wide operand once for every block of the
// narrow side, and a warp's lanes read different texels. The tree then sums one block at a time.
// The product is a function (`product`) so that one launch can run several: the plan builder's
// launch batching (compiler/plan/launch_batching.h) appends an entry that picks a product by
// get_group_id(2) (narrowBatchEntry). OpenCL 1.2 declares __local arrays only in a kernel's own
// scope, so every entry declares the group's LOCAL_TEXELS and passes them in.
#define M {{M}}u
#define N {{N}}u
#define K {{K}}u
#define TM {{TM}}u
#define TN {{TN}}u
#define KS {{KS}}u
#define FAST {{FAST}}
#define L_T {{L_T}}
#define R_T {{R_T}}
#define LOW_RANK {{LOW_RANK}}
#define STAGE_R {{STAGE_R}}
#define KC {{KC}}u
#define CHUNK {{CHUNK}}u
#define BM {{BM}}u
#define BN {{BN}}u
#define TNT (TN / 4u)         // output texels of a tile row
#define RB (TM / 4u / BM)     // work-items along the tile's rows (BM row blocks each)
#define CB (TNT / BN)         // work-items along its columns (BN output texels each)
#define WG (RB * CB * KS)
#define SLICE_STRIDE (FAST == 0 ? 1u : RB * CB)  // work-items between slices s and s + 1 of a block
#define L_ROWS (L_T ? K : M)
#define L_COLS (L_T ? M : K)
#define R_ROWS (R_T ? N : K)
#define R_COLS (R_T ? K : N)
// The staged rows: TNT texels a row, one texel of padding after every 4 rows (a slice's rows),
// so that a quarter-warp's slices read different banks.
#define STAGED_AT(row, t) ((row) * TNT + (t) + (row) / 4u)
// Local memory: the tree's four planes of WG texels, then the staged rows.
#define LOCAL_TEXELS (4u * WG + (STAGE_R ? STAGED_AT(4u * KS, 0u) : 0u))
#define PARTIAL(i, x) shared[(i) * WG + (x)]

{{ACCESS}}

#if LOW_RANK
#define WITH_LOW_RANK(v, b, r, c) addLowRank(lhs2, rhs2, b, r, c, v)
#else
#define WITH_LOW_RANK(v, b, r, c) (v)
#endif

// Lane `i` of four texels as one texel: a 4 x 4 block read across its texels.
#define COLUMN(t, i) ((float4)((t)[0].s##i, (t)[1].s##i, (t)[2].s##i, (t)[3].s##i))

// Batch matrix `bat` of the product; `shared`: the group's LOCAL_TEXELS.
inline void product({{PARAMS}}, const uint bat, __local float4* shared) {
#if STAGE_R
  __local float4* staged = shared + 4u * WG;
#endif
  const uint id = get_local_id(0);
#if FAST == 0
  const uint s = id % KS, rb = id / KS % RB, cb = id / KS / RB;
#elif FAST == 1
  const uint rb = id % RB, cb = id / RB % CB, s = id / RB / CB;
#else
  const uint cb = id % CB, rb = id / CB % RB, s = id / CB / RB;
#endif
  const uint chunk = get_group_id(0) % KC, tileN = get_group_id(0) / KC;
  // The work-item's first row and output texel; block (bm, bn) is rows m + 4 bm.., texel n + 4 bn.
  const uint m = get_group_id(1) * TM + rb * 4u * BM, n = tileN * TN + cb * 4u * BN;
  float4 acc[BM * BN][4];  // acc[bm * BN + bn][i]: row m + 4 bm + i, columns n + 4 bn..+3
  for (uint b = 0; b < BM * BN; ++b)
    for (uint i = 0; i < 4u; ++i) acc[b][i] = (float4)(0.0f);
  const uint kEnd = min(K, (chunk + 1u) * CHUNK);
  for (uint k0 = chunk * CHUNK; k0 < kEnd; k0 += 4u * KS) {
    // Every slice runs the same rounds, past K in a short last one (the masks read zeros):
    // uniform control flow, and PoCL 5 summed wrongly when slices ran different counts.
    const uint k = k0 + s * 4u;
    float4 l[BM][4];  // l[bm][i]: L(m + 4 bm + i, k..k+3)
    for (uint bm = 0; bm < BM; ++bm) {
      const uint mb = m + 4u * bm;
#if L_T
      float4 lt[4];  // lt[j]: L(mb..mb+3, k + j)
      for (uint j = 0; j < 4u; ++j) lt[j] = MASKED_B(loadL, lhs, bat, k + j, mb, L_ROWS, L_COLS);
      l[bm][0] = COLUMN(lt, 0); l[bm][1] = COLUMN(lt, 1); l[bm][2] = COLUMN(lt, 2); l[bm][3] = COLUMN(lt, 3);
#else
      for (uint i = 0; i < 4u; ++i) l[bm][i] = MASKED_B(loadL, lhs, bat, mb + i, k, L_ROWS, L_COLS);
#endif
    }
#if STAGE_R
    barrier(CLK_LOCAL_MEM_FENCE);  // the previous round's reads are done
    for (uint x = id; x < 4u * KS * TNT; x += WG) {
      const uint row = x / TNT, t = x % TNT;
      staged[STAGED_AT(row, t)] = MASKED_B(loadR, rhs, bat, k0 + row, tileN * TN + t * 4u, R_ROWS, R_COLS);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (uint bn = 0; bn < BN; ++bn) {
      const uint nb = n + 4u * bn;
      float4 r[4];  // r[j]: R(k + j, nb..nb+3)
#if STAGE_R
      for (uint j = 0; j < 4u; ++j) r[j] = staged[STAGED_AT(s * 4u + j, cb * BN + bn)];
#elif R_T
      float4 rt[4];  // rt[i]: R(k..k+3, nb + i)
      for (uint i = 0; i < 4u; ++i) rt[i] = MASKED_B(loadR, rhs, bat, nb + i, k, R_ROWS, R_COLS);
      r[0] = COLUMN(rt, 0); r[1] = COLUMN(rt, 1); r[2] = COLUMN(rt, 2); r[3] = COLUMN(rt, 3);
#else
      for (uint j = 0; j < 4u; ++j) r[j] = MASKED_B(loadR, rhs, bat, k + j, nb, R_ROWS, R_COLS);
#endif
      for (uint bm = 0; bm < BM; ++bm)
        for (uint i = 0; i < 4u; ++i)
          acc[bm * BN + bn][i] = mad((float4)(l[bm][i].x), r[0], mad((float4)(l[bm][i].y), r[1],
                                 mad((float4)(l[bm][i].z), r[2], mad((float4)(l[bm][i].w), r[3], acc[bm * BN + bn][i]))));
    }
  }
  // A tree over the KS slices of each block (KS a power of two), one block at a time. PARTIAL(i, .)
  // is one plane per row of the block, indexed by work-item, so that neighbouring work-items touch
  // neighbouring texels (a plane per work-item put them 64 bytes apart: 4-way bank conflicts,
  // 20-30% of the kernel's time on the H200); slice s + h of a block is SLICE_STRIDE
  // work-items further on. The first slice keeps the sums.
  for (uint b = 0; b < BM * BN; ++b) {
    if (b > 0u) barrier(CLK_LOCAL_MEM_FENCE);  // the previous block's sums are read
    for (uint i = 0; i < 4u; ++i) PARTIAL(i, id) = acc[b][i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = KS / 2u; h > 0u; h >>= 1) {
      if (s < h)
        for (uint i = 0; i < 4u; ++i) PARTIAL(i, id) += PARTIAL(i, id + h * SLICE_STRIDE);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (s == 0u)
      for (uint i = 0; i < 4u; ++i) acc[b][i] = PARTIAL(i, id);
  }
#if KC > 1
  // This tile's KC planes of TM rows x TNT texels, plane `chunk` this group's.
  const uint tile = (bat * get_num_groups(1) + get_group_id(1)) * (get_num_groups(0) / KC) + tileN;
  __global float4* planes = (__global float4*)partials + tile * KC * (TM * TNT);
  // Block (bm, bn)'s first texel in a plane.
#define AT(bm, bn) (((rb * BM + (bm)) * 4u) * TNT + cb * BN + (bn))
  if (s == 0u) {
    for (uint bm = 0; bm < BM; ++bm)
      for (uint bn = 0; bn < BN; ++bn)
        for (uint i = 0; i < 4u; ++i) planes[chunk * TM * TNT + AT(bm, bn) + i * TNT] = acc[bm * BN + bn][i];
    mem_fence(CLK_GLOBAL_MEM_FENCE);
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);  // the tree's texels are free from here
  __local uint* last = (__local uint*)shared;
  if (id == 0u) *last = (uint)atomic_inc(&arrivals[tile]) == KC - 1u;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!*last || s != 0u) return;
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  if (id == 0u) atomic_xchg(&arrivals[tile], 0);
  // Read past any cache that may hold stale lines: the other groups wrote these planes.
  volatile __global const float4* sums = planes;
  for (uint bm = 0; bm < BM; ++bm)
    for (uint bn = 0; bn < BN; ++bn)
      for (uint i = 0; i < 4u; ++i) {
        float4 sum = sums[AT(bm, bn) + i * TNT];
        for (uint c = 1u; c < KC; ++c) sum += sums[c * TM * TNT + AT(bm, bn) + i * TNT];
        acc[bm * BN + bn][i] = sum;
      }
#undef AT
#else
  if (s != 0u) return;
#endif
  for (uint bm = 0; bm < BM; ++bm)
    for (uint bn = 0; bn < BN; ++bn) {
      const uint mb = m + 4u * bm, nb = n + 4u * bn;
      if (nb >= N) continue;
      for (uint i = 0; i < 4u; ++i)
        if (mb + i < M)
          storeOut(out, bat, mb + i, nb, EPILOGUE(WITH_LOW_RANK(acc[bm * BN + bn][i], bat, mb + i, nb), bat, mb + i, nb));
    }
}

__kernel void {{NAME}}({{PARAMS}}) {
  __local float4 shared[LOCAL_TEXELS];
  product({{ARGS}}, get_group_id(2), shared);
}
