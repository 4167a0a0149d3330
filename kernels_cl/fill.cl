// Sets every element to one value (Pad's border, zero-initialised accumulators).
__kernel void {{NAME}}(__global {{T}}* dst) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
  dst[i] = ({{T}})({{VALUE}});
}
