// fbl.LayerNormGrad in two kernels. rows: one work-group per row (trees, row_tree.cl) recomputes the row's statistics
// and writes dx = inv * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale. cols: one
// work-item per normalized element sums dy * xhat (dScale) and dy (dBias) over the rows in order,
// reading the statistics the rows kernel saved.
#define WG {{WG}}u
{{ROW_TREE}}
__kernel void {{NAME}}_rows(__global const float* dy, __global const float* x,
                            __global const float* scale, __global float* dx,
                            __global float* row_mean, __global float* row_inv) {
  ROW_LANES({{ROWS}}u);
  const uint base = r * {{L}}u;
  float mean = 0.0f;
  for (uint j = l; j < {{L}}u; j += WG) mean += x[base + j];
  mean = rowSum(mean, part) / {{L}}.0f;
  float var = 0.0f;
  for (uint j = l; j < {{L}}u; j += WG) { const float d = x[base + j] - mean; var += d * d; }
  var = rowSum(var, part) / {{L}}.0f;
  const float inv = 1.0f / sqrt(var + {{EPS}});
  if (l == 0u) {
    row_mean[r] = mean;
    row_inv[r] = inv;
  }
  float mg = 0.0f, mgx = 0.0f;
  for (uint j = l; j < {{L}}u; j += WG) {
    const float g = dy[base + j] * scale[j];
    mg += g;
    mgx += g * (x[base + j] - mean) * inv;
  }
  mg = rowSum(mg, part) / {{L}}.0f;
  mgx = rowSum(mgx, part) / {{L}}.0f;
  for (uint j = l; j < {{L}}u; j += WG) {
    const float xhat = (x[base + j] - mean) * inv;
    dx[base + j] = inv * (dy[base + j] * scale[j] - mg - xhat * mgx);
  }
}

__kernel void {{NAME}}_cols({{COL_PARAMS}}) {
  const uint j = get_global_id(0);
  if (j >= {{L}}u) return;
  float ds = 0.0f, db = 0.0f;
  for (uint r = 0; r < {{ROWS}}u; ++r) {
    const uint base = r * {{L}}u;
    ds += dy[base + j] * (x[base + j] - row_mean[r]) * row_inv[r];
    db += dy[base + j];
  }
{{COL_STORE}}
}
