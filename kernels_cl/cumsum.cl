// CumSum along one axis: one work-item per line (the outer x inner positions around the axis),
// adding the line's DIM elements in order (REVERSE: from the end), so every sum is formed as the
// reference forms it. EXCLUSIVE: each element gets the sum of those before it.
__kernel void {{NAME}}(__global const {{T}}* x, __global {{T}}* y) {
  const uint i = get_global_id(0);
  if (i >= {{LINES}}u) return;
  const uint base = (i / {{INNER}}u) * {{DIM}}u * {{INNER}}u + i % {{INNER}}u;
  {{ACC}} acc = 0;
  for (uint s = 0; s < {{DIM}}u; ++s) {
    const uint at = base + ({{REVERSE}} ? {{DIM}}u - 1u - s : s) * {{INNER}}u;
    const {{ACC}} v = x[at];
    if ({{EXCLUSIVE}}) {
      y[at] = ({{T}})acc;
      acc += v;
    } else {
      acc += v;
      y[at] = ({{T}})acc;
    }
  }
}
