// fbl.SoftmaxCrossEntropyLossGrad: dscores = dloss * (softmax(scores) - onehot(label)) / count
// ("mean"; count = rows whose label is not ignore_index), zero on ignored rows. One work-item
// per row; each counts the valid labels itself (rows are few).
__kernel void {{NAME}}(__global const float* dloss, __global const float* x,
                       __global const {{TL}}* labels, __global float* dx) {
  const uint r = get_global_id(0);
  if (r >= {{ROWS}}u) return;
  const uint base = (r / {{INNER}}u) * {{C}}u * {{INNER}}u + r % {{INNER}}u;
  float count = 0.0f;
  for (uint k = 0; k < {{ROWS}}u; ++k) {
    const long l = labels[k];
    count += (l != {{IGNORE}}L && l >= 0 && l < {{C}}) ? 1.0f : 0.0f;
  }
  const long label = labels[r];
  const int valid = label != {{IGNORE}}L && label >= 0 && label < {{C}};
  const float scale = valid ? dloss[0] / ({{MEAN}} ? count : 1.0f) : 0.0f;
  float mx = -INFINITY;
  for (uint c = 0; c < {{C}}u; ++c) mx = fmax(mx, x[base + c * {{INNER}}u]);
  float sum = 0.0f;
  for (uint c = 0; c < {{C}}u; ++c) sum += exp(x[base + c * {{INNER}}u] - mx);
  for (uint c = 0; c < {{C}}u; ++c) {
    const uint o = base + c * {{INNER}}u;
    const float p = exp(x[o] - mx) / sum;
    dx[o] = scale * (p - ((long)c == label ? 1.0f : 0.0f));
  }
}
