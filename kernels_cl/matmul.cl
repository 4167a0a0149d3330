// Batched C[b] = alpha * A[b] x B[b] (+ beta * bias): one work-item per output element. A and B
// are read through strides, so transposed operands (Gemm's transA/transB) need no copy.
__kernel void {{NAME}}({{PARAMS}}) {
  const uint n = get_global_id(0);
  const uint m = get_global_id(1);
  const uint b = get_global_id(2);
  if (n >= {{N}}u || m >= {{M}}u) return;
{{INDEX}}
  float acc = 0.0f;
  for (uint k = 0; k < {{K}}u; ++k)
    acc += a[o_a + m * {{A_SM}}u + k * {{A_SK}}u] * bm[o_b + k * {{B_SK}}u + n * {{B_SN}}u];
{{EPILOGUE}}
}
