// The CNNs of the paper's portability study (Figure 20): torchvision MobileNetV2, VGG19 and
// ResNet34 on 224x224 ImageNet images, LoRA (peft's Conv2d form) on every dense convolution and
// on the classifier; depthwise convolutions stay frozen (peft does not adapt grouped convs).
//
// 1. BatchNorm in eval mode is an affine map, folded into the preceding Conv's weight and bias
//    as deployment exports do, so a Conv here carries a bias and no BatchNormalization follows.
// 2. ReLU is Relu; ReLU6 is Relu then Min(6) (the vocabulary has no Clip).
// 3. VGG's 2x2/2 max pooling is Reshape to [B,C,H/2,2,W/2,2] and ReduceMax over the window
//    axes; ResNet's 3x3/2 pad-1 max pooling is Pad(0) (its input is post-ReLU, so zero padding
//    equals -inf padding), nine strided Slices and a Max chain; global average pooling is
//    ReduceMean over H and W. The vocabulary has no MaxPool, AveragePool or GlobalAveragePool.
// 4. Classifier: Gemm (LoRA), cross-entropy against the labels input.
#include "compiler/zoo/zoo.h"
#include "compiler/zoo/zoo_layers.h"

namespace fbl::zoo {

namespace {

struct CnnConfig {
  std::string graphName;
  int64_t image = 224, classes = 1000, batch = 8;
  int64_t widthDivisor = 1;  // --tiny: channels divided by this
};

class Cnn {
 public:
  Cnn(Net& n, const CnnConfig& c) : n(n), b(n.b), c(c) {}

  int64_t w(int64_t ch) const { return std::max<int64_t>(ch / c.widthDivisor, 4); }

  std::string conv(const std::string& x, int64_t in, int64_t out, int64_t k, int64_t stride,
                   const std::string& module, int64_t groups = 1) {
    return n.conv(x, in, out, {.k = k, .stride = stride, .pad = k / 2, .groups = groups}, module,
                  {.bias = true, .lora = groups == 1});
  }
  std::string relu6(const std::string& x) {
    return b.op("Min", {n.relu(x), b.scalarF32(6.0f)}, {}, "hardtanh");
  }
  std::string maxPool2(const std::string& x, int64_t ch, int64_t side) {
    std::string r = n.reshape(x, {c.batch, ch, side / 2, 2, side / 2, 2});
    return b.op("ReduceMax", {r, b.constI64({3, 5})},
                {{"keepdims", int64_t{0}}, {"noop_with_empty_axes", int64_t{0}}}, "max_pool2d");
  }
  std::string maxPool3s2(const std::string& x, int64_t side) {
    std::string p = b.op("Pad", {x, b.constI64({0, 0, 1, 1, 0, 0, 1, 1}), b.scalarF32(0.0f)},
                         {{"mode", std::string("constant")}}, "pad");
    int64_t out = (side + 2 - 3) / 2 + 1;
    std::string axes = b.constI64({2, 3}), steps = b.constI64({2, 2}), m;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        std::string s = b.op("Slice", {p, b.constI64({i, j}), b.constI64({i + 2 * (out - 1) + 1, j + 2 * (out - 1) + 1}),
                                       axes, steps}, {}, "slice");
        m = m.empty() ? s : b.op("Max", {m, s}, {}, "max_pool2d");
      }
    return m;
  }
  std::string head(const std::string& features, int64_t ch, const std::string& module) {
    return n.linear(features, ch, c.classes, module, {.bias = true, .lora = true, .rank2 = true});
  }
  std::string globalPool(const std::string& x) {
    return b.op("ReduceMean", {x, b.constI64({2, 3})},
                {{"keepdims", int64_t{0}}, {"noop_with_empty_axes", int64_t{0}}}, "adaptive_avg_pool2d");
  }

  Net& n;
  OnnxBuilder& b;
  const CnnConfig& c;
};

std::string resnet34(Cnn& m, const std::string& image) {
  Net& n = m.n;
  std::string x = n.relu(m.conv(image, 3, m.w(64), 7, 2, "conv1"));
  int64_t side = m.c.image / 2;
  x = m.maxPool3s2(x, side);
  side = (side - 1) / 2 + 1;
  int64_t ch = m.w(64);
  const int64_t blocks[4] = {3, 4, 6, 3}, widths[4] = {64, 128, 256, 512};
  for (int l = 0; l < 4; ++l) {
    for (int64_t i = 0; i < blocks[l]; ++i) {
      std::string p = "layer" + std::to_string(l + 1) + "." + std::to_string(i) + ".";
      int64_t out = m.w(widths[l]), stride = (i == 0 && l > 0) ? 2 : 1;
      std::string h = n.relu(m.conv(x, ch, out, 3, stride, p + "conv1"));
      h = m.conv(h, out, out, 3, 1, p + "conv2");
      std::string skip = (stride != 1 || ch != out) ? m.conv(x, ch, out, 1, stride, p + "downsample.0") : x;
      x = n.relu(n.add(h, skip));
      ch = out;
      if (stride == 2) side = (side - 1) / 2 + 1;
    }
  }
  return m.head(m.globalPool(x), ch, "fc");
}

std::string vgg19(Cnn& m, const std::string& image) {
  Net& n = m.n;
  const int64_t cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0,
                         512, 512, 512, 512, 0, 512, 512, 512, 512, 0};
  std::string x = image;
  int64_t ch = 3, side = m.c.image, idx = 0;
  for (int64_t v : cfg) {
    if (v == 0) {
      x = m.maxPool2(x, ch, side);
      side /= 2;
    } else {
      x = n.relu(m.conv(x, ch, m.w(v), 3, 1, "features." + std::to_string(idx)));
      ch = m.w(v);
      idx += 1;  // the ReLU's index
    }
    ++idx;
  }
  // AdaptiveAvgPool2d(7) is the identity at 224x224 (and at the tiny size, 1x1 stays 1x1).
  x = n.reshape(x, {m.c.batch, ch * side * side});
  int64_t hidden = m.w(4096);
  LinearOpts lora{.bias = true, .lora = true, .rank2 = true};
  x = n.relu(n.linear(x, ch * side * side, hidden, "classifier.0", lora));
  x = n.relu(n.linear(x, hidden, hidden, "classifier.3", lora));
  return m.head(x, hidden, "classifier.6");
}

std::string mobilenetV2(Cnn& m, const std::string& image) {
  Net& n = m.n;
  std::string x = m.relu6(m.conv(image, 3, m.w(32), 3, 2, "features.0.0"));
  int64_t ch = m.w(32), idx = 1;
  const int64_t settings[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  for (const auto& s : settings) {
    for (int64_t i = 0; i < s[2]; ++i, ++idx) {
      std::string p = "features." + std::to_string(idx) + ".conv.";
      int64_t out = m.w(s[1]), stride = i == 0 ? s[3] : 1, hid = ch * s[0];
      std::string h = x;
      int layer = 0;
      if (s[0] != 1) h = m.relu6(m.conv(h, ch, hid, 1, 1, p + std::to_string(layer++) + ".0"));
      h = m.relu6(m.conv(h, hid, hid, 3, stride, p + std::to_string(layer++) + ".0", hid));
      h = m.conv(h, hid, out, 1, 1, p + std::to_string(layer));
      x = (stride == 1 && ch == out) ? n.add(x, h) : h;
      ch = out;
    }
  }
  x = m.relu6(m.conv(x, ch, m.w(1280), 1, 1, "features.18.0"));
  return m.head(m.globalPool(x), m.w(1280), "classifier.1");
}

Result<std::unique_ptr<OnnxBuilder>> buildCnn(const CnnConfig& c, const ZooOptions& o,
                                              std::string (*body)(Cnn&, const std::string&)) {
  if (c.image % 32 != 0) return makeError("zoo {}: image side {} must be a multiple of 32", c.graphName, c.image);
  auto bp = std::make_unique<OnnxBuilder>(c.graphName, o.tiny ? Weights::Random : Weights::External, o.seed);
  OnnxBuilder& b = *bp;
  Net n(b, static_cast<int>(o.loraRank), o.loraAlpha);
  std::string image = b.input("input_0", ::onnx::TensorProto::FLOAT, {c.batch, 3, c.image, c.image});
  std::string labels = b.input("input_1", ::onnx::TensorProto::INT64, {c.batch});
  Cnn m(n, c);
  std::string logits = body(m, image);
  b.output(n.crossEntropy(logits, labels, c.classes), ::onnx::TensorProto::FLOAT, {});
  b.setMetadata("fbl.trainable", "*lora_*");
  return bp;
}

ZooBuildFn cnn(const std::string& name, std::string (*body)(Cnn&, const std::string&)) {
  return [name, body](const ZooOptions& o) {
    CnnConfig c;
    c.graphName = name;
    if (o.tiny) c.image = 32, c.classes = 10, c.batch = 2, c.widthDivisor = 16;
    if (o.batch > 0) c.batch = o.batch;
    if (o.seq > 0) c.image = o.seq;
    return buildCnn(c, o, body);
  };
}

}  // namespace

ZooFamily cnnModels() {
  return {
      {{"mobilenetv2", "MobileNetV2 (torchvision), inverted residuals, ReLU6; LoRA on dense convs and the classifier; batch 8, 3x224x224",
        "torchvision.models.mobilenet_v2 (Sandler et al. 2018)"},
       cnn("mobilenetv2", mobilenetV2)},
      {{"vgg19", "VGG19 (torchvision, no BN), 16 convs + 3 FC; LoRA on every conv and FC; batch 8, 3x224x224",
        "torchvision.models.vgg19 (Simonyan & Zisserman 2015)"},
       cnn("vgg19", vgg19)},
      {{"resnet34", "ResNet34 (torchvision), BasicBlocks 3/4/6/3, BN folded into convs; LoRA on convs and fc; batch 8, 3x224x224",
        "torchvision.models.resnet34 (He et al. 2016)"},
       cnn("resnet34", resnet34)},
  };
}

}  // namespace fbl::zoo
