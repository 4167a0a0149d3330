// elementwise.cl with ITEMS output elements per work-item (codegen's elementwiseLaunch): element
// e of work-item g is i = g + e * S, S the global size, so each pass is coalesced across
// neighbouring work-items. ELEMENTS, one block per e, runs elementwise.cl's INDEX and BODY and
// keeps the value in v[e] and its offset in at[e]; STORES writes them afterwards. Every load is
// issued before any store because a store through the arena may alias a later load: storing
// element by element would leave one load in flight per work-item, too few to cover a GPU's
// memory latency.
__kernel void {{NAME}}({{PARAMS}}) {
  const uint g = get_global_id(0);
  const uint S = get_global_size(0);
  {{OUT_T}} v[{{ITEMS}}];
  uint at[{{ITEMS}}];
{{ELEMENTS}}
{{STORES}}
}
