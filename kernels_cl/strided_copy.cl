// Movement ops as index rewrites: every element of the iteration space is copied from
// src[o_src] to dst[o_dst] (Transpose, Slice, Concat, Expand, Pad's interior).
__kernel void {{NAME}}(__global const {{T}}* src, __global {{T}}* dst) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
{{INDEX}}
  dst[o_dst] = src[o_src];
}
