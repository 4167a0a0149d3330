// What `fbl-bench cache` reports: simulated counters summed per launch, phase and strategy
// (or per access pattern and thread count), with the roofline estimate, as a table, as the
// JSON `results` list and as a Figure-15-style SVG (each strategy's figures over fblayout's).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/access_counters.h"
#include "sim/memory_model.h"

namespace fbl::bench {

struct SimulatedLaunch {
  std::string phase, kind, node, kernel;  // kind: compute, transform, conversion (plans)
  sim::AccessCounters counters;
  double estimatedMs = 0;
  std::string binds;  // the estimate's largest term: compute, DRAM or L2
};

// One strategy's run (or one operator pass's, or one access pattern at one thread count).
struct SimulatedRun {
  std::string strategy;               // or the pattern's name
  int threads = 0;                    // patterns only
  std::vector<SimulatedLaunch> launches;
  sim::AccessCounters total;          // summed over launches
  double estimatedMs = 0;             // summed per-launch estimates
  std::map<std::string, sim::AccessCounters> byPhase;
  std::map<std::string, double> estimatedMsByPhase;
  // Per phase, the estimated ms of its launches by the term that binds each one.
  std::map<std::string, std::map<std::string, double>> boundMsByPhase;
  sim::AccessCounters layout;         // launches of kind transform or conversion
  double layoutEstimatedMs = 0;

  void add(SimulatedLaunch l);
};

// Every profile's runs, filled one Oclgrind execution at a time; an execution serves a group
// of profiles (indices into `models`) whose work is identical.
struct ProfileRuns {
  std::vector<sim::MemoryModel> models;         // one per profile
  std::vector<std::vector<SimulatedRun>> runs;  // per profile
  int64_t workItems = 0, instructions = 0;      // what Oclgrind executed, once per execution

  // Starts run `name` (threads: patterns) for each profile of `group`; returns their models,
  // for the plugin of the next OpenCL context.
  std::vector<sim::MemoryModel> begin(const std::vector<size_t>& group, const std::string& name, int threads = 0);
  // One launch of the execution: `counters` holds one entry per profile of `group`.
  void add(const std::vector<size_t>& group, SimulatedLaunch l, const std::vector<sim::AccessCounters>& counters);
};

// One `results` entry: the keys first, then every counter.
nlohmann::json resultJson(const SimulatedRun& r, bool withLaunches);
void printRuns(const std::string& title, const std::vector<SimulatedRun>& runs);
// Bars of accesses, L1 misses, L2 misses, DRAM bytes and estimated time per strategy, each
// divided by the `base` strategy's (Figure 15 normalises to fblayout).
std::string figure15Svg(const std::string& title, const std::vector<SimulatedRun>& runs, const std::string& base);

}  // namespace fbl::bench
