// GatherND: one work-item per output element, element s of the slice that index tuple t of
// batch b picks. INDEX reads the tuple's indices, wraps a negative one once and, for one still
// outside its dimension, writes 0 and returns: no tuple makes a read outside `data`.
__kernel void {{NAME}}(__global const {{T}}* data, __global const long* idx, __global {{T}}* out) {
  const uint i = get_global_id(0);
  if (i >= {{N}}u) return;
  const uint s = i % {{SLICE}}u, bt = i / {{SLICE}}u;  // bt = b * TUPLES + t
  ulong off = (ulong)(bt / {{TUPLES}}u) * {{BATCH_STRIDE}}u + s;
{{INDEX}}
  out[i] = data[off];
}
