// Scoring against a task's baseline (ScoreMode::vs_baseline, K-Search's
// score for FlashInfer-Bench): the mean over benchmark workloads of baseline
// latency / candidate latency. Baseline latencies come from the options'
// imported per-card table, else from evaluating the task's baseline solution
// once per device; measured ones are cached in memory and under the cache
// folder, like reference outputs, so later evaluations (and later processes)
// reuse them.
//
// Implemented as an evaluator around another: every passing result of a task
// with a baseline gets WorkloadResult::baseline_ms, EvalResult::vs_baseline
// and, under vs_baseline, its score.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "ksearch/evaluator.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace ks::eval {

// The imported latency of `workload` on `device`, if `table` has one (see
// EvalOptions::baseline_latencies for how device keys match).
std::optional<double> imported_baseline_ms(const Json& table, const std::string& device, const std::string& workload);

// The solution whose latencies a candidate in `language` is scored
// against: the task's baseline in that language, else (a dataset's baseline
// to measure here) its only one; null when there is none.
const Solution* baseline_solution_for(const TaskSpec& spec, Language language);

class BaselineScoring final : public Evaluator {
 public:
  BaselineScoring(std::unique_ptr<Evaluator> inner, std::filesystem::path cache_dir);

  EvalResult evaluate(const Task& task, const Solution& solution) override;
  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& solutions) override;
  DeviceInfo device() const override { return inner_->device(); }
  EvalOptions& options() override { return inner_->options(); }
  void cancel() override { inner_->cancel(); }

 private:
  void score(const Task& task, Language language, EvalResult& result);
  std::string entry_key(const TaskSpec& task, const Solution& baseline, const std::string& device,
                        const std::string& workload) const;
  std::filesystem::path cache_file(const TaskSpec& task) const;
  void load(const TaskSpec& task);
  void save(const TaskSpec& task);

  std::unique_ptr<Evaluator> inner_;
  std::filesystem::path dir_;
  std::mutex mu_;
  // Per task name: entry key -> latency, and whether its cache file was read.
  std::map<std::string, std::map<std::string, double>> ms_;
  std::map<std::string, bool> loaded_;
};

}  // namespace ks::eval
