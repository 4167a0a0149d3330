// LayerNormalization over the trailing elements of each row: one work-group per row, the mean
// and variance trees (row_tree.cl). Also writes the row's mean and 1/stddev when the graph asks
// for them (the backward pass does).
#define WG {{WG}}u
{{ROW_TREE}}
__kernel void {{NAME}}({{PARAMS}}) {
  ROW_LANES({{ROWS}}u);
  const uint base = r * {{L}}u;
  float mean = 0.0f;
  for (uint j = l; j < {{L}}u; j += WG) mean += x[base + j];
  mean = rowSum(mean, part) / {{L}}.0f;
  float var = 0.0f;
  for (uint j = l; j < {{L}}u; j += WG) { const float d = x[base + j] - mean; var += d * d; }
  var = rowSum(var, part) / {{L}}.0f;
  const float inv = 1.0f / sqrt(var + {{EPS}});
  for (uint j = l; j < {{L}}u; j += WG)
    y[base + j] = (x[base + j] - mean) * inv * scale[j]{{BIAS}};
  if (l == 0u) {
{{STATS}}
  }
}
