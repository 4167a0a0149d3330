// The second half of a split-K product (rtile_matmul.cl with SPLIT > 1): out = the sum of the
// SPLIT planes of the row-major partial buffer [BATCH x SPLIT x M x NP], written through the
// output's layout (the ACCESS hole: storeOut over (batch, row, col)). A work-item adds one texel
// (4 columns). EPILOGUE (see rtile_matmul.cl) applies fused elementwise work to the sums. The
// product launch covered the output columns [N0, N1), and so does this one.
#define M {{M}}u
#define N {{N}}u
#define N0 {{N0}}u
#define N1 {{N1}}u
#define NP (N1 - N0)
#define SPLIT {{SPLIT}}u

{{ACCESS}}

__kernel void {{NAME}}(__global const float* restrict part, {{OUT_PARAM}}) {
  const uint c = N0 + get_global_id(0) * 4u, r = get_global_id(1), bat = get_global_id(2);
  if (r >= M || c >= N1) return;
  float4 s = (float4)(0.0f);
  for (uint z = 0; z < SPLIT; ++z) {
    __global const float* p = part + ((bat * SPLIT + z) * M + r) * NP + (c - N0);
    s += (float4)(p[0], c + 1u < N1 ? p[1] : 0.0f, c + 2u < N1 ? p[2] : 0.0f, c + 3u < N1 ? p[3] : 0.0f);
  }
  storeOut(out, bat, r, c, EPILOGUE(s, bat, r, c));
}
