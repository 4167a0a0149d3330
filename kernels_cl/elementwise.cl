// One output element per work-item; each operand is read through its own (possibly
// broadcast) offset, computed from the output index by generated index code. BODY declares the
// operands and temporaries, STORE writes the element's value into `out` (a plain store, or a
// rounding one into a 16-bit float: emit_util.h, storeElement).
__kernel void {{NAME}}({{PARAMS}}) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{INDEX}}
{{BODY}}  {{STORE}};
}
