// Specialises kernels_cl/rtile_*.cl for operand layouts:
//  1. each operand's Layout becomes an access function (layoutAccess): its index map's outputs,
//     printed as unsigned OpenCL C over (i0, i1) = (stored row, stored column) -> texel (x, y)
//     for images, element offset for buffers (4 offsets, guarded, unless the buffer is
//     row-major with a multiple-of-4 row, which is one vload4);
//  2. the template's constants (extents, tiling, transposition flags) become literals, so the
//     device compiler folds the layout arithmetic and the unused transposition branch;
//  3. launch sizes follow the tiling (matmul) or the 4x4 block (conversion).
#include "compiler/codegen/rtile_kernels.h"

#include <cctype>

#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/codegen/index_code.h"
#include "compiler/codegen/templates.h"
#include "compiler/layout/simplify.h"
#include "runtime/plan_file.h"

namespace fbl::codegen {

using layout::Layout;
using layout::Storage;

namespace {

// Sampler and the masked texel reads shared by every rtile template (the sampler only where an
// operand is an image: buffer-only programs then build on devices without image support).
constexpr const char* kSampler =
    "__constant sampler_t kSmp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;\n";
constexpr const char* kMasked = R"CL(// A stored texel with the lanes past the last column zeroed (padding never enters a sum).
#define MASKED(load, arg, r, c, rows, cols)                                                \
  ((r) < (rows) && (c) < (cols)                                                          \
       ? select((float4)(0.0f), load(arg, r, c),                                         \
                (int4)((c) < (cols), (c) + 1u < (cols), (c) + 2u < (cols), (c) + 3u < (cols)) * -1) \
       : (float4)(0.0f))
#define MASKED_B(load, arg, b, r, c, rows, cols)                                            \
  ((r) < (rows) && (c) < (cols)                                                          \
       ? select((float4)(0.0f), load(arg, b, r, c),                                      \
                (int4)((c) < (cols), (c) + 1u < (cols), (c) + 2u < (cols), (c) + 3u < (cols)) * -1) \
       : (float4)(0.0f))
)CL";

std::string prelude(std::initializer_list<const Layout*> ls) {
  bool image = false;
  for (const Layout* l : ls) image = image || l->storage() == Storage::Image2D;
  return std::string(image ? kSampler : "") + kMasked;
}

int64_t rowsOf(const Layout& l) { return l.shape().size() >= 2 ? l.shape()[l.shape().size() - 2] : 1; }
int64_t colsOf(const Layout& l) { return l.shape().back(); }

Status check2D(const Layout& l, const char* role) {
  if (l.shape().size() != 2)
    return makeError("rtile kernels: operand '{}' has shape {}, expected a matrix", role,
                     ir::shapeToString(l.shape()));
  return {};
}

std::string fill(std::string_view tmpl, const std::map<std::string, std::string>& vars,
                 const std::string& name) {
  std::string s = instantiate(tmpl, vars);
  for (size_t p = s.find("{{NAME}}"); p != std::string::npos; p = s.find("{{NAME}}", p + name.size()))
    s.replace(p, 8, name);
  return s;
}


std::string epilogueCode(const MatmulEpilogue* epi) {
  return epi ? epi->code : "#define EPILOGUE(v, b, r, c) (v)\n";
}

}  // namespace

std::string layoutParam(const Layout& l, const std::string& name, bool write) {
  if (l.storage() == Storage::Image2D)
    return fmt::format("{} image2d_t {}", write ? "__write_only" : "__read_only", name);
  if (!l.encoding().plain()) return fmt::format("__global const uchar* restrict {}", name);
  return fmt::format("__global {}float* restrict {}", write ? "" : "const ", name);
}

namespace {

// Statements returning the float4 of elements e..e+3 (e a multiple of 4) of an encoded matrix
// whose columns are a multiple of 4 (so the four share a row, and with groups of a multiple of 4
// along the columns, a scale); "" where the columns are not.
std::string encodedTexelRead(const layout::Encoding& e) {
  if (e.cols % 4 != 0) return "";
  if (e.bits == 16) return "    return vload_half4(e >> 2, (__global const half*)p);\n";
  const std::string scales = fmt::format("(__global const half*)(p + {}u)", planfile::encodedScalesOffset(e.bits, e.rows, e.cols));
  // Groups along the columns: one scale; along the rows: the four columns' scales, consecutive.
  const std::string scale =
      e.axis == 1 ? fmt::format("(float4)(vload_half(e / {}u, {}))", e.group, scales)
                  : fmt::format("vload_half4((e / {}u * {}u + e % {}u) >> 2, {})", e.cols * e.group, e.cols, e.cols, scales);
  if (e.bits == 8) return fmt::format("    return convert_float4(vload4(0, (__global const char*)p + e)) * {};\n", scale);
  return fmt::format("    const uchar2 q = vload2(0, p + (e >> 1));\n"
                     "    return (convert_float4((int4)(q.x & 15, q.x >> 4, q.y & 15, q.y >> 4)) - 8.0f) * {};\n",
                     scale);
}

}  // namespace

std::string encodedElementFunction(const std::string& fn, const layout::Encoding& e) {
  const int64_t n = e.rows * e.cols;
  std::string s = fmt::format("inline float {}(__global const uchar* p, uint e) {{\n  e = min(e, {}u);\n", fn, n - 1);
  if (e.bits == 16) return s + "  return vload_half(e, (__global const half*)p);\n}\n";
  const std::string scale =
      e.axis == 1 ? fmt::format("e / {}u * {}u + e % {}u / {}u", e.cols, e.cols / e.group, e.cols, e.group)
                  : fmt::format("e / {}u * {}u + e % {}u", e.cols * e.group, e.cols, e.cols);
  s += fmt::format("  const float s = vload_half({}, (__global const half*)(p + {}u));\n", scale,
                   planfile::encodedScalesOffset(e.bits, e.rows, e.cols));
  if (e.bits == 8) return s + "  return s * (float)((__global const char*)p)[e];\n}\n";
  return s + "  return s * (float)((int)((p[e >> 1] >> ((e & 1u) << 2)) & 15u) - 8);\n}\n";
}

namespace {

// `e` with the column variable written i1 = 4q + j (j < 4 a fresh variable, index colVar + 1),
// simplified: what one texel's lanes j = 0..3 see.
layout::Expr perLane(const layout::Expr& e, int colVar, int64_t cols) {
  std::vector<layout::Expr> by;
  for (int v = 0; v <= colVar; ++v) by.push_back(layout::Expr());
  const int jVar = colVar + 1;
  const layout::Expr j = layout::Expr::var(jVar, layout::kLanes, "j_");
  // Identity for the other variables: rebuild them from the expression itself.
  std::vector<layout::Expr> stack{e};
  while (!stack.empty()) {
    layout::Expr x = stack.back();
    stack.pop_back();
    switch (x.kind()) {
      case layout::ExprKind::Var:
        if (x.varIndex() <= colVar) by[static_cast<size_t>(x.varIndex())] = x;
        break;
      case layout::ExprKind::Add:
        for (const auto& t : x.terms()) stack.push_back(t);
        break;
      case layout::ExprKind::Mul:
      case layout::ExprKind::Div:
      case layout::ExprKind::Mod: stack.push_back(x.operand()); break;
      default: break;
    }
  }
  const int64_t texels = (cols + layout::kLanes - 1) / layout::kLanes;
  by[static_cast<size_t>(colVar)] = layout::Expr::var(colVar, texels, "q_") * layout::kLanes + j;
  by.push_back(j);
  return layout::simplify(layout::substitute(e, by));
}

// Do lanes i1..i1+3 of a texel (i1 a multiple of 4) lie at consecutive offsets? Asks the
// simplifier whether offset - j is free of j (then one vload4/vstore4 serves the texel); a miss
// only costs the scalar path.
// Memoized: a plan asks about the same few layouts for every product, and each question costs
// a simplification (a sixth of llama-full's compile before). Per thread, so compiles may run in
// parallel.
bool texelContiguous(const layout::Expr& off, int colVar, int64_t cols) {
  if (cols % layout::kLanes != 0) return false;
  struct Key {
    layout::Expr off;
    int colVar;
    int64_t cols;
    bool operator==(const Key& o) const { return colVar == o.colVar && cols == o.cols && off == o.off; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return k.off.hash() ^ (std::hash<int64_t>()(k.cols) * 31 + k.colVar); }
  };
  static thread_local std::unordered_map<Key, bool, KeyHash> answers;
  const Key key{off, colVar, cols};
  if (auto it = answers.find(key); it != answers.end()) return it->second;
  const int jVar = colVar + 1;
  const layout::Expr j = layout::Expr::var(jVar, layout::kLanes, "j_");
  const bool contiguous = !layout::usesVar(layout::simplify(perLane(off, colVar, cols) + j * -1), jVar);
  answers.emplace(key, contiguous);
  return contiguous;
}

// Do lanes i1..i1+3 (i1 a multiple of 4) fill one texel of an image, lane j in RGBA lane j?
bool texelAligned(const Layout& l) {
  const int colVar = static_cast<int>(l.shape().size()) - 1;
  const int64_t cols = colsOf(l);
  const int jVar = colVar + 1;
  const layout::Expr j = layout::Expr::var(jVar, layout::kLanes, "j_");
  const auto& o = l.map().outputs();
  return !layout::usesVar(perLane(o[0], colVar, cols), jVar) && !layout::usesVar(perLane(o[1], colVar, cols), jVar) &&
         layout::simplify(perLane(o[2], colVar, cols) + j * -1).isConst(0);
}

// Access functions over the domain of `l`: (i0, i1), or (b, i0, i1) when `batched`.
Result<std::string> accessFunctions(const std::string& fn, const Layout& l, bool write, bool batched) {
  const auto& outs = l.map().outputs();
  const std::string param = layoutParam(l, "p", write);
  const std::string idx = batched ? "uint b, uint i0, uint i1" : "uint i0, uint i1";
  const std::string call = batched ? "b, i0, i1" : "i0, i1";
  if (l.storage() == Storage::Image2D) {
    if (!texelAligned(l))
      return makeError("rtile access {}: image layout {} does not keep a texel's 4 columns in its lanes", fn, l.str());
    FBL_ASSIGN(std::string x, layout::toOpenCL(outs[0]));
    FBL_ASSIGN(std::string y, layout::toOpenCL(outs[1]));
    const std::string coord = fmt::format("(int2)((int)({}), (int)({}))", x, y);
    if (write)
      return fmt::format("inline void {}({}, {}, float4 v) {{ write_imagef(p, {}, v); }}\n", fn, param, idx, coord);
    return fmt::format("inline float4 {}({}, {}) {{ return read_imagef(p, kSmp, {}); }}\n", fn, param, idx, coord);
  }
  FBL_ASSIGN(std::string off, layout::toOpenCL(outs[0]));
  const int64_t cols = colsOf(l);
  const int colVar = static_cast<int>(l.shape().size()) - 1;
  std::string s = fmt::format("inline uint {}_off({}) {{ return {}; }}\n", fn, idx, off);
  auto at = [&](int lane) {
    return fmt::format("{}_off({}{})", fn, batched ? "b, i0, i1" : "i0, i1", lane ? fmt::format(" + {}u", lane) : "");
  };
  // A frozen weight stored narrower is read through its dequantizing element function.
  const bool encoded = !l.encoding().plain();
  if (encoded && write) return makeError("rtile access {}: an encoded buffer ({}) is never written", fn, l.encoding().str());
  if (encoded) s += encodedElementFunction(fn + "_el", l.encoding());
  auto element = [&](const std::string& off) {
    return encoded ? fmt::format("{}_el(p, {})", fn, off) : fmt::format("p[{}]", off);
  };
  if (texelContiguous(outs[0], colVar, cols)) {
    if (write)
      return s + fmt::format("inline void {}({}, {}, float4 v) {{ vstore4(v, 0, p + {}_off({})); }}\n", fn, param,
                             idx, fn, call);
    if (!encoded)
      return s + fmt::format("inline float4 {}({}, {}) {{ return vload4(0, p + {}_off({})); }}\n", fn, param, idx, fn,
                             call);
    // Four consecutive elements; from a multiple of 4 (every texel of a row-major matrix whose
    // columns are, read along them) they are one 4-, 2- or 8-byte load and share one scale (or
    // four consecutive ones), else each lane is read on its own (past the last element they
    // read the last, which MASKED_B zeroes).
    s += fmt::format("inline float4 {}({}, {}) {{\n  const uint e = {}_off({});\n", fn, param, idx, fn, call);
    if (const std::string whole = encodedTexelRead(l.encoding()); !whole.empty())
      s += fmt::format("  if ((e & 3u) == 0u) {{\n{}  }}\n", whole);
    return s + fmt::format("  return (float4)({}, {}, {}, {});\n}}\n", element("e"), element("e + 1u"), element("e + 2u"),
                           element("e + 3u"));
  }
  if (write) {
    s += fmt::format("inline void {}({}, {}, float4 v) {{\n", fn, param, idx);
    s += fmt::format("  p[{}] = v.x;\n", at(0));
    const char* lanes = "xyzw";
    for (int k = 1; k < 4; ++k) s += fmt::format("  if (i1 + {}u < {}u) p[{}] = v.{};\n", k, cols, at(k), lanes[k]);
    return s + "}\n";
  }
  s += fmt::format("inline float4 {}({}, {}) {{\n  return (float4)({}", fn, param, idx, element(at(0)));
  for (int k = 1; k < 4; ++k) s += fmt::format(",\n      i1 + {}u < {}u ? {} : 0.0f", k, cols, element(at(k)));
  return s + ");\n}\n";
}

// `l` ([batch..., rows, cols]) seen from (b, i0, i1), b the flat index over the product's batch
// dims `batch`; l's own batch dims are right-aligned against them and broadcast where 1.
Result<Layout> batchedView(const Layout& l, const ir::Shape& batch, const char* role) {
  const ir::Shape& s = l.shape();
  if (s.size() < 2)
    return makeError("rtile matmul: operand '{}' has shape {}, expected a matrix", role, ir::shapeToString(s));
  const size_t lb = s.size() - 2;
  if (lb > batch.size())
    return makeError("rtile matmul: operand '{}' of shape {} has more batch dims than the output's {}", role,
                     ir::shapeToString(s), ir::shapeToString(batch));
  const int64_t count = ir::numElements(batch);
  const layout::Expr b = layout::Expr::var(0, count, "b");
  std::vector<layout::Expr> outs;
  const size_t lead = batch.size() - lb;
  for (size_t d = 0; d < lb; ++d) {
    const int64_t od = batch[lead + d];
    if (s[d] == 1) {
      outs.push_back(layout::Expr::constant(0));
      continue;
    }
    if (s[d] != od)
      return makeError("rtile matmul: operand '{}' of shape {} does not broadcast to batch {}", role,
                       ir::shapeToString(s), ir::shapeToString(batch));
    int64_t stride = 1;
    for (size_t e = lead + d + 1; e < batch.size(); ++e) stride *= batch[e];
    outs.push_back(layout::floorMod(layout::floorDiv(b, stride), od));
  }
  outs.push_back(layout::Expr::var(1, s[lb], "i0"));
  outs.push_back(layout::Expr::var(2, s[lb + 1], "i1"));
  return l.compose(layout::IndexMap({count, s[lb], s[lb + 1]}, std::move(outs), s));
}

// Dims before the last two.
ir::Shape batchOf(const Layout& l) {
  const ir::Shape& s = l.shape();
  return s.size() > 2 ? ir::Shape(s.begin(), s.end() - 2) : ir::Shape{};
}

}  // namespace

bool matmulFoldsBatch(const MatmulOperand& lhs, const MatmulOperand& rhs, const Layout& out,
                      const LowRankOperands* lowRank) {
  const int64_t batchCount = ir::numElements(batchOf(out));
  const bool term = lowRank == nullptr || (!lowRank->lhs.transposed && ir::numElements(batchOf(lowRank->rhs.stored)) == 1 &&
                                           ir::numElements(batchOf(lowRank->lhs.stored)) == batchCount);
  return batchCount > 1 && !lhs.transposed && ir::numElements(batchOf(rhs.stored)) == 1 &&
         ir::numElements(batchOf(lhs.stored)) == batchCount && term;
}

bool texelsContiguous(const Layout& l) {
  if (l.shape().empty()) return false;
  if (l.storage() == Storage::Image2D) return texelAligned(l);
  return texelContiguous(l.map().outputs()[0], static_cast<int>(l.shape().size()) - 1, colsOf(l));
}

Result<std::string> layoutAccess(const std::string& fn, const Layout& l, bool write) {
  FBL_TRY(check2D(l, fn.c_str()));
  return accessFunctions(fn, l, write, false);
}

namespace {

// An unbatched rhs under a batched, untransposed lhs: the batch folds into M (one [B*M x K]
// product fills the tiles, or the narrow kernel's groups, better than B thin ones).
struct FoldedProduct {
  int64_t m;
  MatmulOperand lhs, rhs;
  Layout out;
  std::optional<LowRankOperands> lowRank;
  const LowRankOperands* term() const { return lowRank ? &*lowRank : nullptr; }
};

Result<std::optional<FoldedProduct>> foldBatch(int64_t m, int64_t k, int64_t n, const MatmulOperand& lhs,
                                               const MatmulOperand& rhs, const Layout& out,
                                               const LowRankOperands* lowRank) {
  if (!matmulFoldsBatch(lhs, rhs, out, lowRank)) return std::optional<FoldedProduct>();
  const int64_t rows = ir::numElements(batchOf(out)) * m;
  auto unbatched = [](const Layout& l) { return l.reshape({rowsOf(l), colsOf(l)}); };
  FBL_ASSIGN(Layout l2, lhs.stored.reshape({rows, k}));
  FBL_ASSIGN(Layout r2, unbatched(rhs.stored));
  FBL_ASSIGN(Layout o2, out.reshape({rows, n}));
  FoldedProduct f{rows, {l2, false, lhs.staging}, {r2, rhs.transposed, rhs.staging}, o2, std::nullopt};
  if (lowRank) {
    FBL_ASSIGN(Layout tl, lowRank->lhs.stored.reshape({rows, lowRank->k}));
    FBL_ASSIGN(Layout tr, unbatched(lowRank->rhs.stored));
    f.lowRank = LowRankOperands{{tl, false}, {tr, lowRank->rhs.transposed}, lowRank->k, lowRank->scale};
  }
  return std::optional(std::move(f));
}

// lhs [M x K] ([K x M] transposed), rhs [K x N] ([N x K]), out [M x N], each with batch dims.
Status checkProductShapes(const char* kind, const std::string& name, int64_t m, int64_t k, int64_t n,
                          const MatmulOperand& lhs, const MatmulOperand& rhs, const Layout& out) {
  auto expect = [&](const Layout& l, int64_t r, int64_t c, const char* role) -> Status {
    if (l.shape().size() < 2 || rowsOf(l) != r || colsOf(l) != c)
      return makeError("{} {}: operand '{}' is stored {}, expected [..., {}, {}]", kind, name, role,
                       ir::shapeToString(l.shape()), r, c);
    return {};
  };
  FBL_TRY(expect(lhs.stored, lhs.transposed ? k : m, lhs.transposed ? m : k, "lhs"));
  FBL_TRY(expect(rhs.stored, rhs.transposed ? n : k, rhs.transposed ? k : n, "rhs"));
  return expect(out, m, n, "out");
}

// `cols` with end 0 resolved to n; its ends must be whole texels (or n) in order, inside [0, n].
Result<ColumnRange> checkColumns(const char* kind, const std::string& name, int64_t n, ColumnRange cols) {
  if (cols.end == 0) cols.end = n;
  if (cols.begin < 0 || cols.begin >= cols.end || cols.end > n || cols.begin % 4 != 0 || (cols.end % 4 != 0 && cols.end != n))
    return makeError("{} {}: columns [{}, {}) are not whole texels inside [0, {})", kind, name, cols.begin, cols.end, n);
  return cols;
}

// The declarations of a generated parameter list, trimmed; each ends in its parameter's name.
std::vector<std::string> parameterDecls(const std::string& params) {
  std::vector<std::string> decls;
  for (size_t p = 0; p <= params.size();) {
    size_t comma = params.find(',', p);
    if (comma == std::string::npos) comma = params.size();
    const size_t begin = params.find_first_not_of(" \n", p), end = params.find_last_not_of(" \n", comma - 1);
    FBL_ASSERT(begin != std::string::npos && begin < comma && end != std::string::npos && end >= begin);
    decls.push_back(params.substr(begin, end + 1 - begin));
    p = comma + 1;
  }
  return decls;
}

std::string parameterName(const std::string& decl) {
  size_t begin = decl.size();
  while (begin > 0 && (std::isalnum(static_cast<unsigned char>(decl[begin - 1])) || decl[begin - 1] == '_')) --begin;
  FBL_ASSERT(begin < decl.size());
  return decl.substr(begin);
}

std::vector<std::string> parameterNames(const std::string& params) {
  std::vector<std::string> names;
  for (const std::string& d : parameterDecls(params)) names.push_back(parameterName(d));
  return names;
}

// "a<suffix>, b<suffix>, ..."
std::string joinNames(const std::vector<std::string>& names, const std::string& suffix) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n + suffix;
  return s;
}

// The ACCESS hole (loadL, loadR, storeOut over the batched views, then the epilogue) and the
// parameter list of a product kernel; `partialOut`: the output is split-K's row-major planes.
struct ProductSource {
  std::string access, params;
};

Result<ProductSource> productSource(int64_t m, int64_t n, const MatmulOperand& lhs, const MatmulOperand& rhs,
                                    const Layout& out, bool partialOut, const MatmulEpilogue* epi,
                                    const LowRankOperands* lowRank) {
  const ir::Shape batch = batchOf(out);
  FBL_ASSIGN(Layout lv, batchedView(lhs.stored, batch, "lhs"));
  FBL_ASSIGN(Layout rv, batchedView(rhs.stored, batch, "rhs"));
  FBL_ASSIGN(Layout ov, batchedView(out, batch, "out"));
  FBL_ASSIGN(std::string loadL, accessFunctions("loadL", lv, false, true));
  FBL_ASSIGN(std::string loadR, accessFunctions("loadR", rv, false, true));
  FBL_ASSIGN(std::string store, accessFunctions("storeOut", ov, true, true));
  ProductSource src;
  // The term's operands join the sampler question (`out` stands in when there is no term).
  src.access = prelude({&lhs.stored, &rhs.stored, &out, lowRank ? &lowRank->lhs.stored : &out,
                        lowRank ? &lowRank->rhs.stored : &out}) +
               loadL + loadR + store;
  src.params = layoutParam(lhs.stored, "lhs", false) + ", " + layoutParam(rhs.stored, "rhs", false) + ", " +
               (partialOut ? std::string("__global float* restrict out") : layoutParam(out, "out", true));
  if (lowRank) {
    const MatmulOperand &tl = lowRank->lhs, &tr = lowRank->rhs;
    FBL_TRY(checkProductShapes("low-rank term", "of the product", m, lowRank->k, n, tl, tr, out));
    FBL_ASSIGN(Layout tlv, batchedView(tl.stored, batch, "lhs2"));
    FBL_ASSIGN(Layout trv, batchedView(tr.stored, batch, "rhs2"));
    FBL_ASSIGN(std::string loadL2, accessFunctions("loadL2", tlv, false, true));
    FBL_ASSIGN(std::string loadR2, accessFunctions("loadR2", trv, false, true));
    const std::string lp = layoutParam(tl.stored, "lhs2", false), rp = layoutParam(tr.stored, "rhs2", false);
    src.access += loadL2 + loadR2 +
                  instantiate(kernelTemplate("rtile_low_rank"),
                              {{"K2", std::to_string(lowRank->k)}, {"L2_T", tl.transposed ? "1" : "0"},
                               {"R2_T", tr.transposed ? "1" : "0"}, {"SCALE", "(" + lowRank->scale + ")"},
                               {"L2_PARAM", lp}, {"R2_PARAM", rp}});
    src.params += ", " + lp + ", " + rp;
  }
  src.access += epilogueCode(epi);
  src.params += epi ? epi->params : "";
  return src;
}

}  // namespace

Result<RTileKernel> emitRTileMatmul(const std::string& name, int64_t m, int64_t k, int64_t n,
                                    const MatmulOperand& lhs, const MatmulOperand& rhs, const Layout& out,
                                    const MatmulTiling& t, const MatmulEpilogue* epi, ColumnRange cols,
                                    const LowRankOperands* lowRank) {
  FBL_ASSIGN(auto folded, foldBatch(m, k, n, lhs, rhs, out, lowRank));
  if (folded)
    return emitRTileMatmul(name, folded->m, k, n, folded->lhs, folded->rhs, folded->out, t, epi, cols, folded->term());
  FBL_TRY(checkProductShapes("rtile matmul", name, m, k, n, lhs, rhs, out));
  FBL_ASSIGN(cols, checkColumns("rtile matmul", name, n, cols));
  const int64_t width = cols.end - cols.begin;
  if (t.pipeline < 0 || t.pipeline > 3 || t.rn % 4 != 0 || t.rm % 4 != 0 || t.splitK < 1 || t.tm % t.rm != 0 || t.tn % t.rn != 0 || t.tk % 4 != 0 || t.tm % 4 != 0 || t.tn % 4 != 0)
    return makeError("rtile matmul {}: tiling {}x{}x{} / {}x{} is not texel aligned", name, t.tm, t.tn, t.tk, t.rm,
                     t.rn);
  if ((t.tm * t.tk / 4) % (t.wgX() * t.wgY()) != 0 || (t.tn * t.tk / 4) % (t.wgX() * t.wgY()) != 0)
    return makeError("rtile matmul {}: tiling {}x{}x{} / {}x{}: a tile's texels do not divide among {} work-items", name,
                     t.tm, t.tn, t.tk, t.rm, t.rn, t.wgX() * t.wgY());
  const bool split = t.splitK > 1;
  if (split && epi) return makeError("rtile matmul {}: a split-K product's epilogue runs in its sum", name);
  // Slices are whole TK steps, so no tile straddles two slices.
  const int64_t kSlice = ((k + t.splitK - 1) / t.splitK + t.tk - 1) / t.tk * t.tk;
  if (split && (k + kSlice - 1) / kSlice != t.splitK)
    return makeError("rtile matmul {}: split-K {} of K={} in steps of {} leaves a slice empty", name, t.splitK, k, t.tk);
  const layout::StagedTiling staged{t.tm, t.tn, t.tk, t.wgX() * t.wgY(), 1};
  for (auto [op, left] : {std::pair{&lhs, true}, std::pair{&rhs, false}}) {
    auto [rows, texels] = layout::stagedRegion(left, op->transposed, staged);
    if (!layout::fitsRegion(op->staging, rows, texels))
      return makeError("rtile matmul {}: staging chunk {}x{} does not tile the {} region of {}x{} texels", name,
                       op->staging.rows, op->staging.texels, left ? "lhs" : "rhs", rows, texels);
  }
  // Row-major stays the plain formula (SW 0), so the kernels that keep it read as before.
  auto chunk = [&](const MatmulOperand& op, bool left) {
    const int64_t texels = layout::stagedRegion(left, op.transposed, staged).second;
    const bool plain = op.staging.rowMajor(texels);
    return std::pair{std::to_string(plain ? 1 : op.staging.rows), std::to_string(plain ? 0 : op.staging.texels)};
  };
  const auto [lsr, lsw] = chunk(lhs, true);
  const auto [rsr, rsw] = chunk(rhs, false);
  FBL_ASSIGN(ProductSource src, productSource(m, n, lhs, rhs, out, split, epi, lowRank));
  std::map<std::string, std::string> v = {
      {"L_SR", lsr}, {"L_SW", lsw}, {"R_SR", rsr}, {"R_SW", rsw},
      {"M", std::to_string(m)},   {"N", std::to_string(n)},      {"K", std::to_string(k)},
      {"LOW_RANK", lowRank ? "1" : "0"},
      {"TM", std::to_string(t.tm)}, {"TN", std::to_string(t.tn)}, {"TK", std::to_string(t.tk)},
      {"RM", std::to_string(t.rm)}, {"RN4", std::to_string(t.rn / 4)},
      {"L_T", lhs.transposed ? "1" : "0"}, {"R_T", rhs.transposed ? "1" : "0"},
      {"SPLIT", std::to_string(t.splitK)}, {"KS", std::to_string(kSlice)}, {"PIPE", std::to_string(t.pipeline)},
      {"N0", std::to_string(cols.begin)}, {"N1", std::to_string(cols.end)},
      {"ALIGNED", m % t.tm == 0 && width % t.tn == 0 && k % t.tk == 0 ? "1" : "0"},
      {"ACCESS", src.access},
      {"PARAMS", src.params}};
  RTileKernel kernel;
  kernel.name = name;
  kernel.source = fill(kernelTemplate("rtile_matmul"), v, name);
  kernel.args = {"lhs", "rhs", split ? "partial" : "out"};
  if (lowRank) kernel.args.insert(kernel.args.end(), {"lhs2", "rhs2"});
  auto up = [](int64_t a, int64_t b) { return static_cast<size_t>((a + b - 1) / b); };
  kernel.local = {static_cast<size_t>(t.wgX()), static_cast<size_t>(t.wgY()), 1};
  kernel.global = {up(width, t.tn) * kernel.local[0], up(m, t.tm) * kernel.local[1],
                   static_cast<size_t>(ir::numElements(batchOf(out))) * up(k, kSlice)};
  return kernel;
}

Result<RTileKernel> emitRTileMatmulNarrow(const std::string& name, int64_t m, int64_t k, int64_t n,
                                          const MatmulOperand& lhs, const MatmulOperand& rhs, const Layout& out,
                                          const NarrowOptions& options, int64_t localMemoryBytes,
                                          const MatmulEpilogue* epi, const LowRankOperands* lowRank,
                                          int64_t launchProducts) {
  FBL_ASSIGN(auto folded, foldBatch(m, k, n, lhs, rhs, out, lowRank));
  if (folded)
    return emitRTileMatmulNarrow(name, folded->m, k, n, folded->lhs, folded->rhs, folded->out, options,
                                 localMemoryBytes, epi, folded->term(), launchProducts);
  FBL_TRY(checkProductShapes("narrow matmul", name, m, k, n, lhs, rhs, out));
  FBL_ASSERT(launchProducts >= 1);
  // Neighbouring work-items read neighbouring texels (chooseNarrowOrder). The fill target counts
  // the whole launch: products batched into one launch share it, so each takes longer slices and
  // a shallower tree (H200, three products a launch: 18-25% faster than each filling the GPU
  // alone; docs/measurements/tuning-h200/narrow-batch-tiling/).
  const NarrowOrder order = chooseNarrowOrder(m, n, lhs.transposed, rhs.transposed, options);
  const NarrowTiling t =
      chooseNarrowTiling(m, n, k, options, ir::numElements(batchOf(out)) * launchProducts, order);
  constexpr int64_t kMinLocalMemoryBytes = 32 * 1024;  // OpenCL 1.2's CL_DEVICE_LOCAL_MEM_SIZE floor
  // Staging pays where neighbouring work-items are K slices reading R, a buffer stored along K,
  // rows 4 apart (a texel walk, where the profile asks for one, reads them whole); an image's
  // texture cache serves those reads itself (H200: dy B at rank 8 took 18.2 -> 13.1 us from a
  // buffer, 11.3 -> 12.1 from an image; docs/measurements/tuning-h200/narrow-staging/).
  const bool stageR = options.stageNarrowOperand && order == NarrowOrder::kSlices && !rhs.transposed &&
                      rhs.stored.storage() == layout::Storage::Buffer &&
                      narrowLocalBytes(t, true) <= (localMemoryBytes > 0 ? localMemoryBytes : kMinLocalMemoryBytes);
  FBL_ASSIGN(ProductSource src, productSource(m, n, lhs, rhs, out, false, epi, lowRank));
  // K in chunks: each tile's partial sums, a plane a chunk, and its count of groups done.
  const bool chunked = t.chunks > 1;
  const std::string params = src.params + (chunked ? ", __global float* partials, __global int* arrivals" : "");
  std::map<std::string, std::string> v = {
      {"M", std::to_string(m)},     {"N", std::to_string(n)},     {"K", std::to_string(k)},
      {"LOW_RANK", lowRank ? "1" : "0"}, {"STAGE_R", stageR ? "1" : "0"},
      {"TM", std::to_string(t.tm)}, {"TN", std::to_string(t.tn)}, {"KS", std::to_string(t.ks)},
      {"KC", std::to_string(t.chunks)}, {"CHUNK", std::to_string(chunked ? t.chunkK : k)},
      {"BM", std::to_string(t.bm)}, {"BN", std::to_string(t.bn)},
      {"FAST", std::to_string(static_cast<int>(order))},
      {"L_T", lhs.transposed ? "1" : "0"}, {"R_T", rhs.transposed ? "1" : "0"},
      {"ACCESS", src.access},
      {"PARAMS", params},
      {"ARGS", joinNames(parameterNames(params), "")}};
  RTileKernel kernel;
  kernel.name = name;
  kernel.source = fill(kernelTemplate("rtile_matmul_narrow"), v, name);
  kernel.productParams = params;
  kernel.narrowOrder = order;
  kernel.narrowTiling = t;
  kernel.stagesNarrowOperand = stageR;
  kernel.args = {"lhs", "rhs", "out"};
  if (lowRank) kernel.args.insert(kernel.args.end(), {"lhs2", "rhs2"});
  if (chunked) kernel.args.insert(kernel.args.end(), {"partials", "arrivals"});  // after an epilogue's
  auto up = [](int64_t a, int64_t b) { return static_cast<size_t>((a + b - 1) / b); };
  const size_t batch = static_cast<size_t>(ir::numElements(batchOf(out)));
  kernel.local = {static_cast<size_t>(t.workItems()), 1, 1};
  kernel.global = {up(n, t.tn) * static_cast<size_t>(t.chunks) * kernel.local[0], up(m, t.tm), batch};
  if (chunked) {
    const int64_t tiles = static_cast<int64_t>(batch * up(n, t.tn) * up(m, t.tm));
    kernel.chunkPartialFloats = tiles * t.chunks * t.tm * t.tn;
    kernel.chunkArrivals = tiles;
  }
  return kernel;
}

std::string narrowBatchEntryName(int64_t products) { return fmt::format("_x{}", products); }

std::string narrowBatchEntry(const std::string& name, const std::string& params, int64_t products, int64_t batch) {
  FBL_ASSERT(products >= 2 && batch >= 1);
  const std::vector<std::string> decls = parameterDecls(params);
  std::vector<std::string> names;
  for (const std::string& d : decls) names.push_back(parameterName(d));
  std::string list, calls;
  for (int64_t p = 0; p < products; ++p) {
    for (const std::string& d : decls) list += (list.empty() ? "" : ", ") + fmt::format("{}_{}", d, p);
    calls += fmt::format("  {}if (p == {}u) product({}, bat, shared);\n", p ? "else " : "", p,
                         joinNames(names, fmt::format("_{}", p)));
  }
  return fmt::format(
      "\n// {} products in one launch (compiler/plan/launch_batching.h): product p is groups\n"
      "// [p {}, (p + 1) {}) of dimension 2.\n"
      "__kernel void {}{}({}) {{\n"
      "  __local float4 shared[LOCAL_TEXELS];\n"
      "  const uint p = get_group_id(2) / {}u, bat = get_group_id(2) % {}u;\n{}}}\n",
      products, batch, batch, name, narrowBatchEntryName(products), list, batch, batch, calls);
}

Result<RTileKernel> emitRTileSplitKSum(const std::string& name, int64_t m, int64_t n, int64_t splitK,
                                       const Layout& out, const MatmulEpilogue* epi, int64_t workgroup,
                                       ColumnRange cols) {
  if (out.shape().size() < 2 || rowsOf(out) != m || colsOf(out) != n)
    return makeError("rtile split-K sum {}: output stored {}, expected [..., {}, {}]", name,
                     ir::shapeToString(out.shape()), m, n);
  FBL_ASSIGN(cols, checkColumns("rtile split-K sum", name, n, cols));
  const ir::Shape batch = batchOf(out);
  FBL_ASSIGN(Layout ov, batchedView(out, batch, "out"));
  FBL_ASSIGN(std::string store, accessFunctions("storeOut", ov, true, true));
  std::map<std::string, std::string> v = {{"M", std::to_string(m)}, {"N", std::to_string(n)},
                                          {"N0", std::to_string(cols.begin)}, {"N1", std::to_string(cols.end)},
                                          {"SPLIT", std::to_string(splitK)},
                                          {"ACCESS", prelude({&out}) + store + epilogueCode(epi)},
                                          {"OUT_PARAM", layoutParam(out, "out", true) + (epi ? epi->params : "")}};
  RTileKernel kernel;
  kernel.name = name;
  kernel.source = fill(kernelTemplate("rtile_splitk"), v, name);
  kernel.args = {"partial", "out"};
  if (workgroup < 1) return makeError("rtile split-K sum {}: work-group {} is empty", name, workgroup);
  kernel.local = {static_cast<size_t>(workgroup), 1, 1};
  const int64_t texels = (cols.end - cols.begin + 3) / 4;
  kernel.global = {static_cast<size_t>((texels + workgroup - 1) / workgroup * workgroup), static_cast<size_t>(m),
                   static_cast<size_t>(ir::numElements(batch))};
  return kernel;
}

Result<RTileKernel> emitRTileConvert(const std::string& name, const Layout& src, bool transpose, const Layout& dst,
                                     std::array<int64_t, 2> wg) {
  FBL_TRY(check2D(src, "src"));
  FBL_TRY(check2D(dst, "dst"));
  const int64_t dr = rowsOf(dst), dc = colsOf(dst);
  if ((transpose ? colsOf(src) : rowsOf(src)) != dr || (transpose ? rowsOf(src) : colsOf(src)) != dc)
    return makeError("rtile convert {}: {} {}to {} changes the extent", name, ir::shapeToString(src.shape()),
                     transpose ? "transposed " : "", ir::shapeToString(dst.shape()));
  FBL_ASSIGN(std::string load, layoutAccess("loadS", src, false));
  FBL_ASSIGN(std::string store, layoutAccess("storeOut", dst, true));
  std::map<std::string, std::string> v = {
      {"D_ROWS", std::to_string(dr)}, {"D_COLS", std::to_string(dc)},
      {"S_ROWS", std::to_string(rowsOf(src))}, {"S_COLS", std::to_string(colsOf(src))},
      {"T", transpose ? "1" : "0"}, {"ACCESS", prelude({&src, &dst}) + load + store},
      {"PARAMS", layoutParam(src, "src", false) + ", " + layoutParam(dst, "dst", true)}};
  RTileKernel kernel;
  kernel.name = name;
  kernel.source = fill(kernelTemplate("rtile_convert"), v, name);
  kernel.args = {"src", "dst"};
  if (wg[0] < 1 || wg[1] < 1) return makeError("rtile convert {}: work-group {}x{} is empty", name, wg[0], wg[1]);
  // A work-item converts a 4x4 block: a group covers 4 wg[0] columns and 4 wg[1] rows.
  kernel.local = {static_cast<size_t>(wg[0]), static_cast<size_t>(wg[1])};
  kernel.global = {static_cast<size_t>((dc + 4 * wg[0] - 1) / (4 * wg[0]) * wg[0]),
                   static_cast<size_t>((dr + 4 * wg[1] - 1) / (4 * wg[1]) * wg[1])};
  return kernel;
}

Result<RTileKernel> emitRTileTransfer(const std::string& name, const Layout& image, bool unpack, int64_t chunkRows,
                                      std::array<int64_t, 2> wg) {
  FBL_TRY(check2D(image, "image"));
  const int64_t rows = rowsOf(image), cols = colsOf(image);
  if (chunkRows < 1 || chunkRows > rows)
    return makeError("rtile transfer {}: {} rows per chunk for {} rows", name, chunkRows, rows);
  if (wg[0] < 1 || wg[1] < 1) return makeError("rtile transfer {}: work-group {}x{} is empty", name, wg[0], wg[1]);
  const Layout staging = Layout::rowMajor({chunkRows, cols});
  const Layout& src = unpack ? image : staging;
  const Layout& dst = unpack ? staging : image;
  FBL_ASSIGN(std::string load, layoutAccess("loadS", src, false));
  FBL_ASSIGN(std::string store, layoutAccess("storeOut", dst, true));
  std::map<std::string, std::string> v = {
      {"ROWS", std::to_string(rows)}, {"COLS", std::to_string(cols)}, {"CHUNK", std::to_string(chunkRows)},
      {"PACK", unpack ? "0" : "1"}, {"ACCESS", prelude({&src, &dst}) + load + store},
      {"PARAMS", layoutParam(src, "src", false) + ", " + layoutParam(dst, "dst", true)}};
  RTileKernel kernel;
  kernel.name = name;
  kernel.source = fill(kernelTemplate("rtile_transfer"), v, name);
  kernel.args = {"src", "dst", "first_row"};
  kernel.local = {static_cast<size_t>(wg[0]), static_cast<size_t>(wg[1])};
  kernel.global = {static_cast<size_t>((cols + 4 * wg[0] - 1) / (4 * wg[0]) * wg[0]),
                   static_cast<size_t>((chunkRows + 4 * wg[1] - 1) / (4 * wg[1]) * wg[1])};
  return kernel;
}

}  // namespace fbl::codegen
