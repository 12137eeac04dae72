// The evaluation flow, written once against Device and Program and run inside
// a worker (or in-process for trusted kernels). Per workload, in order:
//
//   allocate the task's tensors; for each checked input seed: generate the
//   inputs, fetch or compute the reference outputs, poison outputs and
//   scratch, run, check inputs are unchanged, compare; then, for benchmark
//   workloads: time the reference (when asked), warm up and time the
//   candidate with a cache flush before each repetition, re-check on a fresh
//   seed, and apply the speed-of-light bound.
//
// The first failing workload ends the evaluation. See docs/evaluation.md.
#pragma once

#include <string>

#include "eval/backend.hpp"
#include "eval/messages.hpp"
#include "eval/phases.hpp"
#include "eval/reference_store.hpp"
#include "ksearch/error.hpp"
#include "ksearch/task.hpp"

namespace ks::eval {

// A step within a workload. The parent uses it for deadlines (timing gets
// its caps on top of run_timeout_s; the reference's steps do not count
// against the candidate) and to say where a worker was when it had to be
// killed or died.
struct FlowPhase {
  std::string name;      // "checks", "reference", "timing", "timed-check", "re-check"
  std::string detail;    // how far, in words: "running the kernel on input seed 1 of 2"
  double extra_s = 0;    // how much longer than run_timeout_s this step may take
  bool reference = false;  // the task's reference runs, not the candidate

  Json to_json() const;
  static FlowPhase from_json(const Json& j);
};

// How much time one timing (warm-up and timed repetitions) may take beyond
// the candidate's own run time limit: its wall-time cap plus the warm-up.
double timing_allowance_s(const EvalOptions& options);

// Progress of one evaluation, reported as it happens so the parent keeps
// every finished result even if the worker dies on the next workload.
class FlowEvents {
 public:
  virtual ~FlowEvents() = default;
  virtual void workload_started(const std::string& workload) = 0;
  virtual void phase(const std::string& workload, const FlowPhase& phase) {
    (void)workload;
    (void)phase;
  }
  virtual void reference_timed(const std::string& workload, const TimingStats& timing) = 0;
  virtual void workload_finished(const WorkloadResult& result) = 0;
};

class EvaluationFlow {
 public:
  EvaluationFlow(Device& device, ReferenceStore& references);

  // Never throws for a bad candidate (its failures are the result's status).
  // Throws ks::Error for a malformed request or task (unknown workload, no
  // build for a workload) and for a fault of the task's reference (it does
  // not load, bind, run or time, or it changes its inputs): those are not
  // the candidate's to answer for.
  EvalResult run(const TaskSpec& task, const RunRequest& request, FlowEvents& events);

  // True once a candidate crashed the device, left it unusable (a sticky
  // CUDA error) or wrote out of bounds: the worker should be replaced before
  // the next candidate. Other device errors keep it and its cached data.
  bool device_suspect() const { return device_suspect_; }

  // Where the last run's time went: load, setup, inputs, reference,
  // reference_timing, checks, timing, recheck and transfers (the device's
  // copies and handovers); wall_s is the whole run. Empty before a run and
  // after one that threw.
  const PhaseTimes& phases() const { return phases_; }

 private:
  void note_device_error(const Failure& failure);
  static Error reference_fault(const TaskSpec& task, const std::string& workload, const std::string& step,
                               const std::string& what);

  Device& device_;
  ReferenceStore& refs_;
  DeviceInfo info_;
  bool device_suspect_ = false;
  PhaseTimes phases_;
};

// The key of a reference output in the ReferenceStore (memory and files):
// the input generator's source and conversion rules, the task's tensors,
// the workload (and the content of inputs it gives as data), the seed, the
// reference's code, parameter values and compile flags, and the device.
// `data_digest` covers the content of inputs the workload gives as data.
std::string reference_cache_key(const TaskSpec& task, const WorkloadSpec& workload, std::uint64_t seed,
                                const PreparedSolution& reference, const PreparedSolution::Build& build,
                                const DeviceInfo& device, std::string_view data_digest = {});

// The speed-of-light time of one call in milliseconds: the larger of
// flops / peak_flops and bytes / peak_bytes_per_s (the bytes term only when
// caches are flushed between repetitions); 0 when nothing is known.
double speed_of_light_ms(const TaskSpec& task, const WorkloadSpec& workload, const DeviceInfo& device,
                         bool caches_flushed, std::string* explanation = nullptr);

}  // namespace ks::eval
