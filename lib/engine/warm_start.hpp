// Warm starts from what other runs left (docs/world-model.md, "Warm
// start"): the recorded evaluation of a kernel to continue from, another
// run's world model with its kernels, and the decision, made once when a
// run starts, of which recorded evaluations stand for a measurement here.
// Everything read here may come from someone else's run folder or from
// K-Search's artifacts: it is checked before it is used.
#pragma once

#include <filesystem>
#include <string>

#include "ksearch/evaluator.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/task.hpp"

namespace ks::engine {

// The task's identity as a run folder's manifest records it.
std::string task_fingerprint(const TaskSpec& spec);

// --continue-from-world-model FILE|RUN|auto, read and normalised: a run
// folder (its latest snapshot and the kernels attached in it, with their
// recorded evaluations), a snapshot of one (world_model/vNNNNNN.json: that
// version, the same), a libksearch snapshot elsewhere (the tree alone),
// or K-Search's world_model.json (normalised, the kernels' code taken from
// the solution_db.jsonl beside it and parsed as `language` answers).
// `auto`: the latest run folder of this task (the same name and
// fingerprint) with a world model, in `runs_dir`. Throws ks::Error naming
// the source and the problem.
WorldModelImport load_world_model_import(const std::string& source, const TaskSpec& spec, Language language,
                                         const std::string& fingerprint, const std::filesystem::path& runs_dir);

// Decides, for a new run on `device` of the task with `fingerprint`, which
// recorded evaluations of `config` are adopted (RecordedEvaluation::adopted
// and why): those of a passing result of that very kernel, recorded by a run
// of the same task on the same device, unless config.remeasure.
void decide_recorded_evaluations(SearchConfig& config, const std::string& fingerprint, const DeviceInfo& device);

// A resumed or replayed run's recorded decisions against its own manifest:
// an adopted evaluation must name the manifest's task and device. Throws
// ks::Error(invalid_argument) naming the record that does not.
void check_recorded_decisions(const SearchConfig& config, const Json& manifest, const std::filesystem::path& dir);

}  // namespace ks::engine
