#include "runtime/weights_check.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <vector>

#include "runtime/shape_text.h"

namespace fbl::rt {

namespace {

// The entry `key` of the file has tensor t's dtype and shape.
Status matches(const planfile::Plan& plan, int32_t t, const safetensors::File& file, const std::string& key,
               const std::string& where) {
  const planfile::Tensor& pt = plan.tensors[t];
  auto it = file.tensors.find(key);
  if (it == file.tensors.end()) return Error{where + " has no tensor '" + key + "' that the plan needs"};
  const safetensors::Entry& e = it->second;
  if (!pt.encoding.empty()) {
    // The encoded bytes as the plan lays them out (planfile::encodedBytes), one U8 vector.
    if (e.dtype != "U8" || e.shape != std::vector<int64_t>{pt.bytes} || static_cast<int64_t>(e.data.size()) != pt.bytes)
      return Error{where + ": tensor '" + key + "' is " + e.dtype + shapeText(e.shape) + " but the plan stores it " +
                   pt.encoding + ", U8[" + std::to_string(pt.bytes) + "] (compile the weights with the plan)"};
    return Status::success();
  }
  const std::string want = safetensors::fromFblDType(pt.dtype);
  if (e.dtype != want || e.shape != pt.shape)
    return Error{where + ": tensor '" + key + "' is " + e.dtype + shapeText(e.shape) + " but the plan expects " + want + shapeText(pt.shape)};
  if (static_cast<int64_t>(e.data.size()) != planfile::logicalBytes(pt))
    return Error{where + ": tensor '" + key + "' has " + std::to_string(e.data.size()) + " bytes, not " + std::to_string(planfile::logicalBytes(pt))};
  return Status::success();
}

}  // namespace

Status checkWeights(const planfile::Plan& plan, const safetensors::File& file, const std::string& path,
                    std::string* baseWeights) {
  std::set<std::string> frozen;
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    if (!plan.tensors[t].fromWeights()) continue;
    FBL_TRY(matches(plan, static_cast<int32_t>(t), file, plan.tensors[t].source, "'" + path + "'"));
    // The base model: frozen weights and the buffers' starting values, not what training changes.
    if (plan.tensors[t].role != planfile::Role::Trainable) frozen.insert(plan.tensors[t].source);
  }
  // After the plan's checks, whose lines say more about a file edited on purpose; the checksum
  // catches what they cannot see, a changed data byte.
  const std::map<std::string, uint64_t> digests = safetensors::tensorDigests(file);
  FBL_TRY(safetensors::verifyChecksum(file, path, digests));
  if (baseWeights) *baseWeights = safetensors::digestText(safetensors::digestOf(digests, frozen));
  return Status::success();
}

Status checkCheckpoint(const planfile::Plan& plan, const safetensors::File& file, const std::string& path,
                       int64_t* step, const std::string& baseWeights) {
  const std::string where = "checkpoint '" + path + "'";
  auto format = file.metadata.find("format");
  auto stepText = file.metadata.find("step");
  if (format == file.metadata.end() || format->second != "fbl-checkpoint-1" || stepText == file.metadata.end())
    return Error{"'" + path + "' is not an fbl checkpoint (metadata format fbl-checkpoint-1 and step)"};
  const std::string& s = stepText->second;
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
    return Error{where + ": metadata step '" + s + "' is not a non-negative integer"};
  *step = std::stoll(s);
  std::vector<int32_t> ids;
  for (const planfile::Trainable& t : plan.trainables) ids.push_back(t.param);
  ids.insert(ids.end(), plan.state.begin(), plan.state.end());
  for (int32_t t : ids)
    FBL_TRY(matches(plan, t, file, plan.tensors[t].name, where));
  FBL_TRY(safetensors::verifyChecksum(file, path, safetensors::tensorDigests(file)));
  // Same trainable names and shapes are not the same model: the trainables only mean something
  // over the frozen weights they were trained on.
  auto base = file.metadata.find(kBaseWeightsKey);
  if (!baseWeights.empty() && base != file.metadata.end() && base->second != baseWeights) {
    auto model = file.metadata.find("model");
    return Error{where + " was trained on other frozen weights (" + base->second +
                 (model != file.metadata.end() ? ", model '" + model->second + "'" : std::string()) +
                 ") than the ones loaded (" + baseWeights + ", plan's model '" + plan.model +
                 "'): it belongs to another model or weights file"};
  }
  return Status::success();
}

Status checkLoopState(const planfile::Plan& plan, const safetensors::File& file, const std::string& path,
                      int32_t* accumulated, double* baseLr) {
  const std::string where = "checkpoint '" + path + "'";
  *accumulated = 0;
  *baseLr = plan.loop.lr;
  auto position = file.metadata.find("grad_accum_position");
  if (position != file.metadata.end()) {
    const std::string& s = position->second;
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(s) >= plan.loop.gradAccum)
      return Error{where + ": metadata grad_accum_position '" + s + "' is not a micro-batch count below the plan's grad_accum " +
                   std::to_string(plan.loop.gradAccum)};
    *accumulated = static_cast<int32_t>(std::stoll(s));
  }
  auto lr = file.metadata.find("learning_rate");
  if (lr != file.metadata.end() && !plan.loop.schedule.empty()) {
    char* end = nullptr;
    const double v = std::strtod(lr->second.c_str(), &end);
    if (lr->second.empty() || *end != '\0' || !std::isfinite(v) || v <= 0)
      return Error{where + ": metadata learning_rate '" + lr->second + "' is not a positive number"};
    *baseLr = v;
  }
  return Status::success();
}

}  // namespace fbl::rt
