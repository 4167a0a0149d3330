// Lab kernels for the LoRA weight gradients at the MLP's width: C = X^T T, X stored [K x W] (x or
// dy: tokens x features, W wide), T stored [K x R] (dt or h, R narrow: 8 or 16), K the tokens
// (512). OUT_T 0 stores C [W x R] (down's x^T dt, gate and up's dy^T h); OUT_T 1 stores C^T
// [R x W] (gate and up's t^T dy, down's dh^T x). Not product code; wgrad_lab.cc times them.
// Built with -DW -DK -DR and the tiling:
//   TW  texels of W a group, CPW texels of W a work-item (its 4 CPW rows of C by all R columns),
//   KS  K slices a group (a power of two), G K chunks: G > 1 splits K over G groups a tile.
// Neighbouring work-items are neighbouring texels of W, so a warp reads a row of X in one run of
// TW/CPW texels; every work-item of a slice reads the same row of T (a broadcast). A work-item
// holds all R columns of its rows, so each texel of X is read once in all (the plans' tiles
// hold 4 of R's columns a work-item, and read each texel of X once for every 4 columns that do
// not share a group). The slices are summed by a tree in local memory, TREE planes at a time.
// With G > 1 each group writes its tile's sums to its plane of scratch and counts itself in; the
// group that counts last adds the G planes in chunk order and stores them, then resets the count.
#define WT (W / 4u)
#define RT (R / 4u)
#define TWI (TW / CPW)           // work-items across W in a group
#define WG (TWI * KS)
#define CH (K / G)               // rows of K in a chunk
#define NACC (CPW * 4u * RT)     // float4 sums a work-item: (texel c, lane i) rows x RT texels of R
#define TREE (NACC < 8u ? NACC : 8u)
#define ACC(c, i, q) acc[((c) * 4u + (i)) * RT + (q)]

// Stores the sums of C's row w (a column of X), R columns as RT texels.
inline void storeRow(__global float* C, const uint w, const float4* v) {
  for (uint q = 0; q < RT; ++q) {
#if OUT_T
    C[(4u * q + 0u) * W + w] = v[q].x;
    C[(4u * q + 1u) * W + w] = v[q].y;
    C[(4u * q + 2u) * W + w] = v[q].z;
    C[(4u * q + 3u) * W + w] = v[q].w;
#else
    vstore4(v[q], w * RT + q, C);
#endif
  }
}

__kernel void wgrad(__global const float4* X, __global const float4* T, __global float* C,
                    __global float4* scratch, __global uint* count) {
  __local float4 tree[TREE * WG];
  __local uint last;
  const uint id = get_local_id(0);
  const uint wi = id % TWI, s = id / TWI;
  const uint g = get_group_id(0) % G, tile = get_group_id(0) / G;
  const uint w0 = tile * TW + wi * CPW;  // this work-item's first texel of W
  float4 acc[NACC];
  for (uint p = 0; p < NACC; ++p) acc[p] = (float4)(0.0f);
  for (uint k = g * CH + s; k < (g + 1u) * CH; k += KS) {
    float4 t[RT];
    for (uint q = 0; q < RT; ++q) t[q] = T[k * RT + q];
    for (uint c = 0; c < CPW; ++c) {
      const float4 x = X[k * WT + w0 + c];
      for (uint q = 0; q < RT; ++q) {
        ACC(c, 0, q) = mad((float4)(x.x), t[q], ACC(c, 0, q));
        ACC(c, 1, q) = mad((float4)(x.y), t[q], ACC(c, 1, q));
        ACC(c, 2, q) = mad((float4)(x.z), t[q], ACC(c, 2, q));
        ACC(c, 3, q) = mad((float4)(x.w), t[q], ACC(c, 3, q));
      }
    }
  }
#if KS > 1
  // Slice s + h of a texel is h * TWI work-items on.
  for (uint p0 = 0; p0 < NACC; p0 += TREE) {
    for (uint p = 0; p < TREE; ++p) tree[p * WG + id] = acc[p0 + p];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = KS / 2u; h > 0u; h >>= 1) {
      if (s < h)
        for (uint p = 0; p < TREE; ++p) tree[p * WG + id] += tree[p * WG + id + h * TWI];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (s == 0u)
      for (uint p = 0; p < TREE; ++p) acc[p0 + p] = tree[p * WG + id];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif
#if G == 1
  if (s != 0u) return;
  for (uint c = 0; c < CPW; ++c)
    for (uint i = 0; i < 4u; ++i) storeRow(C, 4u * (w0 + c) + i, &ACC(c, i, 0));
#else
  // The tile's planes: 4 TW rows x RT texels each, chunk g's plane this group's.
  __global float4* planes = scratch + tile * G * (4u * TW * RT);
  if (s == 0u) {
    for (uint c = 0; c < CPW; ++c)
      for (uint i = 0; i < 4u; ++i)
        for (uint q = 0; q < RT; ++q) planes[g * 4u * TW * RT + ((wi * CPW + c) * 4u + i) * RT + q] = ACC(c, i, q);
    mem_fence(CLK_GLOBAL_MEM_FENCE);
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (id == 0u) last = atomic_inc(&count[tile]) == G - 1u;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!last) return;
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  volatile __global const float4* sums = planes;
  for (uint row = id; row < 4u * TW; row += WG) {
    float4 v[RT];
    for (uint q = 0; q < RT; ++q) v[q] = sums[row * RT + q];
    for (uint c = 1u; c < G; ++c)
      for (uint q = 0; q < RT; ++q) v[q] += sums[c * 4u * TW * RT + row * RT + q];
    storeRow(C, tile * 4u * TW + row, v);
  }
  if (id == 0u) count[tile] = 0u;
#endif
}

// The floors: stream the same bytes (a float4 a work-item), and nothing.
__kernel void stream(__global const float4* X, __global const float4* T, __global float* C,
                     __global float4* scratch, __global uint* count) {
  const uint i = get_global_id(0);
  const float4 v = i < K * WT ? X[i] : T[min(i - K * WT, K * RT - 1u)];
  if (i < W * RT) vstore4(v, i, C);
  else if (v.x == 1234.5f) vstore4(v, 0, C);
}

__kernel void empty(__global const float4* X, __global const float4* T, __global float* C,
                    __global float4* scratch, __global uint* count) {}
