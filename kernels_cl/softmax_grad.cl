// fbl.SoftmaxGrad: dx = y * (dy - sum(dy * y)) along one axis; one work-item per row.
__kernel void {{NAME}}(__global const float* dy, __global const float* y, __global float* dx) {
  const uint r = get_global_id(0);
  if (r >= {{ROWS}}u) return;
  const uint base = (r / {{INNER}}u) * {{L}}u * {{INNER}}u + r % {{INNER}}u;
  float dot = 0.0f;
  for (uint j = 0; j < {{L}}u; ++j) dot += dy[base + j * {{INNER}}u] * y[base + j * {{INNER}}u];
  for (uint j = 0; j < {{L}}u; ++j) {
    const uint o = base + j * {{INNER}}u;
    dx[o] = y[o] * (dy[o] - dot);
  }
}
