// Softmax (or LogSoftmax) along one axis, its elements INNER apart in memory: one work-group of
// WG work-items per row, each walking every WG-th element; the row's max and sum are trees
// (row_tree.cl).
#define WG {{WG}}u
{{ROW_TREE}}
__kernel void {{NAME}}(__global const float* x, __global float* y) {
  ROW_LANES({{ROWS}}u);
  const uint base = (r / {{INNER}}u) * {{L}}u * {{INNER}}u + r % {{INNER}}u;
  float mx = -INFINITY;
  for (uint j = l; j < {{L}}u; j += WG) mx = fmax(mx, x[base + j * {{INNER}}u]);
  mx = rowMax(mx, part);
  float sum = 0.0f;
  for (uint j = l; j < {{L}}u; j += WG) sum += exp(x[base + j * {{INNER}}u] - mx);
  sum = rowSum(sum, part);
  for (uint j = l; j < {{L}}u; j += WG) {
    const float v = x[base + j * {{INNER}}u] - mx;
    y[base + j * {{INNER}}u] = {{LOG}} ? v - log(sum) : exp(v) / sum;
  }
}
