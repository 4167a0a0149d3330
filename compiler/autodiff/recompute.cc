// Recomputation, in the steps of recompute.h. Node and value ids are positions in the graph's
// vectors; the forward nodes come first in the joint graph, so a forward position is a node id.
#include "compiler/autodiff/recompute.h"

#include <algorithm>
#include <map>
#include <set>

#include "compiler/ir/graph_edit.h"

namespace fbl::autodiff {

namespace {

int64_t bytesOf(const ir::Value& v) { return ir::numElements(v.shape) * static_cast<int64_t>(ir::dtypeSize(v.dtype)); }

// What recomputation needs to know of the joint graph.
struct ForwardCuts {
  std::vector<ir::NodeId> forward;      // live forward nodes, in order
  std::vector<int64_t> position;        // per node: its index in `forward`, -1 for other nodes
  std::vector<bool> activation;         // per value (step 1)
  std::vector<bool> keptAnyway;         // per value: graph outputs and updated buffers
  std::vector<std::vector<ir::NodeId>> consumers;
  std::vector<RecomputeSegment> segments;
  std::vector<std::vector<ir::ValueId>> saved;  // per segment: what the backward reads of it
};

bool isForward(const ir::Graph& g, ir::NodeId n) { return n != ir::kNoNode && g.nodes[n].phase == ir::Phase::Forward; }

ForwardCuts analyse(const ir::Graph& g, const std::vector<ir::ValueId>& kept) {
  ForwardCuts c;
  c.position.assign(g.nodes.size(), -1);
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(g.nodes.size()); ++id)
    if (!g.nodes[id].dead && g.nodes[id].phase == ir::Phase::Forward) {
      c.position[id] = static_cast<int64_t>(c.forward.size());
      c.forward.push_back(id);
    }
  c.consumers = g.consumers();
  // Step 1: activations are what the inputs become through the weights.
  std::vector<bool> onWeights(g.values.size(), false), onInputs(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) {
    onWeights[v] = g.values[v].kind == ir::ValueKind::Initializer;
    onInputs[v] = g.values[v].kind == ir::ValueKind::Input;
  }
  for (ir::NodeId id : c.forward) {
    bool w = false, i = false;
    for (ir::ValueId in : g.nodes[id].inputs)
      if (in != ir::kNoValue) {
        w = w || onWeights[in];
        i = i || onInputs[in];
      }
    for (ir::ValueId out : g.nodes[id].outputs)
      if (out != ir::kNoValue) {
        onWeights[out] = w;
        onInputs[out] = i;
      }
  }
  c.activation.assign(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) c.activation[v] = onWeights[v] && onInputs[v];
  c.keptAnyway.assign(g.values.size(), false);
  for (ir::ValueId v : g.outputs) c.keptAnyway[v] = true;
  for (const ir::StateUpdate& u : g.stateUpdates) c.keptAnyway[u.updated] = true;
  // Step 2: how many activations cross each boundary (after forward[b]).
  const auto n = static_cast<int64_t>(c.forward.size());
  std::vector<int64_t> delta(n + 1, 0);
  for (int64_t p = 0; p < n; ++p)
    for (ir::ValueId out : g.nodes[c.forward[p]].outputs) {
      if (out == ir::kNoValue || !c.activation[out]) continue;
      int64_t last = p;
      for (ir::NodeId r : c.consumers[out])
        if (c.position[r] >= 0) last = std::max(last, c.position[r]);
      // Read across a quarter of the forward or more (an encoder's output that every decoder
      // layer attends to, a UNet's skip connection): kept, and no obstacle to a cut.
      if (4 * (last - p) >= n) continue;
      ++delta[p];
      --delta[last];
    }
  std::vector<int64_t> cuts;  // boundaries: a segment ends at forward[b]
  int64_t crossing = 0;
  for (int64_t b = 0; b < n; ++b) {
    crossing += delta[b];
    if (crossing <= 1) cuts.push_back(b);
  }
  // The segments between cuts; the one that holds the end of the forward (the loss) is left out,
  // and so is one that computes a kept value.
  std::vector<bool> pinned(g.values.size(), false);
  for (ir::ValueId v : kept) pinned[v] = true;
  int64_t start = 0;
  for (int64_t b : cuts) {
    if (b == n - 1) break;
    bool computesKept = false;
    for (int64_t p = start; p <= b; ++p)
      for (ir::ValueId out : g.nodes[c.forward[p]].outputs) computesKept = computesKept || (out != ir::kNoValue && pinned[out]);
    if (computesKept) {
      start = b + 1;
      continue;
    }
    RecomputeSegment s;
    s.first = c.forward[start];
    s.last = c.forward[b];
    std::vector<ir::ValueId> saved;
    for (int64_t p = start; p <= b; ++p)
      for (ir::ValueId out : g.nodes[c.forward[p]].outputs) {
        if (out == ir::kNoValue || !c.activation[out] || c.keptAnyway[out]) continue;
        bool readLater = false, readByBackward = false;
        for (ir::NodeId r : c.consumers[out]) {
          readLater = readLater || c.position[r] > b;
          readByBackward = readByBackward || !isForward(g, r);
        }
        // The value crossing the cut is the next segment's input: kept either way.
        if (readLater || !readByBackward) continue;
        saved.push_back(out);
        s.savedBytes += bytesOf(g.values[out]);
      }
    start = b + 1;
    if (saved.empty()) continue;
    c.segments.push_back(s);
    c.saved.push_back(std::move(saved));
  }
  return c;
}

}  // namespace

std::vector<RecomputeSegment> recomputeSegments(const ir::Graph& g, const std::vector<ir::ValueId>& kept) {
  ForwardCuts c = analyse(g, kept);
  return c.segments;
}

RecomputeSummary recompute(ir::Graph& g, int64_t count, const std::vector<ir::ValueId>& kept) {
  g.compact();
  ForwardCuts c = analyse(g, kept);
  std::vector<size_t> order(c.segments.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return c.segments[a].savedBytes > c.segments[b].savedBytes; });
  if (count >= 0 && static_cast<size_t>(count) < order.size()) order.resize(static_cast<size_t>(count));
  std::sort(order.begin(), order.end());
  RecomputeSummary summary;
  summary.candidates = static_cast<int64_t>(c.segments.size());
  std::map<ir::NodeId, std::vector<ir::Node>> before;  // clones to place before each backward node
  for (size_t k : order) {
    // This segment's clones only: a value of another segment (one kept because it is read
    // across a quarter of the forward) is read as the forward computed it, since that segment's
    // clones may run later.
    std::map<ir::ValueId, ir::ValueId> cloneOf;
    RecomputeSegment& s = c.segments[k];
    const std::vector<ir::ValueId>& saved = c.saved[k];
    const int64_t lo = c.position[s.first], hi = c.position[s.last];
    auto inSegment = [&](ir::ValueId v) {
      const ir::NodeId p = g.values[v].producer;
      return p != ir::kNoNode && c.position[p] >= lo && c.position[p] <= hi;
    };
    // The nodes of the segment the saved values need; values that depend on no weight are read
    // as the forward computed them.
    std::set<ir::NodeId> needed;
    std::vector<ir::ValueId> work(saved.begin(), saved.end());
    while (!work.empty()) {
      const ir::ValueId v = work.back();
      work.pop_back();
      const ir::NodeId p = g.values[v].producer;
      if (!needed.insert(p).second) continue;
      for (ir::ValueId in : g.nodes[p].inputs)
        if (in != ir::kNoValue && inSegment(in) && c.activation[in]) work.push_back(in);
    }
    // The first backward reader of a saved value: the clones run right before it.
    ir::NodeId at = static_cast<ir::NodeId>(g.nodes.size());
    for (ir::ValueId v : saved)
      for (ir::NodeId r : c.consumers[v])
        if (!isForward(g, r)) at = std::min(at, r);
    std::vector<ir::Node>& clones = before[at];
    for (ir::NodeId id : needed) {  // std::set: in forward order
      ir::Node n = g.nodes[id];
      n.name = g.uniqueName(n.name + "/recompute");
      n.phase = ir::Phase::Backward;
      for (ir::ValueId& in : n.inputs) {
        auto it = cloneOf.find(in);
        if (it != cloneOf.end()) {
          in = it->second;
        } else if (in != ir::kNoValue && g.values[in].kind != ir::ValueKind::Constant) {
          // A forward value a backward node now reads: a reuse edge (autodiff.cc, markReuse).
          g.values[in].reusedByBackward = true;
        }
      }
      for (ir::ValueId& out : n.outputs) {
        if (out == ir::kNoValue) continue;
        const ir::Value& v = g.values[out];
        const ir::ValueId copy = g.newValue(v.name + "/recompute", v.dtype, v.shape, v.shapeKnown);
        cloneOf[out] = copy;
        out = copy;
      }
      clones.push_back(std::move(n));
    }
    // The backward reads the clones, and no longer the forward's values.
    for (ir::ValueId v : saved) {
      for (ir::NodeId r : c.consumers[v])
        if (!isForward(g, r))
          for (ir::ValueId& in : g.nodes[r].inputs)
            if (in == v) in = cloneOf.at(v);
      g.values[v].reusedByBackward = false;
    }
    s.nodes = static_cast<int64_t>(needed.size());
    ++summary.segments;
    summary.clonedNodes += s.nodes;
    summary.savedBytes += s.savedBytes;
  }
  // The clones in their places.
  if (!before.empty()) ir::insertBefore(g, std::move(before));
  return summary;
}

}  // namespace fbl::autodiff
