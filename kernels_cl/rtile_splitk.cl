// The second half of a split-K product (rtile_matmul.cl with SPLIT > 1): out = the sum of the
// SPLIT planes of the row-major partial buffer [BATCH x SPLIT x M x N], written through the
// output's layout (the ACCESS hole: storeOut over (batch, row, col)). A work-item adds one texel
// (4 columns). EPILOGUE (see rtile_matmul.cl) applies fused elementwise work to the sums.
#define M {{M}}u
#define N {{N}}u
#define SPLIT {{SPLIT}}u

{{ACCESS}}

__kernel void {{NAME}}(__global const float* restrict part, {{OUT_PARAM}}) {
  const uint c = get_global_id(0) * 4u, r = get_global_id(1), bat = get_global_id(2);
  if (r >= M || c >= N) return;
  float4 s = (float4)(0.0f);
  for (uint z = 0; z < SPLIT; ++z) {
    __global const float* p = part + ((bat * SPLIT + z) * M + r) * N + c;
    s += (float4)(p[0], c + 1u < N ? p[1] : 0.0f, c + 2u < N ? p[2] : 0.0f, c + 3u < N ? p[3] : 0.0f);
  }
  storeOut(out, bat, r, c, EPILOGUE(s, bat, r, c));
}
