// Exporting a solution for another harness (docs/export.md): a GPUMode
// submission, a KernelBench ModelNew, a FlashInfer-Bench Solution, or the
// bare manifest. Every format runs exactly the binary libksearch evaluated:
// the cubin that the evaluator's NVRTC build produced (from its cache, or
// rebuilt with the same compiler, options and parameter values), embedded
// with a small Python runtime that loads it through the CUDA driver and
// launches the launch plan on PyTorch's current stream.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"
#include "ksearch/task.hpp"
#include "ksearch/vocabulary.hpp"

KS_NAMESPACE_BEGIN

struct KS_API ExportOptions {
  // gpumode (submission.py with custom_kernel(data); gpumode/trimul),
  // kernelbench (a ModelNew module), flashinfer (a Solution JSON whose
  // python entry point runs in destination-passing style) or bundle (the
  // manifest JSON itself: cubins, plan, tensors, NVRTC version and options).
  ExportFormat format = ExportFormat::bundle;
  std::string arch = "sm_90a";             // NVRTC target of the embedded cubins
  std::filesystem::path cache_dir;         // the evaluator's cache (EvaluatorConfig::cache_dir); empty = default
  std::vector<std::string> extra_compile_flags;  // EvalOptions::extra_compile_flags of the evaluation
  double compile_timeout_s = 300;
  // kernelbench: the problem file's source. Its Model is built inside
  // ModelNew for the module's parameters (as KernelBench builds the
  // reference, right after set_seed(42)). Empty: an oracle task's own
  // problem file, else the Model of the namespace ModelNew runs in.
  std::string problem_source;
  // flashinfer: the Solution's name (empty: derived), author and target hardware (empty: from arch).
  std::string name;
  std::string author = "libksearch";
  std::vector<std::string> target_hardware;
  // Recorded in the manifest when given: what libksearch measured for this
  // solution (an EvalResult's JSON, e.g. from a run folder's best.json).
  Json evaluated;
};

struct KS_API ExportResult {
  std::string content;            // the file to write
  std::string default_file_name;  // submission.py, model_new.py, <name>.json, bundle.json
  Json manifest;                  // what the file embeds, without the cubins' bytes
  std::vector<std::string> notes; // one line each: where every cubin came from, caveats
};

// Throws ks::Error: invalid_argument for an unknown format, a task the
// format cannot express or a solution that cannot be exported; compile when
// the solution does not compile; no_device when NVRTC cannot be loaded.
KS_API ExportResult export_solution(const Task& task, const Solution& solution, const ExportOptions& options);

KS_API std::vector<std::string> export_formats();

// The Python runtime every export embeds (lib/export/runtime/ksearch_runtime.py).
KS_API std::string export_runtime_source();

KS_NAMESPACE_END
