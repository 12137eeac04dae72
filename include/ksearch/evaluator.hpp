// What evaluation is asked to do and where it happens. The evaluator
// itself is an extension interface: ksearch/sys/evaluator.hpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"
#include "ksearch/vocabulary.hpp"

KS_NAMESPACE_BEGIN

// What an evaluator is asked to do for one batch. Defaults follow
// architecture decisions 4 and 5.
struct KS_API EvalOptions {
  bool run_tests = true;            // correctness-only workloads
  bool run_benchmarks = true;       // timed workloads
  std::vector<std::string> only_workloads;  // when non-empty, evaluate only these
  int seeds_per_workload = 2;       // input seeds checked before timing (2 to 64)
  bool recheck_after_timing = true; // fresh-input check after the timed repetitions
  double compile_timeout_s = 120;
  double run_timeout_s = 60;        // per workload: the candidate's own runs (timing caps and the
                                    // reference's work are added to the deadline)
  double min_time_per_workload_s = 0.0;
  double max_time_per_workload_s = 2.0;  // timing cap per benchmark workload
  int min_reps = 5;
  int max_reps = 1000;
  double target_rel_stderr = 1e-3;  // stop when SE(mean)/mean falls below this
  bool flush_l2 = true;
  // standard ("default"): libksearch's rules above. upstream ("upstream"):
  // GPUMode's eval.py rules, for side-by-side figures only
  // (docs/evaluation.md): no cache flush and no poisoning between calls, one
  // untimed call before timing, then 3 to 100 calls, stopping once
  // SE(mean)/mean < target_rel_stderr or the calls sum past
  // max_time_per_workload_s (upstream: 10 s) or 120 s of wall time pass.
  TimingMode timing = TimingMode::standard;
  bool time_reference = true;       // also time the task's reference
  // Time the reference beside the candidate in every evaluation, their calls
  // alternating under one load (docs/evaluation.md, "Timing"); false: time it
  // alone once per task, workload and device identity and cache it, as
  // before issue 43 (cheaper on a GPU, where a paired TriMul evaluation takes
  // about 20 % longer; the speedup then compares numbers from two moments).
  bool pair_reference = true;
  std::vector<std::string> extra_compile_flags;
  // Baseline latencies imported per card, for tasks scored vs_baseline:
  // {"<device>": {"<workload>": ms, ...}, ...}. A device key matches a device
  // name written the same, or its start with spaces as underscores
  // ("NVIDIA_H100" matches "NVIDIA H100 80GB HBM3"). Workloads not listed
  // for the device are measured with the task's baseline solution.
  Json baseline_latencies;

  Json to_json() const;
  // Fields absent from `j` keep their defaults; a field of the wrong type is an error.
  static EvalOptions from_json(const Json& j);
};

// Facts about where evaluation happens, for the manifest and for prompts.
struct KS_API DeviceInfo {
  std::string backend;   // "cuda" or "host"
  std::string name;      // "NVIDIA H100 80GB HBM3" or the CPU model
  std::string arch;      // "sm_90a", "x86-64"
  int count = 0;         // devices (GPUs) used in parallel
  double peak_flops = 0; // per second, highest precision-independent peak (for the speed-of-light bound)
  double peak_bytes_per_s = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t memory_bytes = 0;
  // For prompts (a model writes for the machine it is told about). Empty or
  // 0 when unknown; a manifest written before they existed reads so.
  int compute_units = 0;  // GPU: streaming multiprocessors; CPU: hardware threads
  double clock_ghz = 0;   // the highest clock known
  std::string features;   // CPU: vector and matrix extensions ("AVX2 FMA AVX-512F"); GPU: empty
  std::string caches;     // "L1d 48 KiB, L2 2 MiB, L3 105 MiB" (CPU: what one core sees); GPU: "L2 50 MiB"
  std::string timing;     // what one timed call's window includes on this backend
  Json to_json() const;
  static DeviceInfo from_json(const Json& j);  // missing fields keep their defaults
  // The device in a few lines for a prompt: name and architecture, compute
  // units, clock, features, caches, memory, and how a call is timed.
  std::string describe() const;
};

// The extension interface evaluators implement: ksearch/sys/evaluator.hpp.
class Evaluator;

KS_NAMESPACE_END
