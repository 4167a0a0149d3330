// Lab kernels for C[M x N] = L[M x K] * R, N narrow (x A^T with RT 1: R is [N x K]; dy B with
// RT 0: R is [K x N]); every operand a row-major float4 buffer. Built with -DM -DK -DN -DRT -DKS
// (-DRB for slab, -DUNROLL to unroll the K walk). Not product code: narrow_lab.cc times them.
#define KT (K / 4u)
#define NT (N / 4u)
#if UNROLL
#define WALK _Pragma("unroll")
#else
#define WALK
#endif

// R(k..k+3, 4c..4c+3) as four texels r[j] = R(k + j, 4c..4c+3).
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

// The committed design: a group is one 4 x 4 block, KS K slices, a tree over partial[WG][4].
__kernel void block(__global const float4* L, __global const float4* R, __global float4* C) {
  __local float4 partial[KS][4];
  const uint s = get_local_id(0), g = get_group_id(0);
  const uint c = g % NT, m = g / NT * 4u;
  float4 acc[4] = {0, 0, 0, 0};
  WALK for (uint t = s; t < KT; t += KS) {
    float4 l[4], r[4];
    for (uint i = 0; i < 4u; ++i) l[i] = L[(m + i) * KT + t];
    LOAD_R4(r, t, c);
    for (uint i = 0; i < 4u; ++i) acc[i] = mad(l[i].x, r[0], mad(l[i].y, r[1], mad(l[i].z, r[2], mad(l[i].w, r[3], acc[i]))));
  }
  for (uint i = 0; i < 4u; ++i) partial[s][i] = acc[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = KS / 2u; h > 0u; h >>= 1) {
    if (s < h)
      for (uint i = 0; i < 4u; ++i) partial[s][i] += partial[s + h][i];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (s < 4u) C[(m + s) * NT + c] = partial[0][s];
}

// The same with the tree's planes lane-major: neighbouring work-items on neighbouring texels.
__kernel void block_planes(__global const float4* L, __global const float4* R, __global float4* C) {
  __local float4 partial[4][KS];
  const uint s = get_local_id(0), g = get_group_id(0);
  const uint c = g % NT, m = g / NT * 4u;
  float4 acc[4] = {0, 0, 0, 0};
  WALK for (uint t = s; t < KT; t += KS) {
    float4 l[4], r[4];
    for (uint i = 0; i < 4u; ++i) l[i] = L[(m + i) * KT + t];
    LOAD_R4(r, t, c);
    for (uint i = 0; i < 4u; ++i) acc[i] = mad(l[i].x, r[0], mad(l[i].y, r[1], mad(l[i].z, r[2], mad(l[i].w, r[3], acc[i]))));
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

// A group is RB rows, every output of them: RB x KS work-items, K slices neighbouring; each
// reads one L texel a round (no row read twice) and N outputs' R texels (R is small: cached).
__kernel void slab(__global const float4* L, __global const float4* R, __global float4* C) {
  __local float4 partial[NT][RB * KS];
  const uint id = get_local_id(0), s = id % KS, m = get_group_id(0) * RB + id / KS;
  float4 acc[NT];
  for (uint c = 0; c < NT; ++c) acc[c] = 0;
  WALK for (uint t = s; t < KT; t += KS) {
    const float4 l = L[m * KT + t];
    for (uint c = 0; c < NT; ++c) {
      float4 r[4];
      LOAD_R4(r, t, c);
      acc[c] = mad(l.x, r[0], mad(l.y, r[1], mad(l.z, r[2], mad(l.w, r[3], acc[c]))));
    }
  }
  for (uint c = 0; c < NT; ++c) partial[c][id] = acc[c];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = KS / 2u; h > 0u; h >>= 1) {
    if (s < h)
      for (uint c = 0; c < NT; ++c) partial[c][id] += partial[c][id + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (s < NT) C[m * NT + s] = partial[s][id - s];
}

// slab, but the tree stops at 32 partial sums a row and one work-item adds those: the barriers
// of the last five levels traded for 32 serial adds from local memory.
__kernel void slab_short(__global const float4* L, __global const float4* R, __global float4* C) {
  __local float4 partial[NT][RB * KS];
  const uint id = get_local_id(0), s = id % KS, m = get_group_id(0) * RB + id / KS;
  float4 acc[NT];
  for (uint c = 0; c < NT; ++c) acc[c] = 0;
  WALK for (uint t = s; t < KT; t += KS) {
    const float4 l = L[m * KT + t];
    for (uint c = 0; c < NT; ++c) {
      float4 r[4];
      LOAD_R4(r, t, c);
      acc[c] = mad(l.x, r[0], mad(l.y, r[1], mad(l.z, r[2], mad(l.w, r[3], acc[c]))));
    }
  }
  for (uint c = 0; c < NT; ++c) partial[c][id] = acc[c];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = KS / 2u; h >= 32u; h >>= 1) {
    if (s < h)
      for (uint c = 0; c < NT; ++c) partial[c][id] += partial[c][id + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (s < NT) {
    float4 sum = 0;
    for (uint j = 0; j < min(32u, KS); ++j) sum += partial[s][id - s + j];
    C[m * NT + s] = sum;
  }
}

// The floors: stream the same bytes (a float4 a work-item), and nothing.
__kernel void stream(__global const float4* L, __global const float4* R, __global float4* C) {
  const uint i = get_global_id(0);
  const float4 v = i < M * KT ? L[i] : R[min(i - M * KT, N * KT - 1u)];
  if (i < M * NT) C[i] = v;
  else if (v.x == 1234.5f) C[0] = v;
}

__kernel void empty(__global const float4* L, __global const float4* R, __global float4* C) {}
