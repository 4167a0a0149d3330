// The layout text form: the words are in layout_text.h.
//
// Reading runs in four steps: parse the graph and keep its annotations; classify it (classes
// and the reads through chains, as classify-operators does); read the values' R-Tiles (own ones
// first, then those naming another value's), then the nodes' classes and verdicts and the
// inputs' read decisions and conversions; finally settle the movement ops stated eliminated as
// layout-assignment does (settleFolded) and check the whole.
#include "compiler/passes/layout_text.h"

#include <charconv>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "compiler/ir/parser.h"
#include "compiler/layout/rtile.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/classify_operators.h"
#include "compiler/passes/tile_index_elimination.h"

namespace fbl::passes {

namespace {

using ir::NodeId;
using ir::ValueId;
using Kind = ir::AnnotationToken::Kind;

std::string tileText(const layout::TileSpec& s) {
  std::string t = fmt::format("{}x{} ", s.tileH, s.tileW);
  t += s.lh == 0 ? std::string("strips") : fmt::format("blocks {}x{}:{}x{}", s.lh, s.lw, s.blockH, s.blockW);
  return t + (s.rowsAlongX ? " rows-along-x" : " cols-along-x");
}

void append(std::string& out, std::string_view word) {
  if (!out.empty()) out += ' ';
  out += word;
}

class LayoutAnnotator : public ir::Annotator {
 public:
  explicit LayoutAnnotator(const LayoutAssignment& a) : a_(a) {
    for (const Conversion& c : a.conversions) {
      if (c.slot < 0) {
        after_[c.from].push_back(&c);
      } else {
        before_[{c.consumer, c.slot}].push_back(&c);
      }
    }
  }

  std::string value(const ir::Graph& g, ValueId v) const override {
    if (v >= static_cast<ValueId>(a_.values.size())) return {};
    const ValueLayout& vl = a_.values[v];
    std::string out;
    if (vl.kind == ValueLayout::Kind::kRTile) {
      const RTileEntry& e = a_.rtiles[vl.rtile];
      out = e.value == v ? "rtile " + tileText(e.spec()) : "rtile of " + ir::printValueName(g.values[e.value].name);
    }
    if (vl.anchor) append(out, "anchor");
    if (vl.writtenTiled) append(out, "written");
    if (auto it = after_.find(v); it != after_.end())
      for (const Conversion* c : it->second) append(out, "convert " + ir::printString(c->reason));
    return out;
  }

  std::string input(const ir::Graph&, NodeId n, int slot) const override {
    std::string out;
    const ReadThrough* r = a_.readAt(n, slot);
    if (r != nullptr) {
      switch (r->decision) {
        case ReadThrough::Decision::kUndecided: break;
        case ReadThrough::Decision::kTileMap:
          out = fmt::format("tile-map {}x{}{}", r->tile.tileH, r->tile.tileW, r->transposedRead ? " transposed" : "");
          break;
        case ReadThrough::Decision::kIndexMap: out = "index-map"; break;
        case ReadThrough::Decision::kExplicit: out = "explicit " + ir::printString(r->reason); break;
      }
    }
    if (auto it = before_.find({n, slot}); it != before_.end()) {
      for (const Conversion* c : it->second) {
        const bool sameReason = r != nullptr && r->decision == ReadThrough::Decision::kExplicit && r->reason == c->reason;
        append(out, sameReason ? std::string("convert") : "convert " + ir::printString(c->reason));
      }
    }
    return out;
  }

  std::string node(const ir::Graph&, NodeId n) const override {
    if (n >= static_cast<NodeId>(a_.nodeClass.size()) || a_.nodeClass[n] == OpClass::kNone) return {};
    std::string out = opClassName(a_.nodeClass[n]);
    const TransformStatus& t = a_.transforms[n];
    if (t.eliminated) append(out, "eliminated");
    else if (t.isTransform && !t.reason.empty()) append(out, "explicit " + ir::printString(t.reason));
    return out;
  }

 private:
  const LayoutAssignment& a_;
  std::map<ValueId, std::vector<const Conversion*>> after_;
  std::map<std::pair<NodeId, int>, std::vector<const Conversion*>> before_;
};

// One annotation's words, read front to back.
class Words {
 public:
  Words(std::vector<ir::AnnotationToken> toks, const ir::Annotation& at, std::string_view source)
      : toks_(std::move(toks)), at_(at), source_(source) {}

  bool done() const { return pos_ >= toks_.size(); }
  bool acceptWord(std::string_view w) {
    if (done() || toks_[pos_].kind != Kind::Word || toks_[pos_].text != w) return false;
    ++pos_;
    return true;
  }
  Result<std::string> word(std::string_view what) { return take(Kind::Word, what); }
  Result<std::string> string(std::string_view what) { return take(Kind::String, what); }
  Result<std::string> valueName(std::string_view what) { return take(Kind::Value, what); }
  std::optional<std::string> optionalString() {
    if (done() || toks_[pos_].kind != Kind::String) return std::nullopt;
    return toks_[pos_++].text;
  }
  Status expectPunct(char c) {
    if (!done() && toks_[pos_].kind == Kind::Punct && toks_[pos_].text[0] == c) {
      ++pos_;
      return {};
    }
    return fail(fmt::format("expected '{}' {}", c, where()));
  }
  // "HxW" as two positive integers.
  Result<std::pair<int64_t, int64_t>> dims(std::string_view what) {
    FBL_ASSIGN(std::string w, word(what));
    int64_t a = 0, b = 0;
    const char* end = w.data() + w.size();
    auto [x, e1] = std::from_chars(w.data(), end, a);
    bool ok = e1 == std::errc() && x != end && *x == 'x';
    if (ok) {
      auto [y, e2] = std::from_chars(x + 1, end, b);
      ok = e2 == std::errc() && y == end;
    }
    if (!ok || a <= 0 || b <= 0) return fail(fmt::format("'{}' is not {} (HxW)", w, what));
    return std::pair(a, b);
  }
  Error fail(std::string_view msg) const {
    return makeError("{}:{}: <{}>: {}", source_, at_.line, at_.text, msg);
  }
  std::string where() const {
    return done() ? "at the end" : fmt::format("but found '{}'", toks_[pos_].text);
  }

 private:
  Result<std::string> take(Kind k, std::string_view what) {
    if (!done() && toks_[pos_].kind == k) return toks_[pos_++].text;
    return fail(fmt::format("expected {} {}", what, where()));
  }

  std::vector<ir::AnnotationToken> toks_;
  size_t pos_ = 0;
  const ir::Annotation& at_;
  std::string_view source_;
};

class Reader {
 public:
  Reader(const ir::Graph& g, LayoutAssignment& a, const profile::HardwareProfile& p, std::string_view source)
      : g_(g), a_(a), p_(p), source_(source), checker_(g) {}

  Status run(const ir::ParsedAnnotations& found) {
    tileUses_ = tileUses(g_, a_);
    for (const auto& [v, at] : found.values) FBL_TRY(value(v, at));
    FBL_TRY(sharedAndWritten());
    for (const auto& [n, at] : found.nodes) FBL_TRY(node(n, at));
    for (const auto& [key, at] : found.inputs) FBL_TRY(input(key.first, key.second, at));
    FBL_TRY(settleEliminated());
    FBL_TRY(checkAssignment(g_, a_, /*final=*/false));
    return {};
  }

 private:
  Result<Words> words(const ir::Annotation& at) {
    FBL_ASSIGN(auto toks, ir::lexAnnotation(at, source_));
    return Words(std::move(toks), at, source_);
  }

  // A value's words. `rtile of %v` is kept for later: its source may be defined after it.
  Status value(ValueId v, const ir::Annotation& at) {
    FBL_ASSIGN(Words w, words(at));
    const std::string& name = g_.values[v].name;
    ValueLayout& vl = a_.values[v];
    while (!w.done()) {
      if (w.acceptWord("rtile")) {
        if (w.acceptWord("of")) {
          FBL_ASSIGN(std::string from, w.valueName("the value whose R-Tile this is"));
          shared_.push_back({v, from, &at});
          continue;
        }
        FBL_ASSIGN(RTileEntry e, ownRTile(w, v));
        a_.rtiles.push_back(std::move(e));
        vl.kind = ValueLayout::Kind::kRTile;
        vl.rtile = static_cast<int>(a_.rtiles.size()) - 1;
        vl.why = "R-Tile stated in the layout text";
      } else if (w.acceptWord("anchor")) {
        if (tileUses_[v].firstTileReader == ir::kNoNode)
          return w.fail(fmt::format("%{} is read tile by tile by no FTD-D operator: it is not an anchor", name));
        vl.anchor = true;
      } else if (w.acceptWord("written")) {
        vl.writtenTiled = true;
        written_.push_back({v, {}, &at});
      } else if (w.acceptWord("convert")) {
        FBL_ASSIGN(std::string why, w.string("the conversion's reason"));
        const NodeId p = g_.values[v].producer;
        if (p == ir::kNoNode) return w.fail(fmt::format("%{} has no producer to convert after", name));
        a_.conversions.push_back({p, -1, v, why});
      } else {
        return w.fail(fmt::format("expected rtile, anchor, written or convert {}", w.where()));
      }
    }
    return {};
  }

  Status sharedAndWritten() {
    for (const Pending& s : shared_) {
      FBL_ASSIGN(Words w, words(*s.at));
      FBL_TRY(sharedRTile(w, s.value, s.from));
    }
    for (const Pending& s : written_) {
      if (a_.values[s.value].kind != ValueLayout::Kind::kLinear) continue;
      FBL_ASSIGN(Words w, words(*s.at));
      return w.fail(fmt::format("%{} is linear: only an R-Tile is written tiled", g_.values[s.value].name));
    }
    return {};
  }

  // `rtile HxW strips|blocks LHxLW:BHxBW cols-along-x|rows-along-x`, after "rtile".
  Result<RTileEntry> ownRTile(Words& w, ValueId v) {
    const ir::Value& val = g_.values[v];
    FBL_ASSIGN(auto tile, w.dims("a tile"));
    layout::TileSpec stated = layout::TileSpec::rowStrips(tile.first, tile.second);
    if (!w.acceptWord("strips")) {
      if (!w.acceptWord("blocks")) return w.fail(fmt::format("expected strips or blocks {}", w.where()));
      FBL_ASSIGN(auto block, w.dims("an element block"));
      FBL_TRY(w.expectPunct(':'));
      FBL_ASSIGN(auto texels, w.dims("a texel block"));
      stated = layout::TileSpec::blocks(tile.first, tile.second, block.first, block.second, texels.first, texels.second);
    }
    if (w.acceptWord("rows-along-x")) stated.rowsAlongX = true;
    else if (!w.acceptWord("cols-along-x")) return w.fail(fmt::format("expected cols-along-x or rows-along-x {}", w.where()));
    if (!ir::isFloat(val.dtype) || !val.shapeKnown || val.shape.size() < 2)
      return w.fail(fmt::format("%{} is not a float matrix of known shape: it has no R-Tile", val.name));
    RTileEntry e;
    e.value = v;
    e.uses = tileUses_[v].uses;
    const layout::TensorExtent extent = layout::matrixView(val.shape);
    e.choice = choiceForTile(val.name, extent, e.uses, tile.first, tile.second, p_);
    if (!e.uses.empty()) e.choice.verdicts = layout::pruneCandidates({val.name, extent, e.uses}, p_);
    e.note = "stated in the layout text";
    const layout::TileSpec derived = e.spec();
    if (tileText(derived) != tileText(stated))
      return w.fail(fmt::format("on profile '{}' a {}x{} tile of %{} is {}", p_.name, tile.first, tile.second,
                                val.name, tileText(derived)));
    return e;
  }

  Status sharedRTile(Words& w, ValueId v, const std::string& from) {
    const ValueId src = g_.findValue(from);
    if (src == ir::kNoValue) return w.fail(fmt::format("no value %{}", from));
    const ValueLayout& sl = a_.values[src];
    if (sl.kind != ValueLayout::Kind::kRTile || a_.rtiles[sl.rtile].value != src)
      return w.fail(fmt::format("%{} has no R-Tile of its own", from));
    if (g_.values[src].shape != g_.values[v].shape)
      return w.fail(fmt::format("%{} and %{} differ in shape: they cannot share an R-Tile", from, g_.values[v].name));
    a_.values[v].kind = ValueLayout::Kind::kRTile;
    a_.values[v].rtile = sl.rtile;
    a_.values[v].why = "R-Tile of " + from + ", stated in the layout text";
    return {};
  }

  Status node(NodeId n, const ir::Annotation& at) {
    FBL_ASSIGN(Words w, words(at));
    const ir::Node& node = g_.nodes[n];
    FBL_ASSIGN(std::string cls, w.word("the node's class"));
    if (cls != opClassName(a_.nodeClass[n]))
      return w.fail(fmt::format("node {} ({}) is {}, not {}", node.name, node.op, opClassName(a_.nodeClass[n]), cls));
    TransformStatus& t = a_.transforms[n];
    if (w.acceptWord("eliminated")) {
      if (!t.folded)
        return w.fail(fmt::format("node {} is folded into no read: it cannot be eliminated", node.name));
      t.eliminated = true;
      eliminated_.push_back({n, &at});
    } else if (w.acceptWord("explicit")) {
      if (!t.isTransform) return w.fail(fmt::format("node {} is not a movement op", node.name));
      FBL_ASSIGN(t.reason, w.string("the reason it runs"));
    }
    if (!w.done()) return w.fail(fmt::format("expected eliminated or explicit after the class {}", w.where()));
    return {};
  }

  Status input(NodeId n, int slot, const ir::Annotation& at) {
    FBL_ASSIGN(Words w, words(at));
    const ir::Node& node = g_.nodes[n];
    if (node.inputs[slot] == ir::kNoValue) return w.fail(fmt::format("input {} of {} is omitted", slot, node.name));
    ReadThrough* r = a_.readAt(n, slot);
    auto needRead = [&]() -> Status {
      if (r != nullptr) return {};
      return w.fail(fmt::format("input {} of {} reads %{} directly, through no movement op", slot, node.name,
                                g_.values[node.inputs[slot]].name));
    };
    if (w.acceptWord("tile-map")) {
      FBL_TRY(needRead());
      FBL_ASSIGN(auto tile, w.dims("a tile"));
      const bool transposed = w.acceptWord("transposed");
      const RTileEntry* e = a_.rtileOf(r->source);
      const layout::TileConfig t{tile.first, tile.second};
      if (e == nullptr || !(e->tile() == t))
        return w.fail(fmt::format("%{} is stored {}, not in {} tiles", g_.values[r->source].name,
                                  e ? e->tile().str() : std::string("linear"), t.str()));
      const TileReadChecker::Verdict& v = checker_.check(*r, t);
      if (!v.ok)
        return w.fail(fmt::format("no tile map: {} fails: {}", layout::tileCheckName(v.result.failed), v.result.reason));
      if (v.transposed != transposed)
        return w.fail(fmt::format("the tile map of input {} of {} is {}read transposed", slot, node.name,
                                  v.transposed ? "" : "not "));
      decideRead(*r, a_, checker_);
    } else if (w.acceptWord("index-map")) {
      FBL_TRY(needRead());
      decideRead(*r, a_, checker_);
      if (r->decision != ReadThrough::Decision::kIndexMap) {
        r->decision = ReadThrough::Decision::kIndexMap;
        r->reason = "element index map, stated in the layout text";
      }
    } else if (w.acceptWord("explicit")) {
      FBL_TRY(needRead());
      r->decision = ReadThrough::Decision::kExplicit;
      FBL_ASSIGN(r->reason, w.string("the reason it is converted"));
    }
    if (w.acceptWord("convert")) {
      std::optional<std::string> why = w.optionalString();
      if (!why && (r == nullptr || r->decision != ReadThrough::Decision::kExplicit))
        return w.fail("a conversion without a reason takes an explicit read's");
      a_.conversions.push_back({n, slot, r ? r->source : node.inputs[slot], why ? *why : r->reason});
    }
    if (!w.done())
      return w.fail(fmt::format("expected tile-map, index-map, explicit or convert {}", w.where()));
    return {};
  }

  // A movement op stated eliminated gets layout-assignment's verdict from the reads through it
  // (whether it is tile-mapped, and why), which must agree: no read through it is explicit.
  Status settleEliminated() {
    if (eliminated_.empty()) return {};
    const std::vector<std::vector<int>> through = readsThroughNodes(g_, a_);
    for (const auto& [n, at] : eliminated_) {
      TransformStatus& t = a_.transforms[n];
      settleFolded(g_, a_, through[n], t);
      if (t.eliminated) continue;
      FBL_ASSIGN(Words w, words(*at));
      return w.fail(fmt::format("node {} is not eliminated: it is {}", g_.nodes[n].name, t.reason));
    }
    return {};
  }

  struct Pending {
    ValueId value;
    std::string from;
    const ir::Annotation* at;
  };

  const ir::Graph& g_;
  LayoutAssignment& a_;
  const profile::HardwareProfile& p_;
  std::string_view source_;
  TileReadChecker checker_;
  std::vector<TileUses> tileUses_;
  std::vector<Pending> shared_, written_;  // `rtile of %v`, `written`: checked once all R-Tiles are read
  std::vector<std::pair<NodeId, const ir::Annotation*>> eliminated_;  // settled once the reads are
};

}  // namespace

std::string printLayoutGraph(const ir::Graph& g, const LayoutAssignment& a, ir::PrintOptions opts) {
  LayoutAnnotator annotator(a);
  opts.annotator = &annotator;
  return ir::printGraph(g, opts);
}

Result<LayoutGraph> parseLayoutGraph(std::string_view text, const profile::HardwareProfile& p, std::string_view source,
                                     strategy::Strategy strategy) {
  ir::ParsedAnnotations found;
  FBL_ASSIGN(ir::Graph g, ir::parseGraph(text, source, &found));
  LayoutGraph out{std::move(g), {}};
  out.assignment.strategy = strategy;
  out.assignment.profile = p.name;
  ClassifyOperators classify(out.assignment);
  FBL_TRY(classify.run(out.graph));
  Reader reader(out.graph, out.assignment, p, source);
  FBL_TRY(reader.run(found));
  return out;
}

}  // namespace fbl::passes
