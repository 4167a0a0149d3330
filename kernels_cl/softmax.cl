// Softmax (or LogSoftmax) along one axis: one work-item per row, its elements
// a stride apart in memory.
__kernel void {{NAME}}(__global const float* x, __global float* y) {
  const uint r = get_global_id(0);
  if (r >= {{ROWS}}u) return;
  const uint base = (r / {{INNER}}u) * {{L}}u * {{INNER}}u + r % {{INNER}}u;
  float mx = -INFINITY;
  for (uint j = 0; j < {{L}}u; ++j) mx = fmax(mx, x[base + j * {{INNER}}u]);
  float sum = 0.0f;
  for (uint j = 0; j < {{L}}u; ++j) sum += exp(x[base + j * {{INNER}}u] - mx);
  for (uint j = 0; j < {{L}}u; ++j) {
    const float v = x[base + j * {{INNER}}u] - mx;
    y[base + j * {{INNER}}u] = {{LOG}} ? v - log(sum) : exp(v) / sum;
  }
}
