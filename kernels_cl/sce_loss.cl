// SoftmaxCrossEntropyLoss in two kernels. rows: one work-item per (sample, position) writes
// -log_softmax(score)[label] and whether the label counts (ignore_index); also log_prob if the
// graph wants it. sum: one work-item adds the rows in order (reduction mean or sum).
__kernel void {{NAME}}_rows({{PARAMS}}) {
  const uint r = get_global_id(0);
  if (r >= {{ROWS}}u) return;
  const uint base = (r / {{INNER}}u) * {{C}}u * {{INNER}}u + r % {{INNER}}u;
  float mx = -INFINITY;
  for (uint c = 0; c < {{C}}u; ++c) mx = fmax(mx, x[base + c * {{INNER}}u]);
  float sum = 0.0f;
  for (uint c = 0; c < {{C}}u; ++c) sum += exp(x[base + c * {{INNER}}u] - mx);
  const float lse = mx + log(sum);
{{LOGPROB}}
  const long label = labels[r];
  const int valid = label != {{IGNORE}}L && label >= 0 && label < {{C}};
  row_loss[r] = valid ? lse - x[base + (uint)label * {{INNER}}u] : 0.0f;
  row_w[r] = valid ? 1.0f : 0.0f;
}

__kernel void {{NAME}}_sum(__global const float* row_loss, __global const float* row_w,
                           __global float* loss) {
  if (get_global_id(0) != 0) return;
  float s = 0.0f, w = 0.0f;
  for (uint r = 0; r < {{ROWS}}u; ++r) { s += row_loss[r]; w += row_w[r]; }
  loss[0] = {{MEAN}} ? s / w : s;
}
