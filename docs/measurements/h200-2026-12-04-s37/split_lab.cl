// Lab kernels for C[M x N] = L[M x K] * R^T, R stored [N x K] (x A^T, and dy B with lora_B stored
// transposed), N narrow, K wide: the MLP's 16 MB narrow products. Not product code; split_lab.cc
// times them. Built with -DM -DK -DN (floats) and the tiling:
//   TR  rows a group (a multiple of 4), TC output texels a group, CPI output texels a work-item,
//   KS  K slices a group (a power of two), G K chunks: G > 1 splits K over G groups a tile,
//   PLANES 1: with G > 1, each chunk's sums go to plane g of scratch and a second launch
//   (sum_planes) adds the planes, as the tiled kernel's split-K does; PLANES 0: in one launch.
// A work-item owns 4 rows x CPI output texels of one K slice; neighbouring work-items are slices,
// so a warp reads neighbouring texels of L's rows and R's rows. The slices are summed by a tree in
// local memory. With G > 1 each group writes its tile's partial sums to scratch and counts itself
// in with atomic_inc; the group that counts last sums the G partials in chunk order (the same
// order every run: deterministic) and resets the count for the next launch.
#define KT (K / 4u)
#define NT (N / 4u)
#define RB (TR / 4u)
#define CBG (TC / CPI)
#define WG (RB * CBG * KS)
#define CHUNK (KT / G)
#define PLANE(i) ((i) * WG)

__kernel void split(__global const float4* L, __global const float4* R, __global float4* C,
                    __global float4* scratch, __global uint* count) {
  __local float4 partial[4u * CPI * WG];
  __local uint last;
  const uint id = get_local_id(0);
  const uint s = id % KS, rb = id / KS % RB, cb = id / KS / RB;
  const uint g = get_group_id(0) % G, tile = get_group_id(0) / G;
  const uint colTiles = NT / TC;
  const uint m = tile / colTiles * TR + rb * 4u, c0 = tile % colTiles * TC + cb * CPI;
  float4 acc[CPI][4];
  for (uint c = 0; c < CPI; ++c)
    for (uint i = 0; i < 4u; ++i) acc[c][i] = (float4)(0.0f);
  for (uint t = g * CHUNK + s; t < (g + 1u) * CHUNK; t += KS) {
    float4 l[4];
    for (uint i = 0; i < 4u; ++i) l[i] = L[(m + i) * KT + t];
    for (uint c = 0; c < CPI; ++c) {
      const float4 a0 = R[(4u * (c0 + c) + 0u) * KT + t], a1 = R[(4u * (c0 + c) + 1u) * KT + t];
      const float4 a2 = R[(4u * (c0 + c) + 2u) * KT + t], a3 = R[(4u * (c0 + c) + 3u) * KT + t];
      for (uint i = 0; i < 4u; ++i)
        acc[c][i] += (float4)(dot(l[i], a0), dot(l[i], a1), dot(l[i], a2), dot(l[i], a3));
    }
  }
  for (uint c = 0; c < CPI; ++c)
    for (uint i = 0; i < 4u; ++i) partial[PLANE(4u * c + i) + id] = acc[c][i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = KS / 2u; h > 0u; h >>= 1) {
    if (s < h)
      for (uint x = 0; x < 4u * CPI; ++x) partial[PLANE(x) + id] += partial[PLANE(x) + id + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#if G == 1 || PLANES
#if G == 1
  __global float4* dst = C;
#else
  __global float4* dst = scratch + g * M * NT;
#endif
  if (s == 0u)
    for (uint c = 0; c < CPI; ++c)
      for (uint i = 0; i < 4u; ++i) dst[(m + i) * NT + c0 + c] = partial[PLANE(4u * c + i) + id];
#else
  // The tile's partial sums: TR rows x TC texels, row-major, chunk g's plane.
  __global float4* mine = scratch + (tile * G + g) * TR * TC;
  const uint mt = rb * 4u, ct = cb * CPI;
  if (s == 0u) {
    for (uint c = 0; c < CPI; ++c)
      for (uint i = 0; i < 4u; ++i) mine[(mt + i) * TC + ct + c] = partial[PLANE(4u * c + i) + id];
    mem_fence(CLK_GLOBAL_MEM_FENCE);
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (id == 0u) last = atomic_inc(&count[tile]) == G - 1u;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!last) return;
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  volatile __global const float4* planes = scratch + tile * G * TR * TC;
  for (uint x = id; x < TR * TC; x += WG) {
    float4 sum = planes[x];
    for (uint k = 1u; k < G; ++k) sum += planes[k * TR * TC + x];
    const uint row = tile / colTiles * TR + x / TC, col = tile % colTiles * TC + x % TC;
    C[row * NT + col] = sum;
  }
  if (id == 0u) count[tile] = 0u;
#endif
}

// PLANES: out = the sum of the G planes of scratch, a texel a work-item.
__kernel void sum_planes(__global const float4* L, __global const float4* R, __global float4* C,
                         __global float4* scratch, __global uint* count) {
  const uint x = get_global_id(0);
  if (x >= M * NT) return;
  float4 sum = scratch[x];
  for (uint k = 1u; k < G; ++k) sum += scratch[k * M * NT + x];
  C[x] = sum;
}

// The floors: stream the same bytes (a float4 a work-item), and nothing.
__kernel void stream(__global const float4* L, __global const float4* R, __global float4* C,
                     __global float4* scratch, __global uint* count) {
  const uint i = get_global_id(0);
  const float4 v = i < M * KT ? L[i] : R[min(i - M * KT, N * KT - 1u)];
  if (i < M * NT) C[i] = v;
  else if (v.x == 1234.5f) C[0] = v;
}

__kernel void empty(__global const float4* L, __global const float4* R, __global float4* C,
                    __global float4* scratch, __global uint* count) {}
