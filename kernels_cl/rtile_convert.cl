// Layout conversion dst = src (T = 1: dst = src^T) between any two layouts: the kernels that the
// `explicit` strategy inserts (as TFLite inserts Transpose/Reshape ops) and the upload/download
// of a row-major host matrix. A work-item moves a 4x4 element block: 4 texel reads, an in-register
// transpose when T, 4 texel writes; neighbouring work-items take neighbouring blocks of dst.
#define D_ROWS {{D_ROWS}}u
#define D_COLS {{D_COLS}}u
#define S_ROWS {{S_ROWS}}u
#define S_COLS {{S_COLS}}u
#define T {{T}}

{{ACCESS}}

__kernel void {{NAME}}({{PARAMS}}) {
  const uint c = get_global_id(0) * 4u, r = get_global_id(1) * 4u;
  if (r >= D_ROWS || c >= D_COLS) return;
  // T: dst rows r..r+3 at columns c..c+3 are src rows c..c+3 at columns r..r+3.
  const uint sr = T ? c : r, sc = T ? r : c;
  float4 v0 = MASKED(loadS, src, sr, sc, S_ROWS, S_COLS);
  float4 v1 = MASKED(loadS, src, sr + 1u, sc, S_ROWS, S_COLS);
  float4 v2 = MASKED(loadS, src, sr + 2u, sc, S_ROWS, S_COLS);
  float4 v3 = MASKED(loadS, src, sr + 3u, sc, S_ROWS, S_COLS);
  if (T) {
    const float4 w0 = (float4)(v0.x, v1.x, v2.x, v3.x), w1 = (float4)(v0.y, v1.y, v2.y, v3.y);
    const float4 w2 = (float4)(v0.z, v1.z, v2.z, v3.z), w3 = (float4)(v0.w, v1.w, v2.w, v3.w);
    v0 = w0; v1 = w1; v2 = w2; v3 = w3;
  }
  storeOut(dst, r, c, v0);
  if (r + 1u < D_ROWS) storeOut(dst, r + 1u, c, v1);
  if (r + 2u < D_ROWS) storeOut(dst, r + 2u, c, v2);
  if (r + 3u < D_ROWS) storeOut(dst, r + 3u, c, v3);
}
