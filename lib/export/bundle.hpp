// The data every export carries (docs/export.md): a solution's cubins, built
// by the evaluator's own compile path, plus what is needed to launch them
// outside libksearch - the launch plan, the task's tensors and dimensions,
// which build each workload used, and the NVRTC version and options, so a
// GPU of another architecture can rebuild the same program.
#pragma once

#include <string>
#include <vector>

#include "ksearch/json.hpp"
#include "ksearch/task.hpp"

namespace ks::exporter {

struct BundleOptions {
  std::string arch = "sm_90a";         // NVRTC target of the cubins
  std::string cache_root;              // the evaluator's cache folder (its cuda/ subfolder holds cubins); "" = default
  std::vector<std::string> flags;      // the evaluation's extra compile flags
  double compile_timeout_s = 300;
};

// The manifest of an export ("format": "ksearch-export"), cubins included
// (base64). Compiles each distinct set of tunable-parameter values the
// task's workloads use, and the solution's default set, exactly as the
// evaluator does (prepare_solution, CudaCompiler, the same cache): a cubin
// already built by an evaluation with the same cache comes from it.
// `notes` receives one line per build saying where its cubin came from.
// Throws ks::Error: invalid_argument for a solution that cannot be exported
// (not CUDA, no plan), compile when it does not compile.
Json make_bundle(const TaskSpec& task, const Solution& solution, const BundleOptions& options,
                 std::vector<std::string>* notes = nullptr);

// The manifest without the bytes of its cubins and programs: what a report
// or a test reads.
Json bundle_summary(const Json& bundle);

// A Python string literal holding `text` (a raw triple-quoted string; the
// JSON writer's text never holds a single quote once they are escaped as
// \u0027, which json_for_python does).
std::string json_for_python(const Json& j);

}  // namespace ks::exporter
