// NumPy .npy files (https://numpy.org/devdocs/reference/generated/numpy.lib.format.html): one
// array per file, as `numpy.save` writes it. Read strictly, because a dataset file is user input:
//  1. the magic "\x93NUMPY", version 1.0, 2.0 or 3.0 (2-byte header length in 1.0, 4-byte after);
//  2. the header, a Python dict literal with exactly the keys 'descr', 'fortran_order' and
//     'shape', ending in a newline;
//  3. 'descr' a little-endian (or byte-order-free) bool, integer or float type; 'fortran_order'
//     False (C order); 'shape' a tuple of non-negative integers;
//  4. exactly dtype x shape data bytes after the header: a truncated file or trailing bytes is
//     refused.
// Standard library only, so that an app can read its own datasets with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace fbl::npy {

struct Array {
  std::string dtype;  // fbl spelling: "i64", "i32", "f32", "f64", "f16", "u8", "i8", "bool", ...
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;  // row-major, little-endian
};

// The array, else one line naming `path` and the fault.
Result<Array> parse(const std::string& bytes, const std::string& path);
Result<Array> read(const std::string& path);

// The bytes `numpy.save` writes for `a` (version 1.0); for tests and tools that write datasets.
std::string serialize(const Array& a);

}  // namespace fbl::npy
