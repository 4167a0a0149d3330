// Gather-family ops: one work-item per output element; generated code computes the source offset,
// reading the run-time index tensor where the op needs it (negative indices wrap). An index
// still outside the table after wrapping writes 0 and reads nothing (INDEX returns early): the
// runtime refuses such inputs before any launch, and this guard keeps a computed or unchecked
// index from reading outside `data`.
__kernel void {{NAME}}(__global const {{T}}* data, __global const {{TI}}* idx, __global {{T}}* out) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{INDEX}}
  out[i] = data[o_src];
}
