// The low-rank term a product kernel adds before its epilogue (compiler/codegen/operand_layout.h,
// LowRankTerm): out += SCALE * L2 R2, with K2 (LoRA's rank) small. It spares the narrow-K product
// L2 R2 its launch and its M x N output. L2 [M x K2] ([K2 x M] when L2_T) and R2 [K2 x N]
// ([N x K2] when R2_T) are read a stored texel at a time through loadL2 / loadR2, batched like
// the product's own operands. Instantiated into the ACCESS hole of rtile_matmul.cl and
// rtile_matmul_narrow.cl, after M and N are defined.
#define K2 {{K2}}u
#define L2_T {{L2_T}}
#define R2_T {{R2_T}}
#define SCALE {{SCALE}}
#define L2_ROWS (L2_T ? K2 : M)
#define L2_COLS (L2_T ? M : K2)
#define R2_ROWS (R2_T ? N : K2)
#define R2_COLS (R2_T ? K2 : N)

inline float laneOf(float4 v, uint i) { return i == 0u ? v.x : i == 1u ? v.y : i == 2u ? v.z : v.w; }

// acc + the term at (m, n..n+3), K2 in order: the narrow kernel's store (rtile_matmul.cl adds the
// term as extra K tiles instead).
inline float4 addLowRank({{L2_PARAM}}, {{R2_PARAM}}, uint b, uint m, uint n, float4 acc) {
  for (uint k = 0; k < K2; k += 4u) {
#if L2_T
    const uint q = m & ~3u, i = m & 3u;
    const float4 l = SCALE * (float4)(laneOf(MASKED_B(loadL2, lhs2, b, k, q, L2_ROWS, L2_COLS), i),
                                      laneOf(MASKED_B(loadL2, lhs2, b, k + 1u, q, L2_ROWS, L2_COLS), i),
                                      laneOf(MASKED_B(loadL2, lhs2, b, k + 2u, q, L2_ROWS, L2_COLS), i),
                                      laneOf(MASKED_B(loadL2, lhs2, b, k + 3u, q, L2_ROWS, L2_COLS), i));
#else
    const float4 l = SCALE * MASKED_B(loadL2, lhs2, b, m, k, L2_ROWS, L2_COLS);
#endif
#if R2_T  // R2(k..k+3, n + i) for i = 0..3, a column each
    const float4 t0 = MASKED_B(loadR2, rhs2, b, n, k, R2_ROWS, R2_COLS);
    const float4 t1 = MASKED_B(loadR2, rhs2, b, n + 1u, k, R2_ROWS, R2_COLS);
    const float4 t2 = MASKED_B(loadR2, rhs2, b, n + 2u, k, R2_ROWS, R2_COLS);
    const float4 t3 = MASKED_B(loadR2, rhs2, b, n + 3u, k, R2_ROWS, R2_COLS);
    const float4 r0 = (float4)(t0.x, t1.x, t2.x, t3.x), r1 = (float4)(t0.y, t1.y, t2.y, t3.y);
    const float4 r2 = (float4)(t0.z, t1.z, t2.z, t3.z), r3 = (float4)(t0.w, t1.w, t2.w, t3.w);
#else
    const float4 r0 = MASKED_B(loadR2, rhs2, b, k, n, R2_ROWS, R2_COLS);
    const float4 r1 = MASKED_B(loadR2, rhs2, b, k + 1u, n, R2_ROWS, R2_COLS);
    const float4 r2 = MASKED_B(loadR2, rhs2, b, k + 2u, n, R2_ROWS, R2_COLS);
    const float4 r3 = MASKED_B(loadR2, rhs2, b, k + 3u, n, R2_ROWS, R2_COLS);
#endif
    acc = mad((float4)(l.x), r0, mad((float4)(l.y), r1, mad((float4)(l.z), r2, mad((float4)(l.w), r3, acc))));
  }
  return acc;
}
