// The column part of the LayerNorm/RMSNorm backward over [ROWS x COLS]: dscale[j] = sum_r
// dy[r,j] * xhat[r,j] and dbias[j] = sum_r dy[r,j], with xhat from the saved row statistics.
// The reduction walks columns, the other axis than the forward's: T = 0 reads x and dy through
// their stored [ROWS x COLS] layouts (a work-item owns a texel column and steps down the rows,
// neighbours on neighbouring texels); T = 1 reads them stored transposed, [COLS x ROWS] (what the
// `explicit` strategy converts to), a work-item walking its stored row a texel at a time.
#define ROWS {{ROWS}}u
#define COLS {{COLS}}u
#define T {{T}}

{{ACCESS}}

__kernel void {{NAME}}({{PARAMS}}) {
  const uint i = get_global_id(0);
#if T
  const uint j = i;
  if (j >= COLS) return;
  float4 ds = (float4)(0.0f), db = (float4)(0.0f);
  for (uint r = 0; r < ROWS; r += 4u) {
    const float4 d = MASKED(loadB, b, j, r, COLS, ROWS);
    float4 mu = (float4)(mean[r], 0.0f, 0.0f, 0.0f), iv = (float4)(inv[r], 0.0f, 0.0f, 0.0f);
    if (r + 1u < ROWS) { mu.y = mean[r + 1u]; iv.y = inv[r + 1u]; }
    if (r + 2u < ROWS) { mu.z = mean[r + 2u]; iv.z = inv[r + 2u]; }
    if (r + 3u < ROWS) { mu.w = mean[r + 3u]; iv.w = inv[r + 3u]; }
    ds += d * (MASKED(loadA, a, j, r, COLS, ROWS) - mu) * iv;
    db += d;
  }
  dscale[j] = dot(ds, (float4)(1.0f));
  dbias[j] = dot(db, (float4)(1.0f));
#else
  const uint c = i * 4u;
  if (c >= COLS) return;
  float4 ds = (float4)(0.0f), db = (float4)(0.0f);
  for (uint r = 0; r < ROWS; ++r) {
    const float4 d = MASKED(loadB, b, r, c, ROWS, COLS);
    ds += d * (MASKED(loadA, a, r, c, ROWS, COLS) - mean[r]) * inv[r];
    db += d;
  }
  dscale[c] = ds.x;
  dbias[c] = db.x;
  if (c + 1u < COLS) { dscale[c + 1u] = ds.y; dbias[c + 1u] = db.y; }
  if (c + 2u < COLS) { dscale[c + 2u] = ds.z; dbias[c + 2u] = db.z; }
  if (c + 3u < COLS) { dscale[c + 3u] = ds.w; dbias[c + 3u] = db.w; }
#endif
}
