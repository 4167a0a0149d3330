// ScatterElements: one work-item per output element. It starts from data and applies, in position
// order, every update whose index names it along the axis (COMBINE: the update itself for
// reduction none, so the last such position wins, as in the reference; v + u, v * u, max, min
// otherwise). A position p of the indices reaches element i when p's other coordinates are i's
// (OFFSET computes p's data offset without the axis) and idx[p], wrapped once, is i's coordinate
// along the axis; an index still outside the axis reaches no element. No two work-items write one
// element, so the result does not depend on scheduling.
__kernel void {{NAME}}(__global const {{T}}* data, __global const {{TI}}* idx, __global const {{T}}* upd,
                       __global {{T}}* out) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
  const long along = (long)((i / {{AXIS_STRIDE}}u) % {{DIM}}u);
  const ulong rest = (ulong)i - (ulong)along * {{AXIS_STRIDE}}u;
  {{T}} v = data[i];
  for (uint p = 0; p < {{POSITIONS}}u; ++p) {
    ulong off = 0;
    ulong q = p;
{{OFFSET}}
    if (off != rest) continue;
    long t = (long)idx[p];
    if (t < 0) t += {{DIM}};
    if (t == along) {
      const {{T}} u = upd[p];
      v = {{COMBINE}};
    }
  }
  out[i] = v;
}
