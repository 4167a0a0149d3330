#include "compiler/plan/profile.h"

#include "compiler/layout/rtile_wave_cost.h"

namespace fbl::plan {

Result<Profile> plannerProfile(const profile::HardwareProfile& hw, const std::string& origin) {
  Profile p;
  p.name = hw.name;
  p.computeUnits = hw.computeUnits;
  p.maxAllocBytes = hw.memory.maxAllocBytes.value_or(0);
  p.deviceClass = hw.deviceClass;
  p.workgroupSize = hw.opencl.workgroupSize;
  p.bufferAlignment = hw.opencl.bufferAlignment;
  p.buildOptions = hw.opencl.buildOptions;
  p.matmul = codegen::matmulCostModel(hw);
  p.tuning = profile::deviceTuning(hw);
  p.waveSize = hw.waveSize;
  if (hw.waveFootprint) {
    // R-Tiles are scored for the staging of the tiling named in the profile: it must be the one
    // the MatMuls get.
    const profile::WaveFootprintScoring& w = *hw.waveFootprint;
    const codegen::MatmulTiling& t = p.productTiling();
    if (w.tm != t.tm || w.tn != t.tn || w.tk != t.tk || w.workItems != t.wgX() * t.wgY())
      return makeError("{}: rtile_cost scores tiles for {}x{}x{} with {} work-items, but the MatMuls run {}x{}x{} with {}",
                       origin, w.tm, w.tn, w.tk, w.workItems, t.tm, t.tn, t.tk, t.wgX() * t.wgY());
    p.textureL1s = layout::bracketedTextureL1s(hw);
  }
  return p;
}

}  // namespace fbl::plan
