// ScatterND: one work-item per output element. It starts from data and applies, in tuple order,
// every update whose index tuple names its slice (COMBINE: the update itself for reduction none,
// so the last such tuple wins, as in the reference; v + u, v * u, max, min otherwise). No two
// work-items write one element, so the result does not depend on scheduling. TUPLE reads a
// tuple's indices (a negative one wraps once) into the position it names among the M indexed
// dimensions; a tuple with an index outside its dimension names none and is skipped.
__kernel void {{NAME}}(__global const {{T}}* data, __global const long* idx, __global const {{T}}* upd,
                       __global {{T}}* out) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
  const uint s = i % {{SLICE}}u;
  const long slot = (long)(i / {{SLICE}}u);  // the element's position over the indexed dimensions
  {{T}} v = data[i];
  for (uint t = 0; t < {{TUPLES}}u; ++t) {
    long pos = 0;
    int ok = 1;
{{TUPLE}}
    if (ok && pos == slot) {
      const {{T}} u = upd[t * {{SLICE}}u + s];
      v = {{COMBINE}};
    }
  }
  out[i] = v;
}
