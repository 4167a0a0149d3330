// ArgMax / ArgMin along one axis: one work-item per line (the outer x inner positions around the
// axis), scanning its DIM elements in order and keeping the first extremum (LAST: the last one of
// equal value); a NaN counts as the extremum and the first NaN wins, as in the reference. The
// position goes to y[line]: the output is [outer, (1,) inner] row-major.
__kernel void {{NAME}}(__global const {{T}}* x, __global long* y) {
  const uint i = get_global_id(0);
  if (i >= {{LINES}}u) return;
  const uint base = (i / {{INNER}}u) * {{DIM}}u * {{INNER}}u + i % {{INNER}}u;
  {{T}} best = x[base];
  long at = 0;
  for (uint s = 1; s < {{DIM}}u && best == best; ++s) {
    const {{T}} v = x[base + s * {{INNER}}u];
    if (v != v || v {{CMP}} best || ({{LAST}} && v == best)) {
      best = v;
      at = s;
    }
  }
  y[i] = at;
}
