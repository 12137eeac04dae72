// Creating evaluators: isolated worker processes (the default) or in-process
// execution for trusted kernels, on CUDA GPUs or the host CPU.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/evaluator.hpp"
#include "ksearch/export.h"

namespace ks {

struct KS_API EvaluatorConfig {
  // "auto": CUDA solutions on the GPU and host solutions on the CPU;
  // "cuda" or "host": only that backend (the other language is refused).
  std::string backend = "auto";
  std::vector<int> devices;            // GPU ordinals to use in parallel; empty = all visible
  bool in_process = false;             // run kernels in this process (trusted code only)
  std::filesystem::path cache_dir;     // compiled artifacts and reference outputs; empty = default
  std::filesystem::path worker_path;   // ksearch-worker executable; empty = found next to the library
  int compile_workers = 0;             // parallel compilations; 0 = min(hardware threads, 8)
  std::string cuda_arch;               // e.g. "sm_90a"; empty = the device's own
  EvalOptions options;
};

// Throws ks::Error(Status::no_device) when backend is "cuda" and no usable
// driver or GPU is present.
KS_API std::unique_ptr<Evaluator> make_evaluator(const EvaluatorConfig& config);

// Whether a CUDA driver and at least one GPU are usable here, and if not, why.
KS_API bool cuda_available(std::string* why = nullptr);

}  // namespace ks
