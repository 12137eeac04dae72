// Creating evaluators: isolated worker processes (the default) or in-process
// execution for trusted kernels, on CUDA GPUs or the host CPU.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/evaluator.hpp"
#include "ksearch/export.h"
#include "ksearch/task.hpp"
#include "ksearch/vocabulary.hpp"

KS_NAMESPACE_BEGIN

struct KS_API EvaluatorConfig {
  // automatic ("auto"): CUDA solutions on the GPU and host solutions on the
  // CPU; cuda or host: only that backend (the other language is refused).
  EvalBackend backend = EvalBackend::automatic;
  std::vector<int> devices;            // GPU ordinals to use in parallel; empty = all visible
  bool in_process = false;             // run kernels in this process (trusted code only)
  std::filesystem::path cache_dir;     // compiled artifacts and reference outputs; empty = default
  std::filesystem::path worker_path;   // ksearch-worker executable; empty = found next to the library
  int compile_workers = 0;             // parallel compilations; 0 = min(hardware threads, 8)
  std::string cuda_arch;               // e.g. "sm_90a"; empty = the device's own
  // Confinement of candidates and their compilers (docs/security.md):
  // automatic ("auto": bubblewrap where it works, one warning where it does
  // not), required ("on": refuse to evaluate without it) or off ("off").
  SandboxMode sandbox = SandboxMode::automatic;
  // Address-space limit (RLIMIT_AS) of the host run worker, where host
  // candidates run: one that reaches it ends as `memory_limit`. 0 = half of
  // the machine's RAM.
  std::uint64_t memory_limit_bytes = 0;
  EvalOptions options;
};

// Throws ks::Error(Status::no_device) when backend is EvalBackend::cuda and
// no usable driver or GPU is present.
KS_API std::unique_ptr<Evaluator> make_evaluator(const EvaluatorConfig& config);

// An evaluator served by this user's evaluation server for `config` (its
// options travel with each request), started in the background when none
// runs: fresh processes that each evaluate a few candidates (an agent calling
// `ksearch eval --server`) share its workers, compiled references, reference
// outputs kept in GPU memory and measured latencies. The server exits after
// `idle_timeout_s` without a request, ending its workers. In-process
// configurations cannot be served. docs/evaluation.md, "The evaluation server".
KS_API std::unique_ptr<Evaluator> make_served_evaluator(const EvaluatorConfig& config, double idle_timeout_s = 600);

// Asks the evaluation server for `config` to exit and waits until it has
// ended its workers. False when none was running.
KS_API bool stop_evaluation_server(const EvaluatorConfig& config);

// Whether a CUDA driver and at least one GPU are usable here, and if not, why.
KS_API bool cuda_available(std::string* why = nullptr);

// Whether candidates in `language` are evaluated on the GPU under `backend`:
// cuda and triton always, cpp never, python with the cuda backend, or with
// auto where CUDA is usable. Throws Error(invalid_argument), naming the fix,
// for a language the backend cannot evaluate (cuda or triton with host, cpp
// with cuda). The one place this rule is decided.
KS_API bool evaluates_on_gpu(Language language, EvalBackend backend);

// The sandbox for candidates on this machine: "bubblewrap 0.8.0 (active)" or
// "unavailable: <why>" (probed once per process).
KS_API std::string sandbox_description();

// The Python that triton and python candidates run under ($KSEARCH_PYTHON,
// else python3) and what it has: "Python 3.12.3 (/usr/bin/python3), PyTorch
// 2.11.0 (CUDA 13.0, GPU usable), Triton 3.6.0", or "unavailable: <why>"
// (asked once per process).
KS_API std::string python_description();

// Where each timed workload's baseline latency comes from when `task` is
// scored against a baseline on `device` (a name as EvalResult::device gives
// it) for candidates in `language`: {"device", "workloads": {"<workload>":
// {"source": "imported" (EvalOptions::baseline_latencies), "traces"
// (TaskSpec::baseline_latencies: "hardware", "solution", "trace" FILE:LINE,
// "ms"), "measured" (the task's baseline solution, measured on this device:
// "solution", "origin" "dataset" or "task") or "none"}}, "counts": {source:
// n}, "origin": TaskSpec::baseline_origin}. Null for a task scored on latency.
KS_API Json baseline_sources(const TaskSpec& task, const EvalOptions& options, const std::string& device,
                             Language language);

// Throws ks::Error(Status::invalid_argument) when a timed workload among
// `workloads` (empty: all) of a task whose baseline latencies come from
// traces has none on `device` and none can be measured: the message names
// the card, the cards the traces cover, the workloads, and the ways out
// (measuring the dataset's baseline solution here when libksearch can run
// it, a table of latencies, or libksearch's own baseline kernel).
KS_API void check_baseline_coverage(const TaskSpec& task, const EvalOptions& options, const std::string& device,
                                    Language language, const std::vector<std::string>& workloads = {});

// The host memory limit that memory_limit_bytes = 0 stands for: half of the
// machine's RAM.
KS_API std::uint64_t default_memory_limit_bytes();

KS_NAMESPACE_END
