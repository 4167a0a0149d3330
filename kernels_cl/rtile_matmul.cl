// C[M x N] = L[M x K] * R[K x N], every operand in its own layout (row-major buffer, plain image,
// R-Tile image...). The layout is a parameter: codegen (compiler/codegen/rtile_kernels.cc) emits
// the ACCESS hole: functions that turn a stored (row, col) into a texel or buffer address,
// generated from the operand's Layout value. One source serves C = A*B, dA = dC*B^T and
// dB = A^T*dC: a transposed operand (L_T / R_T = 1) is read through the same stored layout,
// with the tile scattered transposed into local memory.
//
// Work-group tile TM x TN, K walked TK at a time through local memory; each work-item holds
// RM x RN results in registers (RN a multiple of 4, as float4 columns). Stored tiles are read a
// texel (4 consecutive stored columns) at a time, neighbouring work-items on neighbouring texels.
// A work-item's RM rows are consecutive (float4 local reads, broadcast across the warp) and its
// float4 columns 4*WGX apart, so the R-tile reads of a warp hit distinct banks and output texels
// stay whole. SPLIT > 1 (split-K, when the output has too few tiles to fill the device): group z
// sums K slice [z*KS, z*KS + KS) into its own plane of a row-major partial buffer, and
// rtile_splitk.cl adds the planes into the output layout.
#define M {{M}}u
#define N {{N}}u
#define K {{K}}u
#define TM {{TM}}u
#define TN {{TN}}u
#define TK {{TK}}u
#define RM {{RM}}
#define RM4 (RM / 4)
#define SPLIT {{SPLIT}}u
#define KS {{KS}}u
#define RN4 {{RN4}}
#define WGX (TN / (4u * RN4))
#define WGY (TM / RM)
#define NT (WGX * WGY)
#define L_T {{L_T}}
#define R_T {{R_T}}
// Stored extents of the operands: a transposed operand is stored the other way round.
#define L_ROWS (L_T ? K : M)
#define L_COLS (L_T ? M : K)
#define R_ROWS (R_T ? N : K)
#define R_COLS (R_T ? K : N)

// loadL, loadR, storeOut and MASKED (compiler/codegen/rtile_kernels.cc, layoutAccess).
{{ACCESS}}

__kernel __attribute__((reqd_work_group_size(WGX, WGY, 1)))
void {{NAME}}({{PARAMS}}) {
  __local float ls[TK][TM + 4];       // L tile, k-major, float4-aligned rows
  __local float rs[TK][TN + 4];       // R tile, k-major, float4-aligned rows
  const uint tx = get_local_id(0), ty = get_local_id(1);
  const uint tid = ty * WGX + tx;
  const uint m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
  float4 acc[RM][RN4];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN4; ++j) acc[i][j] = (float4)(0.0f);

  const uint slice = get_group_id(2);
  const uint kEnd = min(K, slice * KS + KS);
  for (uint k0 = slice * KS; k0 < kEnd; k0 += TK) {
    // L tile: stored region (L_T ? TK x TM : TM x TK), one texel per step.
    for (uint t = tid; t < TM * TK / 4u; t += NT) {
      const uint sc = L_T ? TM / 4u : TK / 4u;
      const uint r = t / sc, c = (t % sc) * 4u;
      const uint gr = (L_T ? k0 : m0) + r, gc = (L_T ? m0 : k0) + c;
      const float4 v = MASKED(loadL, lhs, gr, gc, L_ROWS, L_COLS);
      if (L_T) {
        ls[r][c] = v.x; ls[r][c + 1] = v.y; ls[r][c + 2] = v.z; ls[r][c + 3] = v.w;
      } else {
        ls[c][r] = v.x; ls[c + 1][r] = v.y; ls[c + 2][r] = v.z; ls[c + 3][r] = v.w;
      }
    }
    // R tile: stored region (R_T ? TN x TK : TK x TN).
    for (uint t = tid; t < TK * TN / 4u; t += NT) {
      const uint sc = R_T ? TK / 4u : TN / 4u;
      const uint r = t / sc, c = (t % sc) * 4u;
      const uint gr = (R_T ? n0 : k0) + r, gc = (R_T ? k0 : n0) + c;
      const float4 v = MASKED(loadR, rhs, gr, gc, R_ROWS, R_COLS);
      if (R_T) {
        rs[c][r] = v.x; rs[c + 1][r] = v.y; rs[c + 2][r] = v.z; rs[c + 3][r] = v.w;
      } else {
        vstore4(v, 0, &rs[r][c]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = 0; k < TK; ++k) {
      float4 a[RM4];
      float4 b[RN4];
      for (int i = 0; i < RM4; ++i) a[i] = vload4(0, &ls[k][ty * RM + 4u * i]);
      for (int j = 0; j < RN4; ++j) b[j] = vload4(0, &rs[k][(j * WGX + tx) * 4u]);
      for (int i = 0; i < RM4; ++i)
        for (int j = 0; j < RN4; ++j) {
          acc[4 * i][j] = mad((float4)(a[i].x), b[j], acc[4 * i][j]);
          acc[4 * i + 1][j] = mad((float4)(a[i].y), b[j], acc[4 * i + 1][j]);
          acc[4 * i + 2][j] = mad((float4)(a[i].z), b[j], acc[4 * i + 2][j]);
          acc[4 * i + 3][j] = mad((float4)(a[i].w), b[j], acc[4 * i + 3][j]);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  for (int i = 0; i < RM; ++i) {
    const uint m = m0 + ty * RM + i;
    if (m >= M) continue;
    for (int j = 0; j < RN4; ++j) {
      const uint n = n0 + (j * WGX + tx) * 4u;
      if (n >= N) continue;
#if SPLIT > 1
      __global float* p = out + (slice * M + m) * N + n;
      p[0] = acc[i][j].x;
      if (n + 1u < N) p[1] = acc[i][j].y;
      if (n + 2u < N) p[2] = acc[i][j].z;
      if (n + 3u < N) p[3] = acc[i][j].w;
#else
      storeOut(out, m, n, acc[i][j]);
#endif
    }
  }
}
