// fbl.GatherGrad (scatter-add without atomics): one work-item per element of the data-shaped
// gradient sums, in index order, dy over every index position that picked its row. Only `row`
// (in [0, D)) is ever compared against an index, so an index outside [-D, D) adds to no row and
// nothing outside dy, idx or dx is touched (the forward gather wrote 0 for it).
__kernel void {{NAME}}(__global const float* dy, __global const {{TI}}* idx, __global float* dx) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
  const uint inner = i % {{INNER}}u;
  const long row = (long)((i / {{INNER}}u) % {{D}}u);
  const uint outer = i / ({{INNER}}u * {{D}}u);
  float acc = 0.0f;
  for (uint k = 0; k < {{K}}u; ++k) {
    long t = idx[k];
    if (t < 0) t += {{D}};
    if (t == row) acc += dy[(outer * {{K}}u + k) * {{INNER}}u + inner];
  }
  dx[i] = acc;
}
