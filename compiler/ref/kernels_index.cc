// Data-dependent indexing and the loss: Gather, GatherElements, GatherND, ScatterND, ScatterElements,
// SoftmaxCrossEntropyLoss. Every index is range-checked (negative ones wrap once, as ONNX
// says) before it is used, and an out-of-range index is an error naming the node.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiler/ref/kernels_common.h"

namespace fbl::ref::detail {
namespace {

// Index -> [0, dim), or an error.
Result<int64_t> wrapIndex(const Node& n, int64_t idx, int64_t dim, int64_t axis) {
  int64_t w = idx < 0 ? idx + dim : idx;
  if (w < 0 || w >= dim)
    return nodeError(n, "index {} is out of range for axis {} of size {}", idx, axis, dim);
  return w;
}

// GatherElements' and ScatterElements' addressing: the data offset each index position names,
// its own coordinates with the one along `axis` replaced by the (wrapped) index there.
Result<std::vector<int64_t>> elementOffsets(const Node& n, const Tensor& data, const Tensor& idxT, int64_t axis) {
  const std::vector<int64_t> idx = idxT.toInt64s();
  const int64_t dim = data.shape()[axis];
  View v = denseView(data.shape());
  const int64_t axisStride = v.strides[axis];
  v.strides[axis] = 0;
  std::vector<int64_t> offsets(idx.size());
  forEachIndex<1>(idxT.shape(), {v}, [&](int64_t i, const std::array<int64_t, 1>& o) { offsets[i] = o[0]; });
  for (size_t i = 0; i < idx.size(); ++i) {
    FBL_ASSIGN(int64_t r, wrapIndex(n, idx[i], dim, axis));
    offsets[i] += r * axisStride;
  }
  return offsets;
}

// One element of ScatterND or ScatterElements: the update replaces it (reduction none) or is
// combined with it. The schemas (ops/onnx_schemas_shape.cc) admit no other reduction.
template <typename T>
void scatterInto(T& out, T update, const std::string& reduction) {
  if (reduction == "add") out = out + update;
  else if (reduction == "mul") out = out * update;
  else if (reduction == "max") out = std::max(out, update);
  else if (reduction == "min") out = std::min(out, update);
  else out = update;
}

Outputs gatherOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* data, input(n, in, 0));
  FBL_ASSIGN(const Tensor* idxT, input(n, in, 1));
  FBL_TRY(expectDType(n, *idxT, 1, {DType::I64, DType::I32}));
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", 0), data->rank()));
  const std::vector<int64_t> idx = idxT->toInt64s();
  Shape out(data->shape().begin(), data->shape().begin() + axis);
  out.insert(out.end(), idxT->shape().begin(), idxT->shape().end());
  out.insert(out.end(), data->shape().begin() + axis + 1, data->shape().end());
  FBL_TRY(checkShape(n, out));
  const int64_t dim = data->shape()[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data->shape()[d];
  for (int64_t d = axis + 1; d < data->rank(); ++d) inner *= data->shape()[d];
  std::vector<int64_t> rows(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) { FBL_ASSIGN(rows[j], wrapIndex(n, idx[j], dim, axis)); }
  Tensor y(data->dtype(), out);
  const size_t block = inner * ir::dtypeSize(data->dtype());
  std::byte* dst = y.raw();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r : rows) {
      std::memcpy(dst, data->raw() + (o * dim + r) * block, block);
      dst += block;
    }
  return single(std::move(y));
}

Outputs gatherElementsOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* data, input(n, in, 0));
  FBL_ASSIGN(const Tensor* idxT, input(n, in, 1));
  FBL_TRY(expectDType(n, *idxT, 1, {DType::I64, DType::I32}));
  if (idxT->rank() != data->rank())
    return nodeError(n, "indices rank {} differs from data rank {}", idxT->rank(), data->rank());
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", 0), data->rank()));
  for (int64_t d = 0; d < data->rank(); ++d)
    if (d != axis && idxT->shape()[d] > data->shape()[d])
      return nodeError(n, "indices shape {} exceeds data shape {} on axis {}",
                       ir::shapeToString(idxT->shape()), ir::shapeToString(data->shape()), d);
  FBL_ASSIGN(const std::vector<int64_t> offsets, elementOffsets(n, *data, *idxT, axis));
  Tensor y(data->dtype(), idxT->shape());
  const size_t esz = ir::dtypeSize(data->dtype());
  for (size_t i = 0; i < offsets.size(); ++i)
    std::memcpy(y.raw() + i * esz, data->raw() + offsets[i] * esz, esz);
  return single(std::move(y));
}

// out[b, t] = data[b, idx[b, t, 0], ..., idx[b, t, m-1], ...] with b over the batch_dims
// leading dims shared by data and indices, t over the remaining index tuples.
Outputs gatherNDOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* data, input(n, in, 0));
  FBL_ASSIGN(const Tensor* idxT, input(n, in, 1));
  FBL_TRY(expectDType(n, *idxT, 1, {DType::I64, DType::I32}));
  const int64_t b = n.attrInt("batch_dims", 0), r = data->rank(), q = idxT->rank();
  if (q < 1 || b < 0 || b >= q || b >= r)
    return nodeError(n, "batch_dims {} is invalid for data rank {} and indices rank {}", b, r, q);
  const int64_t m = idxT->shape().back();
  if (m < 1 || m > r - b)
    return nodeError(n, "index tuples of length {} do not fit data rank {} with batch_dims {}", m, r, b);
  for (int64_t d = 0; d < b; ++d)
    if (idxT->shape()[d] != data->shape()[d])
      return nodeError(n, "batch dim {} differs: indices {} data {}", d,
                       ir::shapeToString(idxT->shape()), ir::shapeToString(data->shape()));
  Shape out(idxT->shape().begin(), idxT->shape().end() - 1);
  out.insert(out.end(), data->shape().begin() + b + m, data->shape().end());
  FBL_TRY(checkShape(n, out));
  int64_t batches = 1, tuples = 1, sliceSize = 1;
  for (int64_t d = 0; d < b; ++d) batches *= data->shape()[d];
  for (int64_t d = b; d < q - 1; ++d) tuples *= idxT->shape()[d];
  for (int64_t d = b + m; d < r; ++d) sliceSize *= data->shape()[d];
  const auto strides = ir::stridesOf(data->shape());
  const int64_t batchStride = b > 0 ? strides[b - 1] : 0;
  const std::vector<int64_t> idx = idxT->toInt64s();
  Tensor y(data->dtype(), out);
  const size_t esz = ir::dtypeSize(data->dtype());
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t t = 0; t < tuples; ++t) {
      const int64_t* tuple = idx.data() + (bi * tuples + t) * m;
      int64_t off = bi * batchStride;
      for (int64_t k = 0; k < m; ++k) {
        FBL_ASSIGN(int64_t w, wrapIndex(n, tuple[k], data->shape()[b + k], b + k));
        off += w * strides[b + k];
      }
      std::memcpy(y.raw() + (bi * tuples + t) * sliceSize * esz, data->raw() + off * esz,
                  sliceSize * esz);
    }
  return single(std::move(y));
}

// out = data, then for each index tuple t in order: out[idx[t], ...] = updates[t, ...] (reduction
// none: the last tuple naming a slice wins) or combined with it (add, mul, max, min).
Outputs scatterNDOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* data, input(n, in, 0));
  FBL_ASSIGN(const Tensor* idxT, input(n, in, 1));
  FBL_ASSIGN(const Tensor* upd, input(n, in, 2));
  FBL_TRY(expectDType(n, *idxT, 1, {DType::I64}));
  const int64_t r = data->rank(), q = idxT->rank();
  if (q < 1 || r < 1) return nodeError(n, "data and indices must have rank 1 or more");
  const int64_t m = idxT->shape().back();
  if (m < 1 || m > r) return nodeError(n, "index tuples of length {} do not fit data rank {}", m, r);
  Shape us(idxT->shape().begin(), idxT->shape().end() - 1);
  us.insert(us.end(), data->shape().begin() + m, data->shape().end());
  if (upd->shape() != us || upd->dtype() != data->dtype())
    return nodeError(n, "updates {} {} do not match {} {}", ir::dtypeName(upd->dtype()), ir::shapeToString(upd->shape()),
                     ir::dtypeName(data->dtype()), ir::shapeToString(us));
  const std::string red = n.attrString("reduction", "none");
  int64_t tuples = 1, sliceSize = 1;
  for (int64_t d = 0; d < q - 1; ++d) tuples *= idxT->shape()[d];
  for (int64_t d = m; d < r; ++d) sliceSize *= data->shape()[d];
  const auto strides = ir::stridesOf(data->shape());
  const std::vector<int64_t> idx = idxT->toInt64s();
  return withNumeric(n, data->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    Tensor y = *data;
    T* py = y.data<T>();
    const T* pu = upd->data<T>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t k = 0; k < m; ++k) {
        FBL_ASSIGN(int64_t w, wrapIndex(n, idx[t * m + k], data->shape()[k], k));
        off += w * strides[k];
      }
      for (int64_t s = 0; s < sliceSize; ++s) {
        scatterInto(py[off + s], pu[t * sliceSize + s], red);
      }
    }
    return single(std::move(y));
  });
}

// out = data, then for each index position p in order: out[p with p[axis] = idx[p]] = updates[p]
// (reduction none: the last position naming an element wins) or combined with it.
Outputs scatterElementsOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* data, input(n, in, 0));
  FBL_ASSIGN(const Tensor* idxT, input(n, in, 1));
  FBL_ASSIGN(const Tensor* upd, input(n, in, 2));
  FBL_TRY(expectDType(n, *idxT, 1, {DType::I64, DType::I32}));
  if (data->rank() < 1 || idxT->rank() != data->rank() || upd->shape() != idxT->shape() ||
      upd->dtype() != data->dtype())
    return nodeError(n, "data {}, indices {} and updates {} do not fit", ir::shapeToString(data->shape()),
                     ir::shapeToString(idxT->shape()), ir::shapeToString(upd->shape()));
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", 0), data->rank()));
  for (int64_t d = 0; d < data->rank(); ++d)
    if (idxT->shape()[d] > data->shape()[d])
      return nodeError(n, "indices {} exceed data {} on axis {}", ir::shapeToString(idxT->shape()),
                       ir::shapeToString(data->shape()), d);
  const std::string red = n.attrString("reduction", "none");
  FBL_ASSIGN(const std::vector<int64_t> offsets, elementOffsets(n, *data, *idxT, axis));
  Tensor y = *data;
  return withNumeric(n, data->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    T* py = y.data<T>();
    const T* pu = upd->data<T>();
    for (size_t i = 0; i < offsets.size(); ++i) {
      scatterInto(py[offsets[i]], pu[i], red);
    }
    return single(std::move(y));
  });
}

// scores [N, C, d...], labels [N, d...]: loss_i = -w[l_i] * log_softmax(scores)_i[l_i], 0 where
// l_i == ignore_index. 'mean' divides by the summed weights of the kept positions (their count
// without weights), as PyTorch's cross_entropy does.
Outputs softmaxCrossEntropyOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* scores, input(n, in, 0));
  FBL_ASSIGN(const Tensor* labels, input(n, in, 1));
  const Tensor* weights = optionalInput(in, 2);
  FBL_TRY(expectDType(n, *scores, 0, {DType::F32}));
  FBL_TRY(expectDType(n, *labels, 1, {DType::I64, DType::I32}));
  if (weights) FBL_TRY(expectDType(n, *weights, 2, {DType::F32}));
  if (scores->rank() < 2) return nodeError(n, "scores must have rank >= 2");
  const int64_t batch = scores->shape()[0], classes = scores->shape()[1];
  Shape labelShape = scores->shape();
  labelShape.erase(labelShape.begin() + 1);
  if (labels->shape() != labelShape)
    return nodeError(n, "labels have shape {}, expected {}", ir::shapeToString(labels->shape()),
                     ir::shapeToString(labelShape));
  if (weights && (weights->rank() != 1 || weights->shape()[0] != classes))
    return nodeError(n, "weights must have shape [{}]", classes);
  const std::string reduction = n.attrString("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return nodeError(n, "reduction '{}' is not supported (mean, sum, none)", reduction);
  const bool hasIgnore = n.hasAttr("ignore_index");
  const int64_t ignore = n.attrInt("ignore_index", 0);

  const int64_t spatial = classes == 0 || batch == 0 ? 0 : scores->numel() / (batch * classes);
  const std::vector<int64_t> lab = labels->toInt64s();
  Tensor logProb(DType::F32, scores->shape());
  Tensor perItem(DType::F32, labelShape);
  const float* ps = scores->data<float>();
  float* plp = logProb.data<float>();
  double lossSum = 0, weightSum = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < spatial; ++s) {
      const float* x = ps + b * classes * spatial + s;
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, static_cast<double>(x[c * spatial]));
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[c * spatial] - mx);
      const double lse = mx + std::log(sum);
      for (int64_t c = 0; c < classes; ++c)
        plp[(b * classes + c) * spatial + s] = static_cast<float>(x[c * spatial] - lse);
      const int64_t l = lab[b * spatial + s];
      double loss = 0;
      if (!(hasIgnore && l == ignore)) {
        if (l < 0 || l >= classes)
          return nodeError(n, "label {} is out of range for {} classes", l, classes);
        const double w = weights ? weights->data<float>()[l] : 1.0;
        loss = -w * (x[l * spatial] - lse);
        weightSum += w;
      }
      perItem.data<float>()[b * spatial + s] = static_cast<float>(loss);
      lossSum += loss;
    }
  std::vector<Tensor> outs;
  if (reduction == "none") {
    outs.push_back(std::move(perItem));
  } else {
    const double v = reduction == "sum" ? lossSum : lossSum / weightSum;
    outs.push_back(Tensor::scalar<float>(static_cast<float>(v)));
  }
  outs.push_back(std::move(logProb));
  return outs;
}

}  // namespace

std::vector<KernelEntry> indexKernels() {
  return {
      {"Gather", gatherOp},
      {"GatherElements", gatherElementsOp},
      {"GatherND", gatherNDOp},
      {"ScatterND", scatterNDOp},
      {"ScatterElements", scatterElementsOp},
      {"SoftmaxCrossEntropyLoss", softmaxCrossEntropyOp},
  };
}

}  // namespace fbl::ref::detail
