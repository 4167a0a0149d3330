// Work-group tree reductions over one row, shared by the row templates (softmax.cl,
// softmax_grad.cl, layernorm.cl, layernorm_grad.cl): every work-item of the group passes its
// partial and gets the row's total back, after log2(group size) barriers. The group size is a
// power of two; `part` holds one float per work-item and is free again on return. With WG = 1
// (short rows, one work-item each) a partial is already the total.
//
// ROW_LANES(rows), first in a row kernel, declares `part`, the row the work-item serves (r) and
// its lane in the row (l); with WG = 1 the work-items past the last row return.
#if WG > 1
#define ROW_LANES(rows)     \
  __local float part[WG]; \
  const uint r = get_group_id(0), l = get_local_id(0)
inline float rowSum(float v, __local float* part) {
  const uint l = get_local_id(0);
  part[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = get_local_size(0) / 2u; s > 0u; s >>= 1) {
    if (l < s) part[l] += part[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = part[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}
inline float rowMax(float v, __local float* part) {
  const uint l = get_local_id(0);
  part[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = get_local_size(0) / 2u; s > 0u; s >>= 1) {
    if (l < s) part[l] = fmax(part[l], part[l + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = part[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}
#else
#define ROW_LANES(rows)                   \
  __local float part[WG];               \
  const uint r = get_global_id(0), l = 0; \
  if (r >= (rows)) return
inline float rowSum(float v, __local float* part) { return v; }
inline float rowMax(float v, __local float* part) { return v; }
#endif
