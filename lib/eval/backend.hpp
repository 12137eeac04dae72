// The seam between the backend-independent evaluation flow and the two
// backends (cuda/, host/). The flow (generate inputs, compute or fetch the
// reference, poison outputs, run, compare, time, re-check) is written once
// against these interfaces and runs inside a worker process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/rng/rng_stream.hpp"
#include "ksearch/evaluator.hpp"
#include "ksearch/types.hpp"
#include "util/expr.hpp"

namespace ks::eval {

// A block of memory on the evaluation device: a CUdeviceptr for CUDA, a host
// pointer for the host backend. Owned by the Device that allocated it.
struct Buffer {
  std::uint64_t addr = 0;
  std::size_t bytes = 0;
  void* host_ptr() const { return reinterpret_cast<void*>(addr); }
  explicit operator bool() const { return addr != 0; }
};

// A tensor held by another process (a reference oracle, docs/evaluation.md
// "Reference oracles"): `bytes` at `offset` of a CUDA IPC allocation
// (`handle`, 64 bytes in hex), or of a file (`path`).
struct ExternalTensor {
  std::string handover;  // "cuda_ipc" or "file"
  std::string handle;
  std::string path;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;

  Json to_json() const;
  static ExternalTensor from_json(const Json& j);
};

// The outcome of comparing an output with its reference element by element:
// |out - ref| <= atol + rtol * |ref|, with the NaN/Inf policy of Tolerance.
struct CompareStats {
  std::uint64_t count = 0;
  std::uint64_t mismatches = 0;       // elements outside tolerance (NaN/Inf rule included)
  // NaN or infinity in the output that the policy does not accept (under
  // forbid: any; under must_match: not the reference's same value). These
  // fail the output whatever min_matched_ratio allows.
  std::uint64_t nonfinite_outputs = 0;
  // A finite output where the reference is NaN or infinite: a mismatch that
  // counts against min_matched_ratio like any other.
  std::uint64_t nonfinite_reference = 0;
  std::uint64_t poisoned = 0;         // elements still holding the poison pattern (never written)
  double max_abs_error = 0;           // over finite pairs
  double max_rel_error = 0;
  std::int64_t first_bad_index = -1;
  double first_bad_out = 0, first_bad_ref = 0;
  double matched_ratio() const { return count ? double(count - mismatches) / double(count) : 1.0; }
};

// A candidate's failure, with the words for the model. Every way a compile,
// a load, a run or a check of a candidate can fail reaches the evaluator as
// one of these (FailureError below carries it out of a Device, Program or
// Compiler), and record() is the one way it becomes a status in a result.
// (The worker may also simply die; the parent describes that as one too.)
struct Failure {
  EvalStatus status = EvalStatus::runtime_error;
  std::string message;  // e.g. "CUDA_ERROR_ILLEGAL_ADDRESS after kernel `foo`"
  bool out_of_memory = false;  // an allocation failed: memory the evaluator holds may be released and retried
  // The device's memory may have been written where it should not (an
  // out-of-bounds write was seen): cached data on it is no longer trusted.
  bool memory_corrupted = false;
  bool unwritten = false;  // a check found outputs still holding the poison pattern
  std::string log;         // a compile failure's full compiler output
  // It ended only a process of the candidate's own (a host candidate's
  // process, eval/host/candidate_process.hpp): the device and the data the
  // worker holds are untouched, so the worker carries on.
  bool contained = false;

  // The failure of one workload: its status and message.
  void record(WorkloadResult& w) const;
  // The failure of a whole evaluation: its status, and a log of the message
  // followed by the compiler output, when that says more.
  void record(EvalResult& r) const;
};

// The one exception that carries a Failure.
class FailureError : public std::runtime_error {
 public:
  explicit FailureError(Failure f) : std::runtime_error(f.message), failure_(std::move(f)) {}
  const Failure& failure() const { return failure_; }

 private:
  Failure failure_;
};

// Raised by Device and Program methods.
class RunError : public FailureError {
 public:
  using FailureError::FailureError;
};

// What a compile step produced, ready for a run worker to load.
struct Artifact {
  Language language = Language::cuda;
  std::string path;                    // cubin file or shared object on disk (content-addressed cache)
  std::vector<std::string> kernels;    // CUDA: entry names found in the module; host: exported symbols
  std::map<std::string, std::string> lowered_names;  // CUDA name expressions -> mangled names
  std::string log;                     // compiler output (warnings, resource usage)
  double compile_s = 0;
  bool cache_hit = false;
  // CUDA: how NVRTC used precompiled headers: "used" (read one), "created"
  // (wrote one), "" (neither, or a cache hit: no NVRTC run).
  std::string pch;
  // Python: loading it builds a C++/CUDA extension (an imported FlashInfer-Bench
  // cpp or cuda Solution), which may take up to compile_timeout_s beyond
  // run_timeout_s and runs compilers (fork and exec).
  bool builds_at_load = false;
};

// What to compile. Tunable parameter values become -D macros and plan variables.
struct CompileRequest {
  Solution solution;
  std::string arch;                           // "sm_90a", or "" for the host
  std::vector<std::string> flags;             // extra user flags
  std::map<std::string, std::int64_t> params; // chosen tunable parameter values
  std::string cache_dir;                      // content-addressed artifact cache
  // The task's tensors in kernel-argument order: the host backend types its
  // call shims from them (const T* for inputs, T* for outputs).
  std::vector<TensorSpec> tensors;
  double timeout_s = 0;                       // compiler time limit; 0 = none
  // Python candidates: how the task calls them (TaskSpec::python), null for
  // the default `run(...)`.
  Json python_entry;
};

// A candidate that does not compile (status compile_error); `log` holds the
// full compiler output.
class CompileError : public FailureError {
 public:
  CompileError(const std::string& what, std::string log)
      : FailureError(Failure{.status = EvalStatus::compile_error, .message = what, .log = std::move(log)}) {}
  const std::string& log() const { return failure().log; }
};

// Compiles in the calling process (a compile worker or a test). Repeated
// requests with the same content hit the on-disk cache.
class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual Artifact compile(const CompileRequest& request) = 0;  // throws CompileError
};

// The value of a scalar input (TensorSpec::scalar) on a workload, passed to
// kernels by value in its own type.
struct ScalarArg {
  DType dtype = DType::f32;
  double value = 0;
};
using ScalarArgs = std::map<std::string, ScalarArg>;

// Binding of a plan to one workload: tensor buffers by name plus the integer
// variables (dimensions, tunable parameter values, integer scalar inputs)
// its expressions read, and the scalar inputs (floating ones are readable in
// expressions too).
struct Bindings {
  std::map<std::string, Buffer> tensors;
  util::Vars vars;
  ScalarArgs scalars;
  std::map<std::string, DType> dtypes;  // the tensors' (GEMM steps read them)
  // The floating scalars as expression variables.
  util::RealVars reals() const {
    util::RealVars r;
    for (const auto& [name, s] : scalars)
      if (dtype_is_float(s.dtype)) r[name] = s.value;
    return r;
  }
};

// A loaded candidate. bind() validates the plan for the bound workload
// (expressions, kernel names, argument counts, limits) and allocates scratch;
// it throws RunError with an actionable message when something is wrong.
class Program {
 public:
  virtual ~Program() = default;
  virtual void bind(const Bindings& b) = 0;
  // Enqueues every launch of the plan (asynchronously on a GPU).
  virtual void launch() = 0;
  // Waits for completion and surfaces errors as RunError.
  virtual void synchronize() = 0;
  // One timed run: launch bracketed by timing events; returns milliseconds.
  // Completes (synchronizes) before returning.
  virtual double timed_launch() = 0;
  // Whether another process took a CPU from the last timed_launch() (a
  // thread of the call waited on a run queue): such a call measured the
  // machine's load, not the kernel. nullopt where it cannot be told (then
  // every call counts alike).
  virtual std::optional<bool> last_call_disturbed() const { return std::nullopt; }
  // Refills the plan's scratch buffers with the poison pattern; the flow calls
  // it before every checked run so a kernel cannot rely on leftovers.
  virtual void poison_scratch() {}

  // A program whose calls run in another process that times them itself
  // (a Python candidate on the GPU) times them in batches there: calls back
  // to back in a process that stays running, as the suites' harnesses
  // measure, instead of one request per call. Before each call of a batch
  // it does what the flow does between calls: poison the outputs (and what
  // the last call returned) when `poison`, flush the L2 cache when `flush`.
  // After a batch the outputs hold its last call's results.
  virtual bool times_in_batches() const { return false; }

  // What a program in a process of its own (a Python candidate) reports
  // for the metrics: untimed seconds that belong to building it rather than
  // to its calls (its process's start and imports; the first call of each
  // new shape, where Triton's JIT and autotuning run), timed calls that left
  // work on another stream (charged), and how its GPU buffers reached it.
  struct ProcessFacts {
    double start_s = 0;
    double first_calls_s = 0;
    double build_s = 0;  // building an extension when loaded (not in start_s)
    long stream_escapes = 0;
    std::string buffers;  // "descriptors" (CUDA VMM) or "ipc" (legacy CUDA IPC); "" elsewhere
    std::string isolation;  // the layers of its process (CandidateProcess::isolation), "" in the worker's own
  };
  virtual ProcessFacts process_facts() const { return {}; }
  // What a program in a process of its own said of its last call's result
  // when that result did not fit the outputs (a wrong shape, dtype or
  // count): its words, not a verdict. The outputs stay as the flow left
  // them (poisoned), so its check fails; the note goes beside that failure.
  virtual std::string note() const { return {}; }
  virtual std::vector<double> timed_batch(int calls, bool poison, bool flush) {
    (void)calls;
    (void)poison;
    (void)flush;
    return {};
  }
};

std::uint64_t new_digest_key();  // eval/digest.hpp

// The evaluation device: memory, input generation, comparison, cache
// flushing, and loading programs.
class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceInfo info() const = 0;

  virtual Buffer alloc(std::size_t bytes) = 0;  // throws RunError on exhaustion
  virtual void free(Buffer b) = 0;
  virtual void upload(Buffer dst, const void* src, std::size_t bytes) = 0;
  virtual void download(void* dst, Buffer src, std::size_t bytes) = 0;
  virtual void copy(Buffer dst, Buffer src, std::size_t bytes) = 0;

  // Fills `count` elements with draws of `kind` (params already evaluated to
  // numbers) using core/rng/ks_rng.h with (seed, stream); converts to dtype.
  virtual void generate(Buffer b, DType dtype, std::size_t count, Distribution::Kind kind, double p0,
                        double p1, std::uint64_t seed, std::uint64_t stream) = 0;
  // Fills with the poison pattern (all bytes 0xFF: a NaN for floats, -1 for ints).
  virtual void poison(Buffer b, std::size_t bytes) = 0;
  virtual CompareStats compare(Buffer out, Buffer ref, DType dtype, std::size_t count,
                               const Tolerance& tol) = 0;
  // A keyed digest of the first `bytes` bytes of `b` (eval/digest.hpp): equal
  // digests mean unchanged bytes, except with probability 2^-64 for a change
  // made without knowing this device's key. The default downloads the
  // buffer in pieces; devices that can, digest in place.
  virtual std::uint64_t digest(Buffer b, std::size_t bytes);
  // Evicts the last-level cache (GPU L2: a write over a buffer >= 2x its size).
  virtual void flush_cache() = 0;
  virtual void synchronize() = 0;
  // Names a buffer ("output \"C\"") for error reports; the host backend uses
  // it when an out-of-bounds access hits the buffer's guard page.
  virtual void label(Buffer b, std::string_view name) {
    (void)b;
    (void)name;
  }

  virtual std::unique_ptr<Program> load(const Artifact& artifact, const Solution& solution) = 0;

  // Memory another process holds. The default reads a "file" tensor into a
  // fresh buffer (release_external frees it); the CUDA device maps a
  // "cuda_ipc" tensor in place (read-only by convention). Throws RunError
  // (runtime_error) when the memory cannot be reached.
  virtual Buffer open_external(const ExternalTensor& t);
  virtual void release_external(Buffer b, const ExternalTensor& t);
  // Lets go of every mapping of another process's memory except those with
  // these handles: a mapping keeps that memory alive after its owner (an
  // oracle of an earlier problem) has freed it.
  virtual void keep_only_externals(const std::set<std::string>& handles) { (void)handles; }

  // False once an error has left the device unusable (a sticky CUDA error:
  // the context must be recreated, so the worker must be replaced).
  virtual bool usable() const { return true; }

 protected:
  const std::uint64_t digest_key_ = new_digest_key();  // digest()'s; never leaves the object
};

// The RNG stream of a tensor (see core/rng/rng_stream.hpp).
using core::rng_stream_of;

}  // namespace ks::eval
