// LayerNormalization over the trailing elements of each row: one work-item per row. Also
// writes the row's mean and 1/stddev when the graph asks for them (the backward pass does).
__kernel void {{NAME}}({{PARAMS}}) {
  const uint r = get_global_id(0);
  if (r >= {{ROWS}}u) return;
  const uint base = r * {{L}}u;
  float mean = 0.0f;
  for (uint j = 0; j < {{L}}u; ++j) mean += x[base + j];
  mean /= {{L}}.0f;
  float var = 0.0f;
  for (uint j = 0; j < {{L}}u; ++j) { const float d = x[base + j] - mean; var += d * d; }
  var /= {{L}}.0f;
  const float inv = 1.0f / sqrt(var + {{EPS}});
  for (uint j = 0; j < {{L}}u; ++j)
    y[base + j] = (x[base + j] - mean) * inv * scale[j]{{BIAS}};
{{STATS}}
}
