// One work-item per output element loops over its reduced elements in index order (the
// reference executor's order), then applies the finishing expression (mean: divide). With fused
// producers (compiler/plan/fusion.h) the element is computed from their operands at its flat
// input index instead of loaded (FUSED, LOAD).
__kernel void {{NAME}}({{PARAMS}}) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{INDEX}}
  {{ACC_T}} acc = {{INIT}};
  for (uint j = 0; j < {{R}}u; ++j) {
{{RINDEX}}
{{FUSED}}
    const {{ACC_T}} x = {{LOAD}};
    acc = {{COMBINE}};
  }
  dst[i] = ({{T}})({{FINISH}});
}
