// One work-group of WG work-items per output element. Work-item l folds the reduced elements
// l, l + WG, l + 2 WG, ... (neighbouring work-items on neighbouring elements when the reduced run
// is contiguous), then the WG partials merge in local memory as a tree, log2(WG) barriers; WG = 1
// is the plain loop in index order, one work-item per output in groups of the usual size. With fused producers (compiler/plan/fusion.h) the element is
// computed from their operands at its flat input index instead of loaded (FUSED, LOAD).
// COMBINE folds one element x into acc; MERGE folds another work-item's partial x into acc
// (they differ for ReduceSumSquare).
#define WG {{WG}}u
__kernel void {{NAME}}({{PARAMS}}) {
#if {{WG}} > 1
  const uint i = get_group_id(0);
  const uint l = get_local_id(0);
#else
  const uint i = get_global_id(0);
  const uint l = 0;
  if (i >= {{N}}u) return;
#endif
{{INDEX}}
  {{ACC_T}} acc = {{INIT}};
  for (uint j = l; j < {{R}}u; j += WG) {
{{RINDEX}}
{{FUSED}}
    const {{ACC_T}} x = {{LOAD}};
    acc = {{COMBINE}};
  }
#if {{WG}} > 1
  __local {{ACC_T}} part[WG];
  part[l] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (l < s) {
      const {{ACC_T}} x = part[l + s];
      acc = {{MERGE}};
      part[l] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l != 0u) return;
#endif
  dst[i] = ({{T}})({{FINISH}});
}
