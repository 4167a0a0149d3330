// Gather with its data and indices read through layouts (compute_emitters.cc, emitGather): one
// work-item per output element. HELPERS holds the offset (or texel and lane) functions of each
// operand's layout, INDEX peels the output index and reads the run-time index (negative
// indices wrap; one still outside the table writes 0 and returns, so nothing outside `data` is
// ever read), BODY fetches the element.
{{HELPERS}}
__kernel void {{NAME}}({{DATA}}, __global const {{TI}}* idx, __global {{T}}* out) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{INDEX}}
{{BODY}}
}
