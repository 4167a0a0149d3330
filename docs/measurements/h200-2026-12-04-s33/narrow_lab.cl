// Lab kernels for C[M x N] = L[M x K] * R, N narrow (x A^T with RT 1: R is [N x K]; dy B with
// RT 0: R is [K x N]); every operand a row-major float4 buffer; get_group_id(1) picks one of
// several products (distinct operands, back to back in each buffer). Built with -DM -DK -DN -DRT
// -DKS. Not product code: narrow_lab.cc times them. Stop 32's lab (../h200-2026-12-03-s32/) with
// the variants that read R's rows whole: `cslice` (neighbouring work-items are output texels of
// one slice) and `allcols` (a work-item owns all N / 4 output texels of its 4 rows).
#define KT (K / 4u)
#define NT (N / 4u)

#if RT
#define LOAD_R4(r, t, c)                                                                            \
  {                                                                                                 \
    const float4 a0 = R[(4u * (c) + 0u) * KT + (t)], a1 = R[(4u * (c) + 1u) * KT + (t)];            \
    const float4 a2 = R[(4u * (c) + 2u) * KT + (t)], a3 = R[(4u * (c) + 3u) * KT + (t)];            \
    r[0] = (float4)(a0.x, a1.x, a2.x, a3.x); r[1] = (float4)(a0.y, a1.y, a2.y, a3.y);               \
    r[2] = (float4)(a0.z, a1.z, a2.z, a3.z); r[3] = (float4)(a0.w, a1.w, a2.w, a3.w);               \
  }
#else
#define LOAD_R4(r, t, c)                                                                            \
  for (uint j = 0; j < 4u; ++j) r[j] = R[(4u * (t) + j) * NT + (c)];
#endif

#define PRODUCT_OPERANDS                                                                            \
  const uint p = get_group_id(1);                                                                   \
  L += p * M * KT; R += p * N * KT; C += p * M * NT;

#define FMA4(acc, l, r)                                                                             \
  for (uint i = 0; i < 4u; ++i)                                                                     \
    acc[i] = mad(l[i].x, r[0], mad(l[i].y, r[1], mad(l[i].z, r[2], mad(l[i].w, r[3], acc[i]))));

// The committed design: a group is one 4 x 4 block, KS K slices, a binary tree over partial[4][KS].
__kernel void planes(__global const float4* L, __global const float4* R, __global float4* C) {
  __local float4 partial[4][KS];
  PRODUCT_OPERANDS
  const uint s = get_local_id(0), g = get_group_id(0);
  const uint c = g % NT, m = g / NT * 4u;
  float4 acc[4] = {0, 0, 0, 0};
  for (uint t = s; t < KT; t += KS) {
    float4 l[4], r[4];
    for (uint i = 0; i < 4u; ++i) l[i] = L[(m + i) * KT + t];
    LOAD_R4(r, t, c);
    FMA4(acc, l, r)
  }
  for (uint i = 0; i < 4u; ++i) partial[i][s] = acc[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = KS / 2u; h > 0u; h >>= 1) {
    if (s < h)
      for (uint i = 0; i < 4u; ++i) partial[i][s] += partial[i][s + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (s < 4u) C[(m + s) * NT + c] = partial[s][0];
}

// A group is 4 rows by all NT output texels; work-item id = c + NT s: neighbours are the output
// texels of one slice, so they read R's rows whole (and the same L texel). KS slices in all.
__kernel void cslice(__global const float4* L, __global const float4* R, __global float4* C) {
  __local float4 partial[4][KS];
  PRODUCT_OPERANDS
  const uint id = get_local_id(0), c = id % NT, s = id / NT;
  const uint m = get_group_id(0) * 4u;
  float4 acc[4] = {0, 0, 0, 0};
  for (uint t = s; t < KT; t += KS / NT) {
    float4 l[4], r[4];
    for (uint i = 0; i < 4u; ++i) l[i] = L[(m + i) * KT + t];
    LOAD_R4(r, t, c);
    FMA4(acc, l, r)
  }
  for (uint i = 0; i < 4u; ++i) partial[i][id] = acc[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = KS / NT / 2u; h > 0u; h >>= 1) {
    if (s < h)
      for (uint i = 0; i < 4u; ++i) partial[i][id] += partial[i][id + h * NT];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (s < 4u) C[(m + s) * NT + c] = partial[s][c];
}

// A work-item owns all NT output texels of its group's 4 rows: it reads each L texel once and
// R's 4 rows (RT 0) or N rows' texels (RT 1) whole; the tree sums 4 NT planes.
__kernel void allcols(__global const float4* L, __global const float4* R, __global float4* C) {
  __local float4 partial[4u * NT][KS];
  PRODUCT_OPERANDS
  const uint s = get_local_id(0);
  const uint m = get_group_id(0) * 4u;
  float4 acc[NT][4];
  for (uint c = 0; c < NT; ++c)
    for (uint i = 0; i < 4u; ++i) acc[c][i] = 0;
  for (uint t = s; t < KT; t += KS) {
    float4 l[4];
    for (uint i = 0; i < 4u; ++i) l[i] = L[(m + i) * KT + t];
    for (uint c = 0; c < NT; ++c) {
      float4 r[4];
      LOAD_R4(r, t, c);
      FMA4(acc[c], l, r)
    }
  }
  for (uint c = 0; c < NT; ++c)
    for (uint i = 0; i < 4u; ++i) partial[4u * c + i][s] = acc[c][i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = KS / 2u; h > 0u; h >>= 1) {
    if (s < h)
      for (uint x = 0; x < 4u * NT; ++x) partial[x][s] += partial[x][s + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (s < 4u * NT) C[(m + s % 4u) * NT + s / 4u] = partial[s][0];
}

// The floors: stream the same bytes (a float4 a work-item), and nothing.
__kernel void stream(__global const float4* L, __global const float4* R, __global float4* C) {
  PRODUCT_OPERANDS
  const uint i = get_global_id(0);
  const float4 v = i < M * KT ? L[i] : R[min(i - M * KT, N * KT - 1u)];
  if (i < M * NT) C[i] = v;
  else if (v.x == 1234.5f) C[0] = v;
}

__kernel void empty(__global const float4* L, __global const float4* R, __global float4* C) {}
