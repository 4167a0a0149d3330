// One output element per work-item; each operand is read through its own (possibly
// broadcast) offset, computed from the output index by generated index code. BODY declares the
// operands and temporaries, VALUE is the element's value and OUT_AT its offset in `out`.
__kernel void {{NAME}}({{PARAMS}}) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{INDEX}}
{{BODY}}  out[{{OUT_AT}}] = {{VALUE}};
}
