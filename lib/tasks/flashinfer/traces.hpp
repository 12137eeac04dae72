// Baselines from a FlashInfer-Trace dataset's traces (docs/tasks/flashinfer.md,
// "Baselines from traces"), as K-Search takes them: per workload and card,
// the minimum latency of the PASSED traces of the baseline solution
// (FlashInfer's own kernel, flashinfer_wrapper_*). The card is matched when
// evaluating (TaskSpec::baseline_latencies keeps every card the traces have).
#pragma once

#include <filesystem>
#include <string>

#include "ksearch/task.hpp"
#include "tasks/flashinfer/dataset.hpp"

namespace ks::tasks::flashinfer {

// Sets spec.baseline_latencies, spec.baseline_origin and the vs_baseline
// score from DIR/traces for `definition`, per `options`; with
// options.measure_baseline the solution from DIR/solutions becomes the
// task's baseline, measured where the traces lack a card or a workload.
// Without traces of the named (or default) solution the spec is left as it
// is when no solution was named; a named one without traces is an error
// listing the solutions that have some.
void apply_trace_baselines(TaskSpec& spec, const std::filesystem::path& root, const std::string& definition,
                           const DatasetOptions& options);

}  // namespace ks::tasks::flashinfer
