// TopK along one axis: one work-item per line (the outer x inner positions around the axis).
// Pick j is the element ranked first among those ranked after pick j - 1, so K scans of the DIM
// elements and no scratch memory. The rank: LARGEST puts larger first, else smaller first; a NaN
// ranks above every number either way, and equal values rank by position (the reference's
// order). Values and indices go to [outer, K, inner] row-major.
bool {{NAME}}_before({{T}} a, uint ia, {{T}} b, uint ib) {
  const bool na = a != a, nb = b != b;
  if (na != nb) return {{LARGEST}} ? na : nb;
  if (!na && a != b) return {{LARGEST}} ? a > b : a < b;
  return ia < ib;
}

__kernel void {{NAME}}(__global const {{T}}* x, __global {{T}}* values, __global long* indices) {
  const uint i = get_global_id(0);
  if (i >= {{LINES}}u) return;
  const uint base = (i / {{INNER}}u) * {{DIM}}u * {{INNER}}u + i % {{INNER}}u;
  const uint out = (i / {{INNER}}u) * {{K}}u * {{INNER}}u + i % {{INNER}}u;
  {{T}} prev = x[base];
  uint prevAt = {{DIM}}u;  // none yet
  for (uint j = 0; j < {{K}}u; ++j) {
    uint at = {{DIM}}u;
    {{T}} best = x[base];
    for (uint s = 0; s < {{DIM}}u; ++s) {
      const {{T}} v = x[base + s * {{INNER}}u];
      if (prevAt < {{DIM}}u && !{{NAME}}_before(prev, prevAt, v, s)) continue;
      if (at == {{DIM}}u || {{NAME}}_before(v, s, best, at)) {
        best = v;
        at = s;
      }
    }
    values[out + j * {{INNER}}u] = best;
    indices[out + j * {{INNER}}u] = (long)at;
    prev = best;
    prevAt = at;
  }
}
