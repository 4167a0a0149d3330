// The Adreno 830 profile as the paper scores tiles: its access table (tile-traversal-performance)
// rather than the profile's own wave-footprint cost. The layout-pipeline tests check the paper's
// algorithm (Table 2's propagation, the FTD-D chain search, Sec. 5.4's breakdown) against the
// paper's cost; tests/layout/wave_footprint_test.cc tests the wave-footprint cost.
#pragma once

#include <catch2/catch.hpp>

#include "compiler/profile/profile.h"

namespace fbl::testing {

inline profile::HardwareProfile paperAdreno() {
  auto p = profile::loadProfile(FBL_SOURCE_DIR "/profiles/adreno-830.json");
  REQUIRE(p.ok());
  p->waveFootprint.reset();
  p->provenance.erase("rtile_cost");
  REQUIRE(profile::validateProfile(*p, "adreno-830 (paper's cost)").ok());
  return *p;
}

}  // namespace fbl::testing
