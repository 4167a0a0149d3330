// The plan's rewrites of generated OpenCL (compiler/plan/kernel_source_rewrite.h), each on a small
// source against the text it must become.
#include <catch2/catch.hpp>

#include "compiler/plan/kernel_source_rewrite.h"

namespace fbl::plan {

TEST_CASE("poolParams turns buffer parameters into a pool and an offset, and keeps images in place", "[plan][rewrite]") {
  CHECK(poolParams("__kernel void k0_add(__global const float* a, __global float* out) {\n"
                   "  out[0] = a[0];\n"
                   "}\n") ==
        "__kernel void k0_add(__global uchar* fbl_p0, ulong fbl_o0, __global uchar* fbl_p1, ulong fbl_o1) {\n"
        "  __global const float* a = (__global const float*)(fbl_p0 + fbl_o0);\n"
        "  __global float* out = (__global float*)(fbl_p1 + fbl_o1);\n"
        "  out[0] = a[0];\n"
        "}\n");
  // An image keeps its declaration in its place; the buffer after it is parameter 1 (a
  // qualifier after the star stays with the name, out of the cast).
  CHECK(poolParams("__kernel void k1_up(__read_only image2d_t src,\n    __global float* restrict dst) {\n}\n") ==
        "__kernel void k1_up(__read_only image2d_t src, __global uchar* fbl_p1, ulong fbl_o1) {\n"
        "  __global float* restrict dst = (__global float*)(fbl_p1 + fbl_o1);\n}\n");
  // No parameters: none. Two kernels in one source: both rewritten.
  CHECK(poolParams("__kernel void a() {\n}\n__kernel void b(__global int* x) {\n}\n") ==
        "__kernel void a() {\n}\n"
        "__kernel void b(__global uchar* fbl_p0, ulong fbl_o0) {\n"
        "  __global int* x = (__global int*)(fbl_p0 + fbl_o0);\n}\n");
  // A mention that does not start a line (a comment) is not a kernel.
  const std::string comment = "// see __kernel void f(__global float* x) {\n";
  CHECK(poolParams(comment) == comment);
}

TEST_CASE("scopeToKernel prefixes helpers and samplers and undefines macros", "[plan][rewrite]") {
  const std::string src =
      "#define TWICE(x) (2 * (x))\n"
      "  #define N 4\n"
      "__constant sampler_t kSmp = CLK_FILTER_NEAREST;\n"
      "inline float helper(float v) { return TWICE(v); }\n"
      "static inline float4 load (int i) { return (float4)(i); }\n"
      "__kernel void k3_x(__global float* y) { y[0] = helper(1.0f) + helperish(N) + load(0).x; }\n";
  CHECK(scopeToKernel(src, "k3_x") ==
        "#define TWICE(x) (2 * (x))\n"
        "  #define N 4\n"
        "__constant sampler_t k3_x_kSmp = CLK_FILTER_NEAREST;\n"
        "inline float k3_x_helper(float v) { return TWICE(v); }\n"
        "static inline float4 k3_x_load (int i) { return (float4)(i); }\n"
        "__kernel void k3_x(__global float* y) { y[0] = k3_x_helper(1.0f) + helperish(N) + k3_x_load(0).x; }\n"
        "\n#undef N\n#undef TWICE\n");
  // Nothing to scope: the source unchanged.
  const std::string plain = "__kernel void k(__global float* y) { y[0] = 1.0f; }\n";
  CHECK(scopeToKernel(plain, "k") == plain);
  // A helper named like the kernel keeps its name (it is the kernel's own entry).
  CHECK(scopeToKernel("inline inline void k4(int a) {}\n", "k4") == "inline inline void k4(int a) {}\n");
}

TEST_CASE("stripLeadingComments drops the header comment only", "[plan][rewrite]") {
  CHECK(stripLeadingComments("// one\n// two\nint x; // kept\n// kept too\n") == "int x; // kept\n// kept too\n");
  CHECK(stripLeadingComments("// only a comment") == "");
  CHECK(stripLeadingComments(" // indented: not a header\n") == " // indented: not a header\n");
}

TEST_CASE("planKernelSource strips, moves to pools, names and scopes in that order", "[plan][rewrite]") {
  CHECK(planKernelSource("// template header\n"
                         "#define W 2\n"
                         "inline float sq(float v) { return v * v; }\n"
                         "__kernel void {{NAME}}(__global float* y) { y[0] = sq(W); }\n",
                         "k5_sq") ==
        "#define W 2\n"
        "inline float k5_sq_sq(float v) { return v * v; }\n"
        "__kernel void k5_sq(__global uchar* fbl_p0, ulong fbl_o0) {\n"
        "  __global float* y = (__global float*)(fbl_p0 + fbl_o0); y[0] = k5_sq_sq(W); }\n"
        "\n#undef W\n");
}

}  // namespace fbl::plan
