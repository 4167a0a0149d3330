// The runtime's transfer of an image tensor (viewed as a ROWS x COLS matrix) to or from its
// row-major bytes, CHUNK rows at a time through a staging buffer of CHUNK rows: the runtime writes
// the chunk's first row to `first_row` before each launch, so the staging area stays small
// whatever the tensor's size. PACK = 1: staging -> image; 0: image -> staging. A work-item moves
// a 4x4 block (4 texels).
#define ROWS {{ROWS}}u
#define COLS {{COLS}}u
#define CHUNK {{CHUNK}}u
#define PACK {{PACK}}

{{ACCESS}}

__kernel void {{NAME}}({{PARAMS}}, __global const long* restrict first_row) {
  const uint c = get_global_id(0) * 4u, lr = get_global_id(1) * 4u;
  const uint r = (uint)first_row[0] + lr;  // the tensor's row; lr is the staging row
  if (lr >= CHUNK || r >= ROWS || c >= COLS) return;
  const uint sr = PACK ? lr : r, dr = PACK ? r : lr;
  const uint sRows = PACK ? CHUNK : ROWS;
  float4 v[4];
  for (uint k = 0; k < 4u; ++k) v[k] = MASKED(loadS, src, sr + k, c, sRows, COLS);
  for (uint k = 0; k < 4u; ++k)
    if (lr + k < CHUNK && r + k < ROWS) storeOut(dst, dr + k, c, v[k]);
}
