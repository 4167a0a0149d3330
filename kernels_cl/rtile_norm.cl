// LayerNorm (RMS = 0) and RMSNorm (RMS = 1) over the last axis of [ROWS x COLS], every operand in
// its own layout (the ACCESS hole: loadA = x, loadB = dy, storeOut = y or dx). BWD = 0:
// y = (x - mean) * inv * scale (+ bias), writing the row statistics mean and inv = 1/sqrt(var+eps)
// (RMSNorm: mean = 0, var = mean(x^2)). BWD = 1: the row part of the backward,
// dx = inv * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale (RMSNorm drops mean(g)),
// reading the saved statistics; the column part (dScale, dBias) is rtile_norm_cols.cl.
// One work-group per row, walking it a texel at a time.
#define ROWS {{ROWS}}u
#define COLS {{COLS}}u
#define WG {{WG}}u
#define RMS {{RMS}}
#define HAS_BIAS {{HAS_BIAS}}
#define BWD {{BWD}}
#define EPS {{EPS}}

{{ACCESS}}

float4 vec(__global const float* p, uint c) {
  return (float4)(p[c], c + 1u < COLS ? p[c + 1u] : 0.0f, c + 2u < COLS ? p[c + 2u] : 0.0f,
                  c + 3u < COLS ? p[c + 3u] : 0.0f);
}

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

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void {{NAME}}({{PARAMS}}) {
  __local float s[WG];
  const uint r = get_group_id(0), l = get_local_id(0);
#if BWD
  const float mu = mean[r], iv = inv[r];
  float pg = 0.0f, pgx = 0.0f;
  for (uint c = l * 4u; c < COLS; c += WG * 4u) {
    const float4 g = MASKED(loadB, b, r, c, ROWS, COLS) * vec(scale, c);
    pg += dot(g, (float4)(1.0f));
    pgx += dot(g, (MASKED(loadA, a, r, c, ROWS, COLS) - mu) * iv);
  }
  const float mg = RMS ? 0.0f : groupSum(pg, s) / (float)COLS;
  const float mgx = groupSum(pgx, s) / (float)COLS;
  for (uint c = l * 4u; c < COLS; c += WG * 4u) {
    const float4 g = loadB(b, r, c) * vec(scale, c);
    const float4 xhat = (loadA(a, r, c) - mu) * iv;
    storeOut(out, r, c, iv * (g - mg - xhat * mgx));
  }
#else
  float part = 0.0f;
  for (uint c = l * 4u; c < COLS; c += WG * 4u) part += dot(MASKED(loadA, a, r, c, ROWS, COLS), (float4)(1.0f));
  const float mu = RMS ? 0.0f : groupSum(part, s) / (float)COLS;
  part = 0.0f;
  for (uint c = l * 4u; c < COLS; c += WG * 4u) {
    const float4 d = select((float4)(0.0f), MASKED(loadA, a, r, c, ROWS, COLS) - mu,
                            (int4)(c < COLS, c + 1u < COLS, c + 2u < COLS, c + 3u < COLS) * -1);
    part += dot(d, d);
  }
  const float iv = rsqrt(groupSum(part, s) / (float)COLS + EPS);
  for (uint c = l * 4u; c < COLS; c += WG * 4u) {
    float4 y = (loadA(a, r, c) - mu) * iv * vec(scale, c);
#if HAS_BIAS
    y += vec(bias, c);
#endif
    storeOut(out, r, c, y);
  }
  if (l == 0u) {
    mean[r] = mu;
    inv[r] = iv;
  }
#endif
}
