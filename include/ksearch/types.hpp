// Core value types shared by every component: solutions, evaluation results,
// tensors and workloads. All of them convert to and from JSON, which is how
// they are stored in a run folder and sent to worker processes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"

namespace ks {

// ---------------------------------------------------------------------------
// Languages and element types

// The kind of code a candidate is written in. `cuda`: device code compiled by
// NVRTC plus a launch plan. `cpp`: host C++ compiled by the system compiler
// into a shared object (the host backend, for CPU kernels and CPU-only machines).
enum class Language { cuda, cpp };

KS_API const char* to_string(Language lang);
KS_API std::optional<Language> language_from_string(std::string_view s);

enum class DType { f32, f64, f16, bf16, i32, i64, u8 };

KS_API const char* to_string(DType t);
KS_API std::optional<DType> dtype_from_string(std::string_view s);
KS_API std::size_t dtype_size(DType t);
// The C type a kernel sees for this dtype ("float", "__nv_bfloat16", "int64_t", ...).
KS_API const char* dtype_c_type(DType t, Language lang);

// ---------------------------------------------------------------------------
// Tensors, workloads and tolerance: what a task asks for

// How a tensor's values are drawn. Parameters are expressions over the
// workload's dimensions (e.g. "1/sqrt(H)"), evaluated in double precision.
struct KS_API Distribution {
  enum class Kind { normal, uniform, cauchy, int_range, constant };
  Kind kind = Kind::normal;
  // normal: (mean, stddev); uniform: [lo, hi); cauchy: (location, scale);
  // int_range: integers in [lo, hi] inclusive; constant: (value, unused).
  std::string p0 = "0";
  std::string p1 = "1";

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

  Json to_json() const;
  static TensorSpec from_json(const Json& j);
};

struct KS_API WorkloadSpec {
  std::string name;
  std::map<std::string, std::int64_t> dims;      // dimension values
  std::uint64_t seed = 0;                        // base input seed; further seeds derive from it
  std::map<std::string, Distribution> dist_overrides;  // per-tensor generator overrides
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
  Json launch_plan;       // see docs/launch-plan.md
  Json params;            // tunable parameter declarations, null when none
  std::string description;

  // SHA-256 over language, sources, launch plan and params; name, parent and
  // description are excluded so the same code always has the same id.
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

struct KS_API TimingStats {
  double mean_ms = 0;
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double stddev_ms = 0;
  double rel_stderr = 0;  // standard error of the mean over the mean
  int count = 0;

  Json to_json() const;
  static TimingStats from_json(const Json& j);
};

struct KS_API WorkloadResult {
  std::string name;
  bool benchmark = false;
  EvalStatus status = EvalStatus::passed;
  TimingStats timing;             // empty for correctness-only workloads
  double reference_ms = 0;        // mean latency of the task's reference, 0 when not timed
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
  // Geometric mean over benchmark workloads of the mean latency; 0 unless passed.
  double latency_ms = 0;
  double reference_latency_ms = 0;  // the same for the task's reference, when known
  double speedup = 0;               // reference_latency_ms / latency_ms, when both known
  double score = 0;                 // higher is better: 1 / latency_ms; 0 unless passed
  std::string log;                  // compiler log, error detail or crash report (excerpt)
  Json metrics = Json::object();    // compile_s, run_s, cache hits, ... (free-form numbers)
  std::string device;               // where it ran, e.g. "NVIDIA H100 80GB HBM3 (sm_90)"

  bool passed() const { return status == EvalStatus::passed; }
  // Fills latency_ms, speedup and score from the per-workload results.
  void compute_summary();
  // Short human summary: "passed 1.234 ms (3.10x vs reference)".
  std::string summary() const;
  // Why it failed, in one line of at most 160 bytes: the first failing
  // workload's message or the first line of the log; "" when it passed.
  std::string failure_reason() const;

  Json to_json() const;
  static EvalResult from_json(const Json& j);
};

}  // namespace ks
