// The two 16-bit float formats a plan may store: IEEE binary16 (fp16) and bfloat16 (the upper
// half of an f32). Both convert from f32 by rounding to nearest even, as OpenCL's
// vstore_half_rte does and as the kernels' bf16 stores do, so the reference executor and the
// kernels agree to the bit.
#pragma once

#include <cstdint>

namespace fbl {

uint16_t toHalf(float f);         // overflow gives infinity, NaN stays NaN
float fromHalf(uint16_t h);       // exact
uint16_t toBfloat16(float f);     // NaN stays NaN (quiet)
float fromBfloat16(uint16_t b);   // exact

}  // namespace fbl
