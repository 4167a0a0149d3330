// One work-item per output element loops over its reduced elements in index order (the
// reference executor's order), then applies the finishing expression (mean: divide).
__kernel void {{NAME}}(__global const {{T}}* src, __global {{T}}* dst) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{INDEX}}
  {{ACC_T}} acc = {{INIT}};
  for (uint j = 0; j < {{R}}u; ++j) {
{{RINDEX}}
    const {{ACC_T}} x = src[o_src + o_red];
    acc = {{COMBINE}};
  }
  dst[i] = ({{T}})({{FINISH}});
}
