// The zoo: every model imports and loads with static shapes at full size; every --tiny model
// builds its joint training graph and takes one finite reference training step; the zoo's
// llama/bert/vit match the corpus exports' op counts after loading and in the joint graph.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "compiler/autodiff/training_graph.h"
#include "compiler/autodiff/training_summary.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/load_model.h"
#include "compiler/train/ref_trainer.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "compiler/zoo/zoo.h"

using namespace fbl;
namespace fonnx = fbl::onnx;

namespace {

// The zoo file is never written: import reads the bytes; the path only names the model's
// folder (for the external-data location, which need not exist).
ir::Graph loadBuilt(zoo::OnnxBuilder& b, const std::string& name) {
  std::string path = (std::filesystem::temp_directory_path() / (name + ".onnx")).string();
  auto imported = fonnx::importModelFromBytes(b.serialize(path), path);
  INFO(name);
  INFO((imported.ok() ? "" : imported.error().message));
  REQUIRE(imported.ok());
  auto loaded = fbl::passes::simplifyModel(std::move(imported).value());
  INFO((loaded.ok() ? "" : loaded.error().message));
  REQUIRE(loaded.ok());
  return std::move(loaded).value();
}

std::map<std::string, int64_t> opCounts(const ir::Graph& g) {
  std::map<std::string, int64_t> c;
  for (const auto& n : g.nodes)
    if (!n.dead) ++c[n.op];
  return c;
}

int64_t unshaped(const ir::Graph& g) {
  int64_t n = 0;
  for (const auto& node : g.nodes)
    if (!node.dead)
      for (ir::ValueId v : node.outputs)
        if (v != ir::kNoValue && !g.values[v].shapeKnown) ++n;
  return n;
}

std::vector<std::string> trainableGlobs(const zoo::OnnxBuilder& b) {
  for (const auto& p : b.model().metadata_props())
    if (p.key() == "fbl.trainable") {
      std::vector<std::string> globs;
      std::stringstream ss(p.value());
      for (std::string g; std::getline(ss, g, ',');) globs.push_back(g);
      return globs;
    }
  return {"*lora_*"};
}

}  // namespace

TEST_CASE("zoo: every full-size model imports and loads with static shapes", "[zoo]") {
  for (const auto& e : zoo::zooEntries()) {
    auto b = zoo::buildZooModel(e.name, {});
    INFO((b.ok() ? "" : b.error().message));
  REQUIRE(b.ok());
    ir::Graph g = loadBuilt(**b, e.name);
    INFO(e.name);
    CHECK(unshaped(g) == 0);
    CHECK(g.outputs.size() == 1);
    int64_t live = 0;
    for (const auto& n : g.nodes) live += !n.dead;
    WARN(e.name << ": " << (*b)->nodeCount() << " nodes written, " << live << " after loading, "
                << (*b)->parameterElements() << " parameters");
  }
}

TEST_CASE("zoo: every --tiny model takes one finite reference training step", "[zoo]") {
  std::vector<std::pair<std::string, std::string>> runs;  // name, --tuning
  for (const auto& e : zoo::zooEntries()) runs.push_back({e.name, ""});
  runs.push_back({"vit-large", "lora"});
  for (const auto& [name, tuning] : runs) {
    zoo::ZooOptions o;
    o.tiny = true;
    o.tuning = tuning;
    zoo::ZooEntry e{name + (tuning.empty() ? "" : " --tuning " + tuning), "", ""};
    INFO(e.name);
    auto b = zoo::buildZooModel(name, o);
    INFO((b.ok() ? "" : b.error().message));
  REQUIRE(b.ok());
    ir::Graph g = loadBuilt(**b, name);
    autodiff::TrainingOptions topts;
    topts.trainableGlobs = trainableGlobs(**b);
    auto tg = autodiff::buildTrainingGraph(g, topts);
    INFO((tg.ok() ? "" : tg.error().message));
    REQUIRE(tg.ok());
    REQUIRE(!tg->trainables.empty());
    auto trainer = train::RefTrainer::create(std::move(tg).value());
    auto batch = zoo::syntheticInputs(trainer->training().graph, 7);
    REQUIRE(batch.ok());
    auto step = trainer->step(*batch);
    INFO((step.ok() ? "" : step.error().message));
  REQUIRE(step.ok());
    CHECK(std::isfinite(step->loss));
    CHECK(step->loss > 0);
  }
}

namespace {

void compareWithCorpus(zoo::OnnxBuilder& b, const std::string& corpus) {
  ir::Graph mine = loadBuilt(b, "zoo-" + corpus);
  auto theirs = fbl::passes::loadModel(std::string(FBL_TEST_DATA_DIR) + "/" + corpus + "/model.onnx");
  REQUIRE(theirs.ok());
  INFO(corpus);
  CHECK(opCounts(mine) == opCounts(*theirs));
  auto tgMine = autodiff::buildTrainingGraph(mine, {});
  auto tgTheirs = autodiff::buildTrainingGraph(*theirs, {});
  INFO((tgMine.ok() ? "" : tgMine.error().message));
  REQUIRE(tgMine.ok());
  REQUIRE(tgTheirs.ok());
  auto sm = autodiff::summarizeTrainingGraph(*tgMine);
  auto st = autodiff::summarizeTrainingGraph(*tgTheirs);
  for (int phase = 0; phase < 3; ++phase) {
    INFO("phase " << phase);
    CHECK(sm.ops[phase] == st.ops[phase]);
    CHECK(sm.nodes[phase] == st.nodes[phase]);
  }
  CHECK(sm.trainableCount == st.trainableCount);
  CHECK(sm.trainableElements == st.trainableElements);
}

}  // namespace

TEST_CASE("zoo: llama has the corpus llama-tiny's structure at its configuration", "[zoo]") {
  zoo::LlamaConfig c;
  c.layers = 2, c.hidden = 64, c.heads = 4, c.kvHeads = 2, c.headDim = 16;
  c.intermediate = 176, c.vocab = 256, c.seq = 16, c.tieEmbeddings = false;
  zoo::ZooOptions o;
  o.tiny = true;
  auto b = zoo::buildLlama(c, o);
  REQUIRE(b.ok());
  compareWithCorpus(**b, "llama-tiny");
}

TEST_CASE("zoo: bert has the corpus bert-tiny's structure at its configuration", "[zoo]") {
  zoo::BertConfig c;
  c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.vocab = 200;
  c.maxPositions = 64, c.batch = 2, c.seq = 16;
  zoo::ZooOptions o;
  o.tiny = true;
  auto b = zoo::buildBert(c, o);
  REQUIRE(b.ok());
  compareWithCorpus(**b, "bert-tiny");
}

TEST_CASE("zoo: vit with LoRA has the corpus vit-tiny's structure at its configuration", "[zoo]") {
  zoo::VitConfig c;
  c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.image = 32, c.patch = 8;
  c.classes = 10, c.batch = 2, c.adapter = false;
  zoo::ZooOptions o;
  o.tiny = true;
  auto b = zoo::buildVit(c, o);
  REQUIRE(b.ok());
  compareWithCorpus(**b, "vit-tiny");
}

TEST_CASE("zoo: synthetic inputs draw ids below the vocabulary and labels below the classes", "[zoo]") {
  zoo::ZooOptions o;
  o.tiny = true;
  for (const char* name : {"llama3.2-1b", "vit-large"}) {
    auto b = zoo::buildZooModel(name, o);
    REQUIRE(b.ok());
    ir::Graph g = loadBuilt(**b, name);
    auto batch = zoo::syntheticInputs(g, 3);
    REQUIRE(batch.ok());
    auto again = zoo::syntheticInputs(g, 3);
    for (ir::ValueId id : g.inputs) {
      const ir::Tensor& t = batch->at(id);
      CHECK(t.shape() == g.values[id].shape);
      CHECK(std::memcmp(t.raw(), again->at(id).raw(), t.nbytes()) == 0);
      if (t.dtype() != ir::DType::I64) continue;
      // Naive reference: the bound is the table's rows for llama's ids, the classes for vit.
      int64_t bound = std::string(name) == "vit-large" ? 10 : 256;
      CHECK(zoo::integerInputBound(g, id) == bound);
      for (int64_t i = 0; i < t.numel(); ++i) {
        CHECK(t.at(i) >= 0);
        CHECK(t.at(i) < bound);
      }
    }
  }
}

TEST_CASE("zoo: unknown names and bad options are one-line errors", "[zoo]") {
  auto bad = zoo::buildZooModel("gpt-5", {});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("unknown model 'gpt-5'") != std::string::npos);
  zoo::ZooOptions o;
  o.tuning = "prefix";
  CHECK(!zoo::buildZooModel("vit-large", o).ok());
  CHECK(!zoo::buildZooModel("bert-large", o).ok());
  zoo::ZooOptions r;
  r.loraRank = 0;
  CHECK(!zoo::buildZooModel("llama3.2-1b", r).ok());
}

TEST_CASE("zoo: llama3.2-1b has the corpus llama-full's loaded structure", "[zoo]") {
  // llama-full was exported with separate embedding and lm_head tensors; that changes no node.
  auto b = zoo::buildZooModel("llama3.2-1b", {});
  REQUIRE(b.ok());
  ir::Graph mine = loadBuilt(**b, "zoo-llama-full");
  auto theirs = fbl::passes::loadModel(std::string(FBL_TEST_DATA_DIR) + "/llama-full/model.onnx");
  REQUIRE(theirs.ok());
  CHECK(opCounts(mine) == opCounts(*theirs));
  std::map<std::string, ir::Shape> shapes;
  for (const auto* g : {&mine, &theirs.value()})
    for (ir::ValueId id : g->inputs) shapes[g == &mine ? "mine" : "theirs"] = g->values[id].shape;
  CHECK(shapes["mine"] == shapes["theirs"]);
}

TEST_CASE("zoo: a --tiny model is the same bytes for the same seed", "[zoo]") {
  zoo::ZooOptions o;
  o.tiny = true;
  auto a = zoo::buildZooModel("gemma2-2b", o);
  auto b = zoo::buildZooModel("gemma2-2b", o);
  o.seed = 1;
  auto c = zoo::buildZooModel("gemma2-2b", o);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK((*a)->serialize("m.onnx") == (*b)->serialize("m.onnx"));
  CHECK((*a)->serialize("m.onnx") != (*c)->serialize("m.onnx"));
}

TEST_CASE("zoo: the tiny llama learns a fixed synthetic batch", "[zoo]") {
  zoo::ZooOptions o;
  o.tiny = true;
  auto b = zoo::buildZooModel("llama3.2-1b", o);
  REQUIRE(b.ok());
  ir::Graph g = loadBuilt(**b, "llama-learns");
  autodiff::TrainingOptions topts;
  topts.optimizer.lr = 1e-2f;
  auto tg = autodiff::buildTrainingGraph(g, topts);
  REQUIRE(tg.ok());
  auto trainer = train::RefTrainer::create(std::move(tg).value());
  auto batch = zoo::syntheticInputs(trainer->training().graph, 11);
  REQUIRE(batch.ok());
  std::vector<float> losses;
  for (int s = 0; s < 8; ++s) {
    auto step = trainer->step(*batch);
    REQUIRE(step.ok());
    losses.push_back(step->loss);
  }
  INFO("first " << losses.front() << " last " << losses.back());
  CHECK(losses.back() < losses.front());
}
