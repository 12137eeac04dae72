// Core value types shared by every component: solutions, evaluation results,
// tensors and workloads. All of them convert to and from JSON, which is how
// they are stored in a run folder and sent to worker processes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"
#include "ksearch/launch_plan.hpp"
#include "ksearch/params.hpp"

KS_NAMESPACE_BEGIN

// ---------------------------------------------------------------------------
// Languages and element types

// The kind of code a candidate is written in. `cuda`: device code compiled by
// NVRTC plus a launch plan. `cpp`: host C++ compiled by the system compiler
// into a shared object (the host backend, for CPU kernels and CPU-only machines).
// `triton` and `python`: a Python module run by a Python candidate process
// (docs/python-candidates.md): Triton kernels on the GPU, or PyTorch
// operations on the GPU or, with the host backend, on the CPU. Values are
// the C ABI's (ks_language): new ones are appended.
enum class Language { cuda, cpp, triton, python };

// Whether candidates in `lang` are Python modules.
inline bool language_is_python(Language lang) { return lang == Language::triton || lang == Language::python; }

KS_API const char* to_string(Language lang);
KS_API std::optional<Language> language_from_string(std::string_view s);

// f8e4m3: OCP float8 E4M3FN (no infinity; max 448); f8e5m2: OCP float8 E5M2
// (IEEE-like, max finite 57344); boolean: one byte, 0 or 1 ("bool" in JSON).
enum class DType { f32, f64, f16, bf16, i32, i64, u8, f8e4m3, f8e5m2, i8, i16, boolean };

KS_API const char* to_string(DType t);
// Accepts libksearch's names and FlashInfer's / PyTorch's (float8_e4m3fn, bfloat16, int8, ...).
KS_API std::optional<DType> dtype_from_string(std::string_view s);
KS_API bool dtype_is_float(DType t);
KS_API std::size_t dtype_size(DType t);
// The C type a kernel sees for this dtype ("float", "__nv_bfloat16", "int64_t", ...).
KS_API const char* dtype_c_type(DType t, Language lang);

// ---------------------------------------------------------------------------
// Tensors, workloads and tolerance: what a task asks for

// How a tensor's values are drawn. Parameters are expressions over the
// workload's dimensions (e.g. "1/sqrt(H)"), evaluated in double precision.
struct KS_API Distribution {
  enum class Kind { normal, uniform, cauchy, int_range, constant, clamped_normal, indptr, permutation };
  Kind kind = Kind::normal;
  // normal: (mean, stddev); uniform: [lo, hi); cauchy: (location, scale);
  // int_range: integers in [lo, hi] inclusive; constant: (value, unused);
  // clamped_normal: a standard normal clamped to [lo, hi] (FlashInfer-Bench's
  //   rule for fp8 inputs: randn clamped to [-2, 2]).
  // Structured kinds fill the whole tensor at once, not element by element:
  // indptr: (total, min_length): offsets 0 = a[0] <= a[1] <= ... <= a[n-1] = total
  //   of n-1 segments (requests) of at least min_length each, lengths drawn at random;
  // permutation: (range, unused): distinct values from [0, range) in a random
  //   order (a page table), never the identity when two or more are drawn.
  std::string p0 = "0";
  std::string p1 = "1";

  // Whether the kind fills the whole tensor at once (indptr, permutation).
  bool structured() const { return kind == Kind::indptr || kind == Kind::permutation; }

  Json to_json() const;
  static Distribution from_json(const Json& j);  // throws ks::Error naming the bad field
};

KS_API const char* to_string(Distribution::Kind k);

struct KS_API TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::string> shape;  // expressions over dimensions, e.g. {"B", "N", "N", "C"}
  Distribution dist;               // ignored for outputs
  bool is_output = false;
  // A scalar input (FlashInfer-Bench's `shape: null`, e.g. sm_scale): no
  // buffer; one value per workload, drawn from `dist` (a workload sets it
  // with a constant distribution), passed to kernels by value under its
  // name and readable in plan expressions. JSON: "shape": null.
  bool scalar = false;

  Json to_json() const;
  static TensorSpec from_json(const Json& j);
};

// An input a workload supplies instead of generating it: inline values, or a
// tensor of a .safetensors file (dtype and shape must be the tensor's).
struct KS_API InputData {
  std::vector<double> values;  // row-major; integers exact up to 2^53
  std::string file;            // a .safetensors file: absolute, or relative to the task's folder
  std::string key;             // the tensor's name in that file

  bool from_file() const { return !file.empty(); }
  Json to_json() const;
  static InputData from_json(const Json& j);  // throws ks::Error naming the bad field
};

struct KS_API WorkloadSpec {
  std::string name;
  std::map<std::string, std::int64_t> dims;      // dimension values
  std::uint64_t seed = 0;                        // base input seed; further seeds derive from it
  std::map<std::string, Distribution> dist_overrides;  // per-tensor generator overrides
  std::map<std::string, InputData> data;         // inputs given as data (the same for every seed)
  bool benchmark = false;                        // timed and scored (else a correctness test)

  Json to_json() const;
  static WorkloadSpec from_json(const Json& j);
};

struct KS_API Tolerance {
  double atol = 1e-3;
  double rtol = 1e-3;
  // When a finite element matches its reference. The suites differ:
  //   ref_relative: |out - ref| <= atol + rtol * |ref|   (GPUMode, numpy.isclose)
  //   out_relative: |out - ref| <= atol + rtol * |out|   (KernelBench: torch.allclose(ref, out))
  //   abs_or_rel:   |out - ref| <= atol or |out - ref| / (|ref| + 1e-8) <= rtol
  //                 (FlashInfer-Bench: an element fails only when both errors are too large)
  enum class Rule { ref_relative, out_relative, abs_or_rel };
  Rule rule = Rule::ref_relative;
  // Fraction of elements that must match under `rule`.
  double min_matched_ratio = 1.0;
  // must_match: NaN/Inf in the output is fine only where the reference has the
  // same value; forbid: any NaN/Inf in the output fails.
  enum class NanPolicy { must_match, forbid };
  NanPolicy nan_policy = NanPolicy::must_match;

  Json to_json() const;
  static Tolerance from_json(const Json& j);
};

KS_API const char* to_string(Tolerance::Rule r);

// How a passing result is scored (higher is better).
//   latency:     1 / (geometric-mean latency over benchmark workloads)
//   vs_baseline: the arithmetic mean over benchmark workloads of
//                baseline latency / candidate latency (K-Search's score for
//                FlashInfer-Bench); 1 / latency while baseline latencies are unknown.
enum class ScoreMode { latency, vs_baseline };
KS_API const char* to_string(ScoreMode m);
KS_API std::optional<ScoreMode> score_mode_from_string(std::string_view s);

// ---------------------------------------------------------------------------
// Solutions

struct KS_API SourceFile {
  std::string path;     // e.g. "kernel.cu"
  std::string content;
};

// A candidate kernel: sources plus, for CUDA, a launch plan (architecture
// decision 2) and, for host C++, a call plan naming the entry functions.
struct KS_API Solution {
  std::string id;         // content hash (see compute_id); filled by finalize()
  std::string parent_id;  // the solution this one was derived from, if any
  std::string name;       // human label, e.g. "r12-improve"
  std::string task;
  Language language = Language::cuda;
  std::vector<SourceFile> sources;
  LaunchPlan launch_plan; // see docs/launch-plan.md; empty() when none
  Params params;          // tunable parameters (docs/tuning.md); empty() when none
  std::string description;
  // Python languages only: where the suite calls the solution when the
  // solution says so itself, as a FlashInfer-Bench Solution does with
  // spec.entry_point ("main.py::run") and destination_passing_style. Empty:
  // the task's calling convention (docs/python-candidates.md).
  std::string entry_point;
  std::optional<bool> destination_passing;

  // SHA-256 over language, sources, launch plan, params and (when set) the
  // entry point; name, parent and description are excluded so the same code
  // always has the same id.
  std::string compute_id() const;
  // Sets id = compute_id() and returns *this.
  Solution& finalize();

  Json to_json() const;
  static Solution from_json(const Json& j);
};

// ---------------------------------------------------------------------------
// Evaluation results

enum class EvalStatus {
  passed,
  compile_error,
  runtime_error,
  incorrect,
  timeout,
  crashed,
  invalid,            // rejected by an anti-cheat check (e.g. faster than speed of light)
  generation_failed,  // the LLM produced no usable candidate; nothing was evaluated
  memory_limit,       // a host candidate reached the worker's memory limit (RLIMIT_AS)
};

KS_API const char* to_string(EvalStatus s);
KS_API std::optional<EvalStatus> eval_status_from_string(std::string_view s);

// Why a search stopped: SearchOutcome::stop_reason, the manifest's
// "stop_reason", ks_result_stop_reason. The one list; ks_stop_reason in
// ks_enums.h mirrors it value for value.
enum class StopReason {
  max_rounds,       // the round budget is spent
  strategy_done,    // the strategy ended by itself
  cancelled,        // asked to stop (ks_search_cancel, a callback, the CLI's first Ctrl-C or SIGTERM)
  interrupted,      // the CLI's second Ctrl-C: written to the manifest as the process ends at once
  max_cost,         // the cost budget is spent
  max_wall_time,    // the wall-time budget is spent
  llm_exhausted,    // an offline, recorded or scripted model has no answer left
  replay_diverged,  // a replay met a request its recording does not answer, and stops there
  recording_ended,  // a replay passed the end of its recording
};

KS_API const char* to_string(StopReason r);
KS_API std::optional<StopReason> stop_reason_from_string(std::string_view s);

// Which statistic of a workload's timed calls is its latency, the number
// every decision uses (best so far, a cycle's end, the speedup):
//   undisturbed_median  on the host: the median of the calls no other
//           process interrupted (no thread of the call waited on a run
//           queue), the kernel's own time whatever else the CPUs run;
//   p10     on the host when fewer than 10 calls were undisturbed, or where
//           that cannot be told: preemption only ever adds time, so the
//           fastest tenth moves least with the machine's load;
//   median  on a GPU, where calls are not preempted (FlashInfer-Bench's
//           statistic);
//   mean    under TimingMode::upstream (GPUMode's harness), and what run
//           folders written before the choice existed recorded.
enum class LatencyStatistic { mean, median, p10, undisturbed_median };

KS_API const char* to_string(LatencyStatistic s);
KS_API std::optional<LatencyStatistic> latency_statistic_from_string(std::string_view s);

struct KS_API TimingStats {
  double mean_ms = 0;
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double stddev_ms = 0;
  double rel_stderr = 0;  // standard error of the mean over the mean
  int count = 0;
  // The latency: `statistic` of the samples, and its 95% confidence
  // interval (order statistics for a percentile, mean +- 1.96 standard
  // errors for the mean). 0 in results written before they existed: read
  // as the mean, with an interval of +-1.96 standard errors.
  LatencyStatistic statistic = LatencyStatistic::mean;
  int disturbed = 0;  // calls another process interrupted (host), left out of undisturbed_median
  double latency_ms = 0;
  double ci_lo_ms = 0;
  double ci_hi_ms = 0;

  // The latency, whichever version of the format wrote it.
  double latency() const { return latency_ms > 0 ? latency_ms : mean_ms; }
  // Half the confidence interval's width over the latency (0.03 = +-3%).
  double rel_half_width() const;

  Json to_json() const;
  static TimingStats from_json(const Json& j);
};

struct KS_API WorkloadResult {
  std::string name;
  bool benchmark = false;
  EvalStatus status = EvalStatus::passed;
  TimingStats timing;             // empty for correctness-only workloads
  // The task's reference's latency (same statistic), 0 when not timed. When
  // `paired`, its calls alternated with the candidate's in this evaluation,
  // so the speedup is a ratio taken under one load; otherwise it was cached
  // from an earlier evaluation on this device (or the suite's timing asked
  // for the reference alone).
  double reference_ms = 0;
  TimingStats reference_timing;   // when paired
  bool paired = false;
  // reference_ms / the latency; 0 when unknown.
  double speedup() const;
  double baseline_ms = 0;         // the task's baseline latency on this device, 0 when unknown
  double max_abs_error = 0;
  double max_rel_error = 0;
  double matched_ratio = 1;
  std::string message;            // why it failed, in words a model can act on

  Json to_json() const;
  static WorkloadResult from_json(const Json& j);
};

struct KS_API EvalResult {
  EvalStatus status = EvalStatus::passed;
  std::string solution_id;
  std::vector<WorkloadResult> workloads;
  // Geometric mean over benchmark workloads of each one's latency
  // (TimingStats::latency()); 0 unless passed.
  double latency_ms = 0;
  // Its 95% confidence interval (the workloads' intervals combined in log
  // space, as independent); 0 when unknown.
  double latency_lo_ms = 0;
  double latency_hi_ms = 0;
  double reference_latency_ms = 0;  // the same for the task's reference, when known
  // The geometric mean of the workloads' speedup(), when every one has one
  // (reference_latency_ms / latency_ms).
  double speedup = 0;
  // Mean over benchmark workloads of baseline_ms / latency, when every
  // one has a baseline latency; 0 otherwise.
  double vs_baseline = 0;
  ScoreMode score_mode = ScoreMode::latency;
  double score = 0;                 // higher is better (see ScoreMode); 0 unless passed
  std::string log;                  // compiler log, error detail or crash report (excerpt)
  Json metrics = Json::object();    // compile_s, run_s, cache hits, ... (free-form numbers)
  std::string device;               // where it ran, e.g. "NVIDIA H100 80GB HBM3 (sm_90)"

  bool passed() const { return status == EvalStatus::passed; }
  // Fills latency_ms, speedup and score from the per-workload results.
  void compute_summary();
  // Short human summary: "passed 1.234 ms (3.10x vs reference, 1.20x vs baseline)".
  std::string summary() const;
  // Why it failed, in one line of at most 160 bytes: the first failing
  // workload's message or the first line of the log; "" when it passed.
  std::string failure_reason() const;

  Json to_json() const;
  static EvalResult from_json(const Json& j);
};

// The best passing solution of a run so far, and the round that found it.
struct KS_API BestSolution {
  Solution solution;
  EvalResult eval;
  int round = 0;
};

KS_NAMESPACE_END
