// fbl.SoftmaxGrad: dx = y * (dy - sum(dy * y)) along one axis; one work-group per row, the sum a
// tree (row_tree.cl).
#define WG {{WG}}u
{{ROW_TREE}}
__kernel void {{NAME}}(__global const float* dy, __global const float* y, __global float* dx) {
  ROW_LANES({{ROWS}}u);
  const uint base = (r / {{INNER}}u) * {{L}}u * {{INNER}}u + r % {{INNER}}u;
  float dot = 0.0f;
  for (uint j = l; j < {{L}}u; j += WG) dot += dy[base + j * {{INNER}}u] * y[base + j * {{INNER}}u];
  dot = rowSum(dot, part);
  for (uint j = l; j < {{L}}u; j += WG) {
    const uint o = base + j * {{INNER}}u;
    dx[o] = y[o] * (dy[o] - dot);
  }
}
