// Softmax along the last axis of [ROWS x COLS] (BWD = 0: y = softmax(x)) and its backward
// (BWD = 1: dx = y * (dy - sum(y * dy))), every operand in its own layout (the ACCESS hole:
// loadA, loadB, storeOut from the Layout values). One work-group per row: work-items walk the
// row a texel at a time, neighbours on neighbouring texels, and combine through local memory.
#define ROWS {{ROWS}}u
#define COLS {{COLS}}u
#define WG {{WG}}u
#define C4 ((COLS + 3u) / 4u)
#define BWD {{BWD}}

{{ACCESS}}

// Lanes of the texel at column c that hold a column of the row.
int4 laneOk(uint c) { return (int4)(c < COLS, c + 1u < COLS, c + 2u < COLS, c + 3u < COLS) * -1; }

float groupSum(float v, __local float* s) {
  const uint l = get_local_id(0);
  s[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = WG / 2u; h > 0u; h >>= 1) {
    if (l < h) s[l] += s[l + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

float groupMax(float v, __local float* s) {
  const uint l = get_local_id(0);
  s[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint h = WG / 2u; h > 0u; h >>= 1) {
    if (l < h) s[l] = fmax(s[l], s[l + h]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void {{NAME}}({{PARAMS}}) {
  __local float s[WG];
  const uint r = get_group_id(0), l = get_local_id(0);
#if BWD
  float part = 0.0f;
  for (uint c = l * 4u; c < COLS; c += WG * 4u) part += dot(MASKED(loadA, a, r, c, ROWS, COLS), MASKED(loadB, b, r, c, ROWS, COLS));
  const float yd = groupSum(part, s);
  for (uint c = l * 4u; c < COLS; c += WG * 4u)
    storeOut(out, r, c, loadA(a, r, c) * (loadB(b, r, c) - yd));
#else
  float mx = -INFINITY;
  for (uint c = l * 4u; c < COLS; c += WG * 4u) {
    const float4 v = select((float4)(-INFINITY), loadA(a, r, c), laneOk(c));
    mx = fmax(mx, fmax(fmax(v.x, v.y), fmax(v.z, v.w)));
  }
  mx = groupMax(mx, s);
  float part = 0.0f;
  for (uint c = l * 4u; c < COLS; c += WG * 4u)
    part += dot(select((float4)(0.0f), exp(loadA(a, r, c) - mx), laneOk(c)), (float4)(1.0f));
  const float inv = 1.0f / groupSum(part, s);
  for (uint c = l * 4u; c < COLS; c += WG * 4u) storeOut(out, r, c, exp(loadA(a, r, c) - mx) * inv);
#endif
}
