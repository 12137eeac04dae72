#include "eval/flow.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "core/inputs.hpp"
#include "eval/compare.hpp"
#include "util/expr.hpp"
#include "util/sha256.hpp"
#include <math.h>  // ks_rng.h calls math functions unqualified

#include "core/rng/ks_rng.h"
#include "eval/phases.hpp"
#include "eval/stats.hpp"
#include "ksearch/error.hpp"

namespace ks::eval {
namespace {

using Clock = std::chrono::steady_clock;


// A task tensor allocated for one workload.
struct TensorBuffer {
  const TensorSpec* spec = nullptr;
  std::vector<std::int64_t> shape;
  std::size_t count = 0;
  std::size_t bytes = 0;
  Buffer buf;
  // An input the workload gives as data: the same bytes for every seed.
  bool has_data = false;
  std::vector<unsigned char> data;
};

// Frees what it allocated, whatever path leaves the workload.
class Allocations {
 public:
  explicit Allocations(Device& d) : device_(d) {}
  ~Allocations() {
    for (auto b : owned_) device_.free(b);
  }
  Allocations(const Allocations&) = delete;
  Allocations& operator=(const Allocations&) = delete;
  Buffer alloc(std::size_t bytes, std::string_view label) {
    Buffer b = device_.alloc(bytes);
    owned_.push_back(b);
    device_.label(b, label);
    return b;
  }

 private:
  Device& device_;
  std::vector<Buffer> owned_;
};

// Names a step of the task's reference while it runs; the name stays when
// an exception leaves the step, so the handler knows whose failure it is.
class StepScope {
 public:
  StepScope(std::string& slot, std::string what)
      : slot_(slot), outer_(slot), exceptions_(std::uncaught_exceptions()) {
    slot_ = std::move(what);
  }
  ~StepScope() {
    if (std::uncaught_exceptions() == exceptions_) slot_ = outer_;
  }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  std::string& slot_;
  std::string outer_;  // the enclosing step, restored when this one ends
  int exceptions_;
};

std::string describe_seed(int k, int n, bool recheck) {
  if (recheck) return "the re-check after timing (fresh inputs)";
  return fmt::format("input seed {} of {}", k + 1, n);
}

// How long timing warms up: at least min_calls calls, then until `seconds`
// have passed (at most 50 calls). The candidate has just run this workload's
// checked calls (two seeds at least) in this process: its module is loaded,
// its pages touched and the device busy, so a few calls settle it. The
// reference is timed once per device and may not have run here at all (its
// outputs came from a cache).
struct WarmUp {
  int min_calls;
  double seconds;
};
constexpr WarmUp kCandidateWarmUp{2, 0.005};
constexpr WarmUp kReferenceWarmUp{1, 0.025};

// What every workload of one evaluation shares: the device and its cached
// reference outputs, the task and the request, and where progress, phase
// times and the result's metrics go.
struct WorkloadContext {
  Device& device;
  ReferenceStore& refs;
  const DeviceInfo& info;
  const TaskSpec& task;
  const RunRequest& req;
  FlowEvents& events;
  PhaseClock& clock;
  Json& metrics;  // the whole result's ("reference_runs", ...)
};

class TimedCalls;

// A program loaded from one build of a prepared solution.
struct LoadedBuild {
  Program* program;  // null for an oracle task's reference: the oracle supplies its outputs
  const PreparedSolution::Build& build;
};

// The work on one workload, holding what its steps share.
class WorkloadRun {
 public:
  // `reference_step` names the step of the task's reference in progress, for
  // the caller's handler: a failure there is not the candidate's.
  WorkloadRun(const WorkloadContext& ctx, const WorkloadSpec& w, LoadedBuild candidate, LoadedBuild reference,
              WorkloadResult& result, std::string& reference_step)
      : device_(ctx.device), refs_(ctx.refs), info_(ctx.info), task_(ctx.task), w_(w), req_(ctx.req),
        cand_(*candidate.program), cand_build_(candidate.build), ref_(reference.program), ref_build_(reference.build),
        r_(result), metrics_(ctx.metrics), reference_step_(reference_step), events_(ctx.events), clock_(ctx.clock),
        allocs_(ctx.device), external_(ctx.device) {
    for (const auto& [k, v] : w.dims) dims_[k] = v;
    if (auto it = req_.oracle.find(w.name); it != req_.oracle.end()) oracle_ = &it->second;
  }

  void prepare();
  std::optional<Failure> check(std::uint64_t seed, const std::string& what);
  // The re-check after timing on fresh inputs; says when the outputs are
  // stale (those of the earlier inputs) or unwritten.
  std::optional<Failure> recheck(std::uint64_t seed);
  // Times the candidate (outputs and scratch poisoned before every call) and
  // then checks what its last timed call left behind.
  TimingStats time_candidate();
  std::optional<Failure> check_timed_calls();
  TimingStats time_reference();
  // Whether the reference can be timed beside the candidate (it has a
  // program, the request wants its latency, and the suite's own timing is
  // not asked for), and the two timings taken so: {candidate, reference}.
  bool can_pair() const;
  struct PairedTiming {
    TimingStats candidate, reference;
  };
  PairedTiming time_paired();
  void bind_reference();

 private:
  TimingStats time(Program& p, const std::vector<Buffer>& outputs, WarmUp warm);
  TimingStats finish_timing(const TimedCalls& calls);
  void run_candidate();
  std::optional<Failure> judge(std::uint64_t seed, const std::string& what);
  std::optional<Failure> compare_outputs(const std::string& what);
  bool outputs_match_reference();
  void enter(FlowPhase phase);
  // A step of the task's reference: reported as such, and afterwards the
  // candidate's step in progress is reported again.
  class ReferencePhase {
   public:
    ReferencePhase(WorkloadRun& run, std::string detail, double extra_s);
    ~ReferencePhase();
    ReferencePhase(const ReferencePhase&) = delete;
    ReferencePhase& operator=(const ReferencePhase&) = delete;

   private:
    WorkloadRun& run_;
    FlowPhase resume_;
    StepScope step_;
  };
  void generate_inputs(std::uint64_t seed);
  std::optional<Failure> inputs_unchanged(std::uint64_t seed, const char* who);
  void reference_outputs(std::uint64_t seed);
  std::string reference_key(std::uint64_t seed) const;
  Distribution distribution_of(const TensorSpec& t) const;
  // Oracle tasks: the oracle's tensors of `seed`, opened on first use.
  struct OracleSet {
    std::vector<Buffer> inputs, outputs;  // in task order
  };
  const OracleSet& oracle_set(std::uint64_t seed);
  // Gives back what open_external took, whatever path leaves the workload.
  class Externals {
   public:
    explicit Externals(Device& d) : device_(d) {}
    ~Externals() {
      for (const auto& [b, t] : opened_) device_.release_external(b, t);
    }
    Externals(const Externals&) = delete;
    Externals& operator=(const Externals&) = delete;
    Buffer open(const ExternalTensor& t) {
      Buffer b = device_.open_external(t);
      opened_.push_back({b, t});
      return b;
    }

   private:
    Device& device_;
    std::vector<std::pair<Buffer, ExternalTensor>> opened_;
  };
  // Fills `dst` with what input `tb` holds for `seed`: its data, or a draw.
  void fill_input(Buffer dst, const TensorBuffer& tb, std::uint64_t seed);
  // Dimensions, a solution's parameter values and the integer scalar inputs.
  Bindings bindings(const PreparedSolution::Build& build) const;

  Device& device_;
  ReferenceStore& refs_;
  const DeviceInfo& info_;
  const TaskSpec& task_;
  const WorkloadSpec& w_;
  const RunRequest& req_;
  Program& cand_;
  const PreparedSolution::Build& cand_build_;
  Program* ref_;  // null for oracle tasks
  const PreparedSolution::Build& ref_build_;
  WorkloadResult& r_;
  Json& metrics_;
  std::string& reference_step_;
  FlowEvents& events_;
  PhaseClock& clock_;            // where the time goes (phases.hpp)
  FlowPhase phase_;              // the candidate's step in progress
  Allocations allocs_;
  util::Vars dims_;
  std::vector<TensorBuffer> tensors_;
  ScalarArgs scalars_;           // the scalar inputs' values on this workload
  std::string data_digest_;      // of the inputs given as data, for the reference cache key
  std::vector<Buffer> ref_out_;  // reference outputs, one per output tensor, in tensor order
  Buffer check_buf_;             // an input drawn again, to say how a kernel modified it
  std::vector<std::uint64_t> pristine_;  // the inputs' digests as drawn for pristine_seed_, in input order
  std::optional<std::uint64_t> pristine_seed_;
  std::vector<Buffer> cand_out_; // the candidate's outputs, in tensor order
  std::uint64_t seed_ = 0;       // the seed whose inputs the tensors hold
  std::string seed_what_;        // how messages name that seed
  bool ref_bound_ = false;
  const std::vector<OracleSeed>* oracle_ = nullptr;  // this workload's seeds, for oracle tasks
  Externals external_;
  std::map<std::uint64_t, OracleSet> oracle_sets_;
};

const WorkloadRun::OracleSet& WorkloadRun::oracle_set(std::uint64_t seed) {
  if (auto it = oracle_sets_.find(seed); it != oracle_sets_.end()) return it->second;
  const OracleSeed* found = nullptr;
  for (const auto& s : *oracle_)
    if (s.seed == seed) found = &s;
  if (!found)
    throw Error(Status::invalid_argument,
                fmt::format("evaluation request: the reference oracle sent no data for input seed {} of workload \"{}\"",
                            seed, w_.name));
  auto transfer = clock_.enter(Phase::transfers);
  OracleSet set;
  std::size_t i = 0, o = 0;
  auto check = [&](const TensorBuffer& tb, const ExternalTensor& t) {
    if (t.bytes != tb.bytes)
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\", workload \"{}\": the reference oracle's tensor \"{}\" has {} bytes, the "
                              "task declares {} ({} elements of {})",
                              task_.name, w_.name, tb.spec->name, t.bytes, tb.bytes, tb.count, to_string(tb.spec->dtype)));
  };
  if (found->inputs.size() + found->outputs.size() != tensors_.size())
    throw Error(Status::invalid_argument,
                fmt::format("task \"{}\": the reference oracle sent {} inputs and {} outputs for a task of {} tensors",
                            task_.name, found->inputs.size(), found->outputs.size(), tensors_.size()));
  for (const auto& tb : tensors_) {
    if (tb.spec->is_output) {
      if (o >= found->outputs.size()) throw Error(Status::invalid_argument, "reference oracle: too few outputs");
      check(tb, found->outputs[o]);
      set.outputs.push_back(external_.open(found->outputs[o++]));
    } else {
      if (i >= found->inputs.size()) throw Error(Status::invalid_argument, "reference oracle: too few inputs");
      check(tb, found->inputs[i]);
      set.inputs.push_back(external_.open(found->inputs[i++]));
    }
  }
  // Metrics are numbers: 1 when the oracle's memory was mapped in place (CUDA IPC), 0 for files.
  metrics_["oracle_cuda_ipc"] = !found->inputs.empty() && found->inputs.front().handover == "cuda_ipc" ? 1 : 0;
  return oracle_sets_.emplace(seed, std::move(set)).first->second;
}

Distribution WorkloadRun::distribution_of(const TensorSpec& t) const {
  auto it = w_.dist_overrides.find(t.name);
  return it != w_.dist_overrides.end() ? it->second : t.dist;
}

void WorkloadRun::prepare() {
  auto phase = clock_.enter(Phase::setup);
  std::size_t max_input = 0;
  util::Sha256 digest;
  for (const auto& t : task_.tensors) {
    if (t.scalar) {
      scalars_[t.name] = ScalarArg{t.dtype, core::scalar_value(t, w_)};
      continue;
    }
    TensorBuffer tb;
    tb.spec = &t;
    std::int64_t count = 1;
    for (const auto& e : t.shape) {
      std::int64_t d = util::eval_int_expr(e, dims_);
      if (d < 0)
        throw Error(Status::invalid_argument,
                    fmt::format("task \"{}\", workload \"{}\": tensor \"{}\" has a negative extent {} (\"{}\")",
                                task_.name, w_.name, t.name, d, e));
      tb.shape.push_back(d);
      if (__builtin_mul_overflow(count, d, &count))
        throw Error(Status::invalid_argument,
                    fmt::format("task \"{}\", workload \"{}\": tensor \"{}\" has more elements than 64 bits can "
                                "count (the product overflows at extent \"{}\" = {})",
                                task_.name, w_.name, t.name, e, d));
    }
    tb.count = static_cast<std::size_t>(count);
    if (__builtin_mul_overflow(tb.count, dtype_size(t.dtype), &tb.bytes))
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\", workload \"{}\": tensor \"{}\" of {} elements of {} has a size in "
                              "bytes that overflows 64 bits",
                              task_.name, w_.name, t.name, count, to_string(t.dtype)));
    if (!t.is_output && w_.data.count(t.name)) {
      tb.has_data = true;
      auto reading = clock_.enter(Phase::inputs);
      tb.data = core::input_data_bytes(t, w_, tb.shape, task_.base_dir);
      digest.update(t.name + ":" + std::to_string(tb.data.size()) + ":");
      digest.update(std::string_view(reinterpret_cast<const char*>(tb.data.data()), tb.data.size()));
    }
    tb.buf = allocs_.alloc(tb.bytes, fmt::format("{} \"{}\"", t.is_output ? "output" : "input", t.name));
    if (!t.is_output) max_input = std::max(max_input, tb.bytes);
    if (t.is_output) cand_out_.push_back(tb.buf);
    tensors_.push_back(std::move(tb));
  }
  // An oracle's reference outputs and pristine inputs are its own buffers.
  if (!oracle_) {
    for (const auto& tb : tensors_)
      if (tb.spec->is_output)
        ref_out_.push_back(allocs_.alloc(tb.bytes, fmt::format("reference output \"{}\"", tb.spec->name)));
    check_buf_ = allocs_.alloc(std::max<std::size_t>(max_input, 1), "input check copy");
  }
  data_digest_ = digest.hex_digest();

  Bindings b = bindings(cand_build_);
  for (const auto& tb : tensors_) b.tensors[tb.spec->name] = tb.buf;
  cand_.bind(b);
  // What a GPU still does for the set-up (redzones, poisoned scratch) is
  // charged here, not to the next phase.
  device_.synchronize();
}

Bindings WorkloadRun::bindings(const PreparedSolution::Build& build) const {
  Bindings b;
  b.vars = dims_;
  for (const auto& [k, v] : build.params) b.vars[k] = v;
  b.scalars = scalars_;
  for (const auto& tb : tensors_) b.dtypes[tb.spec->name] = tb.spec->dtype;
  for (const auto& [name, sc] : scalars_)
    if (!dtype_is_float(sc.dtype)) b.vars[name] = static_cast<std::int64_t>(sc.value);
  return b;
}

void WorkloadRun::fill_input(Buffer dst, const TensorBuffer& tb, std::uint64_t seed) {
  if (tb.has_data) {
    auto transfer = clock_.enter(Phase::transfers);
    device_.upload(dst, tb.data.data(), tb.data.size());
    return;
  }
  Distribution d = distribution_of(*tb.spec);
  double p0 = util::eval_double_expr(d.p0, dims_), p1 = util::eval_double_expr(d.p1, dims_);
  device_.generate(dst, tb.spec->dtype, tb.count, d.kind, p0, p1, seed, rng_stream_of(tb.spec->name));
}

void WorkloadRun::enter(FlowPhase phase) {
  if (!phase.reference) phase_ = phase;
  events_.phase(w_.name, phase);
}

WorkloadRun::ReferencePhase::ReferencePhase(WorkloadRun& run, std::string detail, double extra_s)
    : run_(run), resume_(run.phase_), step_(run.reference_step_, detail) {
  run_.enter(FlowPhase{"reference", std::move(detail), extra_s, true});
}

WorkloadRun::ReferencePhase::~ReferencePhase() {
  if (std::uncaught_exceptions() == 0) run_.enter(resume_);
}

void WorkloadRun::bind_reference() {
  if (ref_bound_) return;
  StepScope step(reference_step_, reference_step_.empty() ? "binding its plan to the workload"
                                                          : reference_step_ + " (binding its plan)");
  Bindings b = bindings(ref_build_);
  std::size_t o = 0;
  for (const auto& tb : tensors_) b.tensors[tb.spec->name] = tb.spec->is_output ? ref_out_[o++] : tb.buf;
  ref_->bind(b);
  ref_bound_ = true;
}

void WorkloadRun::generate_inputs(std::uint64_t seed) {
  auto phase = clock_.enter(Phase::inputs);
  if (oracle_) {
    StepScope step(reference_step_, "handing over its inputs");
    const OracleSet& set = oracle_set(seed);
    std::size_t i = 0;
    for (const auto& tb : tensors_)
      if (!tb.spec->is_output) {
        device_.copy(tb.buf, set.inputs[i++], tb.bytes);
      }
    device_.synchronize();
    return;
  }
  for (const auto& tb : tensors_)
    if (!tb.spec->is_output) fill_input(tb.buf, tb, seed);
  // What a call must leave unchanged: one keyed digest per input. Reading
  // the digests back also waits for the draws, so their time is charged to
  // inputs, not to the candidate's checked run that would wait for it next.
  pristine_.clear();
  for (const auto& tb : tensors_)
    if (!tb.spec->is_output) pristine_.push_back(device_.digest(tb.buf, tb.bytes));
  pristine_seed_ = seed;
  device_.synchronize();
}

std::optional<Failure> WorkloadRun::inputs_unchanged(std::uint64_t seed, const char* who) {
  Tolerance exact;
  exact.atol = 0;
  exact.rtol = 0;
  exact.min_matched_ratio = 1;
  exact.nan_policy = Tolerance::NanPolicy::must_match;
  std::size_t input_index = 0;
  for (const auto& tb : tensors_) {
    if (tb.spec->is_output) continue;
    const std::size_t i = input_index++;
    if (tb.count == 0) continue;
    Buffer pristine = check_buf_;
    if (oracle_) {
      pristine = oracle_set(seed).inputs[i];
    } else {
      // Unchanged digest, unchanged bytes. A changed one draws the input
      // again for the message below; bytes that differ but compare equal
      // as numbers (0.0 for -0.0, another NaN) pass, as they always did.
      if (pristine_seed_ == seed && i < pristine_.size() && device_.digest(tb.buf, tb.bytes) == pristine_[i])
        continue;
      fill_input(check_buf_, tb, seed);
    }
    CompareStats st = device_.compare(tb.buf, pristine, tb.spec->dtype, tb.count, exact);
    if (st.mismatches == 0) continue;
    return Failure{EvalStatus::incorrect,
                   fmt::format("{} modified input \"{}\": {} of {} elements changed, first at {} ({} became "
                               "{}); inputs are read-only, write only to outputs and scratch buffers",
                               who, tb.spec->name, st.mismatches, st.count,
                               format_index(tb.spec->name, tb.shape, st.first_bad_index),
                               format_value(st.first_bad_ref), format_value(st.first_bad_out))};
  }
  return std::nullopt;
}

std::string WorkloadRun::reference_key(std::uint64_t seed) const {
  return reference_cache_key(task_, w_, seed, req_.reference, ref_build_, info_, data_digest_);
}

void WorkloadRun::reference_outputs(std::uint64_t seed) {
  auto phase = clock_.enter(Phase::reference);
  if (oracle_) {
    // The oracle computed them once for this seed and holds them.
    StepScope step(reference_step_, "handing over its reference outputs");
    ref_out_ = oracle_set(seed).outputs;
    return;
  }
  const std::string key = reference_key(seed);
  if (refs_.fetch(key, ref_out_)) {
    device_.synchronize();  // a GPU copies from its cache asynchronously
    return;
  }
  ReferencePhase step(*this, fmt::format("computing the reference outputs for {}", seed_what_), 0);
  bind_reference();
  for (const auto& b : ref_out_) device_.poison(b, b.bytes);
  ref_->poison_scratch();
  const auto started = std::chrono::steady_clock::now();
  ref_->launch();
  ref_->synchronize();
  device_.synchronize();
  const double compute_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (auto f = inputs_unchanged(seed, "the task's reference"))
    throw Error(Status::invalid_argument, fmt::format("task \"{}\": {}", task_.name, f->message));
  refs_.store(key, ref_out_, compute_s);
  metrics_["reference_runs"] = metrics_.get_int("reference_runs") + 1;
}

void WorkloadRun::run_candidate() {
  for (const auto& b : cand_out_) device_.poison(b, b.bytes);
  cand_.poison_scratch();
  cand_.launch();
  cand_.synchronize();
  device_.synchronize();
}

std::optional<Failure> WorkloadRun::check(std::uint64_t seed, const std::string& what) {
  auto phase = clock_.enter(Phase::checks);
  seed_ = seed;
  seed_what_ = what;
  enter(FlowPhase{"checks", "running the kernel on " + what});
  generate_inputs(seed);
  reference_outputs(seed);
  run_candidate();
  return judge(seed, what);
}

std::optional<Failure> WorkloadRun::recheck(std::uint64_t seed) {
  auto phase = clock_.enter(Phase::recheck);
  const std::string what = describe_seed(0, 0, true);
  enter(FlowPhase{"re-check", "running " + what});
  generate_inputs(seed);
  // The candidate runs before the new reference outputs are fetched: until
  // then ref_out_ holds those of the timed inputs, and outputs that match
  // them are stale.
  run_candidate();
  if (auto f = inputs_unchanged(seed, "the kernel")) {
    f->message = fmt::format("{}: {}", what, f->message);
    return f;
  }
  const bool stale = outputs_match_reference();
  seed_ = seed;
  seed_what_ = what;
  reference_outputs(seed);
  auto f = compare_outputs(what);
  if (f && stale)
    f->message += "; these are the outputs for the inputs of the timed calls, not for the new ones: the kernel "
                  "passed the checks before timing, so it probably reuses results from earlier calls instead "
                  "of computing them";
  else if (f && f->unwritten)
    f->message += "; the kernel wrote them in the checks before timing, so it probably reuses results from "
                  "earlier calls (keeping their outputs) instead of computing them";
  return f;
}

bool WorkloadRun::outputs_match_reference() {
  std::size_t o = 0;
  for (const auto& tb : tensors_) {
    if (!tb.spec->is_output) continue;
    CompareStats st = device_.compare(tb.buf, ref_out_[o++], tb.spec->dtype, tb.count, task_.tolerance);
    if (st.mismatches > 0) return false;
  }
  return true;
}

// Checks what the candidate's last call left: inputs unchanged, outputs
// matching the reference outputs of `seed` (held in ref_out_).
std::optional<Failure> WorkloadRun::judge(std::uint64_t seed, const std::string& what) {
  if (auto f = inputs_unchanged(seed, "the kernel")) {
    f->message = fmt::format("{}: {}", what, f->message);
    return f;
  }
  auto f = compare_outputs(what);
  // Its process's words on what the call returned, beside the verdict.
  if (const std::string note = cand_.note(); f && !note.empty())
    f->message += fmt::format(" (the candidate's process said: {})", note);
  return f;
}

std::optional<Failure> WorkloadRun::compare_outputs(const std::string& what) {
  std::size_t o = 0;
  for (const auto& tb : tensors_) {
    if (!tb.spec->is_output) continue;
    const Buffer ref = ref_out_[o++];
    const Tolerance& tol = task_.tolerance;
    CompareStats st = device_.compare(tb.buf, ref, tb.spec->dtype, tb.count, tol);
    r_.max_abs_error = std::max(r_.max_abs_error, st.max_abs_error);
    r_.max_rel_error = std::max(r_.max_rel_error, st.max_rel_error);
    r_.matched_ratio = std::min(r_.matched_ratio, st.matched_ratio());
    const std::string& name = tb.spec->name;
    const std::string first =
        st.first_bad_index >= 0
            ? fmt::format("first at {} (flat index {}): got {}, expected {}",
                          format_index(name, tb.shape, st.first_bad_index), st.first_bad_index,
                          format_value(st.first_bad_out),
                          format_value(st.first_bad_ref))
            : std::string();
    // Elements still holding the poison pattern were never written. For
    // floating types the pattern is a NaN no arithmetic produces, so any of
    // them fails whatever the matched ratio allows.
    if (st.poisoned > 0 && dtype_is_float(tb.spec->dtype))
      return Failure{.status = EvalStatus::incorrect,
                     .message = fmt::format("{}: {} of {} elements of output \"{}\" were never written (they still hold "
                                 "the poison pattern 0xFF..); first unwritten or wrong element {}; the "
                                 "kernel must write every output element on every call. Scratch buffers hold "
                                 "the same pattern before every call, so an output copied from scratch the "
                                 "kernel did not fill looks the same",
                                 what, st.poisoned, st.count, name,
                                 format_index(name, tb.shape, st.first_bad_index)),
                     .unwritten = true};
    // A NaN or infinity the reference does not have fails whatever the
    // matched ratio allows: it poisons whatever consumes the output.
    if (st.nonfinite_outputs > 0)
      return Failure{
          EvalStatus::incorrect,
          tol.nan_policy == Tolerance::NanPolicy::forbid
              ? fmt::format("{}: output \"{}\" contains {} NaN or infinite values, which this task forbids; {}",
                            what, name, st.nonfinite_outputs, first)
              : fmt::format("{}: output \"{}\" has {} NaN or infinite values where the reference has a number or "
                            "another non-finite value; {}",
                            what, name, st.nonfinite_outputs, first)};
    if (st.matched_ratio() < tol.min_matched_ratio) {
      std::string nonfinite =
          st.nonfinite_reference
              ? fmt::format(" ({} of them numbers where the reference is NaN or infinite)", st.nonfinite_reference)
              : "";
      std::string poisoned =
          st.poisoned ? fmt::format(" ({} still hold the poison pattern: never written, or copied from scratch "
                                    "the kernel did not fill)",
                                    st.poisoned)
                      : "";
      return Failure{.status = EvalStatus::incorrect,
                     .message = fmt::format("{}: {} of {} elements of output \"{}\" ({:.3g}%) differ from the reference "
                                 "beyond {}{}{} (matched {:.6g}, required {:.6g}); {}; "
                                 "max abs error {}, max rel error {}",
                                 what, st.mismatches, st.count, name,
                                 100.0 * static_cast<double>(st.mismatches) / static_cast<double>(std::max<std::uint64_t>(st.count, 1)),
                                 describe_tolerance(tol), nonfinite, poisoned, st.matched_ratio(), tol.min_matched_ratio,
                                 first, format_value(st.max_abs_error), format_value(st.max_rel_error)),
                     .unwritten = st.poisoned > 0};
    }
  }
  return std::nullopt;
}

// One program's timed calls, taken step by step so that two programs (the
// candidate and the reference) can alternate under one load. Every call
// starts from poisoned outputs and scratch, as a checked call does: a kernel
// cannot skip its work because the output already holds a result.
// Poisoning comes before the cache flush and outside the timing events, so
// it costs the kernel nothing and leaves no line in the cache.
class TimedCalls {
 public:
  // `share`: the part of the workload's timing budget (the caps on the
  // samples' sum and on the wall time) this program's calls may use.
  TimedCalls(Device& device, Program& p, const std::vector<Buffer>& outputs, const EvalOptions& o, WarmUp warm,
             double share = 1.0)
      : device_(device), p_(p), outputs_(outputs), o_(o), warm_(warm), ctrl_(shared(o, share)),
        upstream_(ctrl_.limits().rule == RepetitionController::Rule::gpumode) {}

  // Calls taken per step when alternating: one request per call costs a
  // round trip, so a single call; a batched program (in its own process)
  // times 10 back to back, as when it is timed alone.
  int step_calls() const { return p_.times_in_batches() ? kBatch : 1; }

  void warm_up() {
    if (p_.times_in_batches()) {
      poison();
      p_.timed_batch(1, false, false);  // GPUMode's untimed call; the first of the warm-up otherwise
      if (!upstream_) {
        auto warm_start = Clock::now();
        for (int n = 1; n < 50 && (n < warm_.min_calls || seconds_since(warm_start) < warm_.seconds); n += 5)
          p_.timed_batch(5, true, o_.flush_l2);
      }
    } else if (upstream_) {
      // GPUMode eval.py: the obligatory untimed call on the same inputs,
      // then calls back to back on a warm cache, nothing written between
      // them (the check after timing still runs).
      poison();
      p_.timed_launch();
    } else {
      // Caches, page faults, clocks: at least warm.min_calls calls, then
      // until warm.seconds or 50 calls.
      auto warm_start = Clock::now();
      for (int n = 1; n <= 50; ++n) {
        poison();
        p_.timed_launch();
        if (n >= warm_.min_calls && seconds_since(warm_start) >= warm_.seconds) break;
      }
    }
  }

  // Up to `calls` timed calls, fewer when the stopping rule ends them. The
  // wall time the rule sees is this program's own, so alternating with
  // another program does not use up its cap.
  void step(int calls) {
    const auto t0 = Clock::now();
    auto wall = [&] { return wall_s_ + seconds_since(t0); };
    if (p_.times_in_batches()) {
      known_ = false;  // the batch's process times its calls: no run-queue reading per call
      for (double ms : p_.timed_batch(calls, !upstream_, !upstream_ && o_.flush_l2)) {
        ctrl_.add(ms, wall());
        if (ctrl_.done()) break;
      }
    } else {
      for (int i = 0; i < calls && !ctrl_.done(); ++i) {
        if (!upstream_) {
          poison();
          if (o_.flush_l2) device_.flush_cache();
        }
        ctrl_.add(p_.timed_launch(), wall());
        if (auto d = p_.last_call_disturbed()) disturbed_.push_back(*d);
        else known_ = false;
      }
    }
    wall_s_ = wall();
  }

  bool done() const { return ctrl_.done(); }
  bool upstream() const { return upstream_; }
  // Per sample, whether another process interrupted it; empty when the
  // program cannot tell (or times in batches).
  std::vector<bool> disturbed() const { return known_ ? disturbed_ : std::vector<bool>{}; }
  const RepetitionController& controller() const { return ctrl_; }

 private:
  static constexpr int kBatch = 10;
  static RepetitionController::Limits shared(const EvalOptions& o, double share) {
    auto l = RepetitionController::limits_from(o);
    l.max_time_s *= share;
    l.min_time_s = std::min(l.min_time_s, l.max_time_s);
    l.wall_cap_s *= share;
    return l;
  }
  void poison() {
    for (const auto& b : outputs_) device_.poison(b, b.bytes);
    p_.poison_scratch();
  }

  Device& device_;
  Program& p_;
  const std::vector<Buffer>& outputs_;
  const EvalOptions& o_;
  WarmUp warm_;
  RepetitionController ctrl_;
  bool upstream_;
  double wall_s_ = 0;
  std::vector<bool> disturbed_;
  bool known_ = true;
};

TimingStats WorkloadRun::finish_timing(const TimedCalls& calls) {
  // Metrics are numbers: count how many timings met the noise target and how
  // many a cap ended (their latency is less certain than asked for).
  const auto& ctrl = calls.controller();
  const char* key = ctrl.stop_reason() == "converged" ? "timings_converged" : "timings_capped";
  metrics_[key] = metrics_.get_int(key) + 1;
  if (calls.upstream()) metrics_["timing_upstream"] = 1;
  const LatencyStatistic stat = latency_statistic_for(req_.options, info_.backend);
  if (stat == LatencyStatistic::p10) return summarize_host_samples(ctrl.samples(), calls.disturbed());
  return summarize_samples(ctrl.samples(), stat);
}

TimingStats WorkloadRun::time(Program& p, const std::vector<Buffer>& outputs, WarmUp warm) {
  TimedCalls calls(device_, p, outputs, req_.options, warm);
  calls.warm_up();
  while (!calls.done()) calls.step(calls.step_calls());
  if (p.times_in_batches()) metrics_["timing_batched"] = 1;
  return finish_timing(calls);
}

TimingStats WorkloadRun::time_candidate() {
  auto phase = clock_.enter(Phase::timing);
  enter(FlowPhase{"timing", "in the timed calls (warm-up and repetitions)", timing_allowance_s(req_.options)});
  return time(cand_, cand_out_, kCandidateWarmUp);
}

TimingStats WorkloadRun::time_reference() {
  auto phase = clock_.enter(Phase::reference_timing);
  ReferencePhase step(*this, "timing it", timing_allowance_s(req_.options));
  if (!ref_)
    throw Error(Status::invalid_argument, "evaluation request: an oracle task's reference is timed by its oracle");
  bind_reference();
  return time(*ref_, ref_out_, kReferenceWarmUp);
}

bool WorkloadRun::can_pair() const {
  return ref_ && req_.options.time_reference && req_.options.pair_reference &&
         req_.options.timing != TimingMode::upstream;
}

WorkloadRun::PairedTiming WorkloadRun::time_paired() {
  // Both programs' calls alternate, a step of each in turn, so both see the
  // same load and their ratio does not move with it; once one program's
  // stopping rule is met the other goes on alone. They share the workload's
  // timing budget, half each, so an evaluation takes no longer than when the
  // candidate alone was timed (docs/evaluation.md, "Timing").
  enter(FlowPhase{"timing", "in the timed calls (warm-up and repetitions), alternating with the reference's",
                  timing_allowance_s(req_.options) + 1.0});
  {
    StepScope step(reference_step_, "binding its plan to the workload for timing");
    bind_reference();
  }
  TimedCalls cand(device_, cand_, cand_out_, req_.options, kCandidateWarmUp, 0.5);
  TimedCalls ref(device_, *ref_, ref_out_, req_.options, kReferenceWarmUp, 0.5);
  auto ref_step = [&](auto&& fn) {
    auto phase = clock_.enter(Phase::reference_timing);
    StepScope step(reference_step_, "timing it (beside the candidate)");
    fn();
  };
  ref_step([&] { ref.warm_up(); });
  {
    auto phase = clock_.enter(Phase::timing);
    cand.warm_up();
  }
  while (!cand.done() || !ref.done()) {
    if (!cand.done()) {
      auto phase = clock_.enter(Phase::timing);
      cand.step(cand.step_calls());
    }
    if (!ref.done()) ref_step([&] { ref.step(ref.step_calls()); });
  }
  if (cand_.times_in_batches()) metrics_["timing_batched"] = 1;
  metrics_["timing_paired"] = 1;
  // The reference's calls overwrote its outputs; the check of the timed
  // calls compares with those of the checked inputs, fetched again.
  {
    StepScope step(reference_step_, "fetching its outputs again after timing");
    reference_outputs(seed_);
  }
  PairedTiming t{finish_timing(cand), finish_timing(ref)};
  return t;
}

// The timed calls ran on the inputs of the last checked seed, whose reference
// outputs are still in ref_out_: the last call's outputs must match them.
// This catches a kernel that skips its work when it sees the same inputs
// again (keyed on pointers, a call counter or the values).
std::optional<Failure> WorkloadRun::check_timed_calls() {
  auto phase = clock_.enter(Phase::checks);
  enter(FlowPhase{"timed-check", "checking the outputs of its last timed call"});
  cand_.synchronize();  // device errors and out-of-bounds writes of the timed calls
  device_.synchronize();
  auto f = judge(seed_, fmt::format("the last timed call (the inputs of {})", seed_what_));
  if (f)
    f->message = "the timed calls did not compute the result, although the same kernel passed the checks "
                 "before timing: " + f->message;
  return f;
}

// Finds a build or complains about the request.
const PreparedSolution::Build& build_of(const PreparedSolution& p, const std::string& workload, const char* who) {
  const PreparedSolution::Build* b = p.build_for(workload);
  if (!b)
    throw Error(Status::invalid_argument,
                fmt::format("evaluation request: the {} has no build for workload \"{}\"", who, workload));
  return *b;
}

}  // namespace

Json FlowPhase::to_json() const {
  return Json::obj({{"phase", name}, {"detail", detail}, {"extra_s", extra_s}, {"reference", reference}});
}

FlowPhase FlowPhase::from_json(const Json& j) {
  return FlowPhase{j.get_string("phase"), j.get_string("detail"), j.get_number("extra_s"), j.get_bool("reference")};
}

double timing_allowance_s(const EvalOptions& options) {
  // The warm-up runs for at most 25 ms past its first calls (kCandidateWarmUp,
  // kReferenceWarmUp); a second covers it, poisoning and flushing before the
  // first timed call, and the last call past the cap.
  return RepetitionController::limits_from(options).wall_cap_s + 1.0;
}

std::string reference_cache_key(const TaskSpec& task, const WorkloadSpec& workload, std::uint64_t seed,
                                const PreparedSolution& reference, const PreparedSolution::Build& build,
                                const DeviceInfo& device, std::string_view data_digest) {
  util::Sha256 h;
  auto field = [&](std::string_view s) {
    h.update(std::to_string(s.size()) + ":");
    h.update(s);
  };
  field("ksearch-reference-v2");
  // The inputs: how they are drawn (the generator's source) and converted.
  field(KS_RNG_H_SHA256);
  field(kInputConversionRules);
  field(task.name);
  for (const auto& t : task.tensors) field(t.to_json().dump());
  field(workload.to_json().dump());
  // Inputs given as data are keyed by their content: a file may change.
  if (!workload.data.empty()) field(data_digest);
  field(std::to_string(seed));
  // The reference's code: its source, its parameter values, its flags.
  field(reference.solution.id);
  for (const auto& [k, v] : build.params) field(fmt::format("{}={}", k, v));
  field(std::to_string(reference.flags.size()));
  for (const auto& f : reference.flags) field(f);
  field(device.backend);
  field(device.name);
  field(device.arch);
  return h.hex_digest().substr(0, 32);
}

double speed_of_light_ms(const TaskSpec& task, const WorkloadSpec& workload, const DeviceInfo& device,
                         bool caches_flushed, std::string* explanation) {
  util::Vars dims;
  for (const auto& [k, v] : workload.dims) dims[k] = v;
  double flops = task.flops.empty() ? 0 : util::eval_double_expr(task.flops, dims);
  double bytes = task.bytes.empty() ? 0 : util::eval_double_expr(task.bytes, dims);
  double t_flops = device.peak_flops > 0 ? flops / device.peak_flops : 0;
  double t_bytes = caches_flushed && device.peak_bytes_per_s > 0 ? bytes / device.peak_bytes_per_s : 0;
  if (explanation) {
    if (t_flops >= t_bytes)
      *explanation = fmt::format("{:.4g} FLOP (task formula \"{}\") at a peak of {:.4g} FLOP/s", flops, task.flops,
                                 device.peak_flops);
    else
      *explanation = fmt::format("{:.4g} bytes (task formula \"{}\") at a peak of {:.4g} bytes/s", bytes,
                                 task.bytes, device.peak_bytes_per_s);
  }
  return std::max(t_flops, t_bytes) * 1e3;
}

EvaluationFlow::EvaluationFlow(Device& device, ReferenceStore& references)
    : device_(device), refs_(references), info_(device.info()) {}

namespace {

// Passes events on and remembers the candidate's step in progress, for a
// failure that ended only the candidate's own process: the worker lives on
// to say where it was (when the worker itself dies, its parent says it).
class StepTracker final : public FlowEvents {
 public:
  explicit StepTracker(FlowEvents& inner) : inner_(inner) {}
  void workload_started(const std::string& w) override {
    detail.clear();
    inner_.workload_started(w);
  }
  void phase(const std::string& w, const FlowPhase& p) override {
    if (!p.reference) detail = p.detail;
    inner_.phase(w, p);
  }
  void reference_timed(const std::string& w, const TimingStats& t) override { inner_.reference_timed(w, t); }
  void workload_finished(const WorkloadResult& r) override { inner_.workload_finished(r); }
  std::string detail;

 private:
  FlowEvents& inner_;
};

// The timed part of a benchmark workload, after its checks passed: the
// reference beside the candidate when it can be (else alone, when asked
// for, and the candidate), then the check of what the timed calls left, the
// re-check on fresh inputs and the speed-of-light bound.
std::optional<Failure> time_workload(WorkloadRun& run, WorkloadResult& r, const WorkloadContext& ctx,
                                     const WorkloadSpec& w, FlowEvents& events) {
  const RunRequest& req = ctx.req;
  if (run.can_pair()) {
    auto t = run.time_paired();
    r.timing = t.candidate;
    r.reference_timing = t.reference;
    r.paired = true;
    r.reference_ms = r.reference_timing.latency();
    events.reference_timed(w.name, r.reference_timing);
  } else {
    if (std::find(req.time_reference.begin(), req.time_reference.end(), w.name) != req.time_reference.end()) {
      TimingStats ref_t = run.time_reference();
      r.reference_ms = ref_t.latency();
      events.reference_timed(w.name, ref_t);
    }
    r.timing = run.time_candidate();
  }
  std::optional<Failure> failure = run.check_timed_calls();
  if (!failure && req.options.recheck_after_timing)
    failure = run.recheck(ks_rng_derive_seed(w.seed, static_cast<ks_u64>(req.options.seeds_per_workload)));
  std::string why;
  const bool flushed = req.options.flush_l2 && req.options.timing != TimingMode::upstream;
  const double bound = speed_of_light_ms(ctx.task, w, ctx.info, flushed, &why);
  // The bound holds for every statistic reported, the latency included: a
  // kernel whose fast calls skip the work (a copy of an earlier result) and
  // whose slow calls are left out (p10, or calls its own threads made look
  // disturbed) must not be ranked by the fast ones.
  const bool latency_lower = r.timing.latency() < r.timing.median_ms;
  const double fastest = latency_lower ? r.timing.latency() : r.timing.median_ms;
  if (!failure && bound > 0 && fastest < bound)
    failure = Failure{EvalStatus::invalid,
                      fmt::format("{} time {:.4g} ms is below the speed-of-light bound of {:.4g} ms "
                                  "({}); no correct kernel can be that fast, so the timed calls are not "
                                  "doing the work",
                                  latency_lower ? to_string(r.timing.statistic) : "median", fastest, bound, why)};
  return failure;
}

// What the candidate's programs in processes of their own (Python) report:
// their start and JIT (compile time: add_compile_info), stream escapes,
// how buffers reached them, and their isolation as the evaluator saw it.
void add_process_facts(EvalResult& result, const std::map<int, std::unique_ptr<Program>>& cand_programs) {
  Program::ProcessFacts facts;
  for (const auto& [idx, program] : cand_programs) {
    if (!program) continue;  // its load failed
    const auto f = program->process_facts();
    facts.start_s += f.start_s;
    facts.first_calls_s += f.first_calls_s;
    facts.build_s += f.build_s;
    facts.stream_escapes += f.stream_escapes;
    if (!f.buffers.empty()) facts.buffers = f.buffers;
    if (!f.isolation.empty()) facts.isolation = f.isolation;
  }
  if (facts.start_s > 0) result.metrics["process_start_s"] = facts.start_s;
  if (facts.first_calls_s > 0) result.metrics["first_calls_s"] = facts.first_calls_s;
  if (facts.build_s > 0) result.metrics["extension_build_s"] = facts.build_s;
  if (facts.stream_escapes > 0) result.metrics["stream_escapes"] = static_cast<std::int64_t>(facts.stream_escapes);
  if (!facts.buffers.empty()) result.metrics["gpu_buffers"] = facts.buffers;
  if (!facts.isolation.empty()) result.metrics["candidate_isolation"] = facts.isolation;
}

}  // namespace

EvalResult EvaluationFlow::run(const TaskSpec& task, const RunRequest& req, FlowEvents& outer_events) {
  StepTracker events(outer_events);
  EvalResult result;
  result.solution_id = req.candidate.solution.id;
  result.device = info_.name;
  result.metrics = Json::object();
  result.metrics["reference_runs"] = 0;
  const auto start = Clock::now();
  PhaseClock clock;
  phases_ = PhaseTimes{};
  const auto counters_before = refs_.counters();
  const int seeds = req.options.seeds_per_workload;
  const WorkloadContext ctx{device_, refs_, info_, task, req, events, clock, result.metrics};

  // Programs load once per build and are reused across workloads.
  std::map<int, std::unique_ptr<Program>> cand_programs, ref_programs;
  auto program_for = [&](std::map<int, std::unique_ptr<Program>>& cache, const PreparedSolution& p,
                         const PreparedSolution::Build& b, const std::string& workload) -> Program& {
    int idx = static_cast<int>(&b - p.builds.data());
    auto& slot = cache[idx];
    if (!slot) {
      // A build when loaded (an imported C++/CUDA Solution) is compile work:
      // it gets compile_timeout_s beyond the workload's run_timeout_s.
      if (b.artifact.builds_at_load)
        events.phase(workload, FlowPhase{"load", "loading the candidate: building its C++/CUDA extension",
                                         req.options.compile_timeout_s});
      auto phase = clock.enter(Phase::load);
      slot = device_.load(b.artifact, p.solution);
    }
    return *slot;
  };

  for (const auto& name : req.workloads) {
    const WorkloadSpec* w = task.find_workload(name);
    if (!w)
      throw Error(Status::invalid_argument,
                  fmt::format("evaluation request: task \"{}\" has no workload \"{}\"", task.name, name));
    const auto& cand_build = build_of(req.candidate, name, "candidate");
    // An oracle task has no reference program: the oracle supplies inputs and outputs.
    const bool oracle = req.oracle.count(name) > 0;
    static const PreparedSolution::Build kNoBuild{};
    const auto& ref_build = oracle ? kNoBuild : build_of(req.reference, name, "reference");
    events.workload_started(name);
    WorkloadResult r;
    std::optional<Failure> failure;
    // The step of the task's reference in progress, if any: a failure there
    // is the task's or the evaluator's, never the candidate's.
    std::string reference_step;
    // Out of memory anywhere in the workload (the candidate's scratch, the
    // reference's, the flush buffer, a module) is retried once after the
    // cached reference outputs have given their device memory back.
    for (int attempt = 0;; ++attempt) {
      r = WorkloadResult{};
      r.name = name;
      r.benchmark = w->benchmark;
      failure.reset();
      reference_step.clear();
      try {
        Program& cand = program_for(cand_programs, req.candidate, cand_build, name);
        Program* ref = nullptr;
        if (!oracle) {
          StepScope step(reference_step, "loading the reference");
          ref = &program_for(ref_programs, req.reference, ref_build, name);
        }
        WorkloadRun run(ctx, *w, {&cand, cand_build}, {ref, ref_build}, r, reference_step);
        run.prepare();
        for (int k = 0; k < seeds && !failure; ++k)
          failure = run.check(ks_rng_derive_seed(w->seed, static_cast<ks_u64>(k)), describe_seed(k, seeds, false));
        if (!failure && w->benchmark) failure = time_workload(run, r, ctx, *w, events);
        break;
      } catch (const FailureError& e) {
        if (e.failure().out_of_memory && attempt == 0 && refs_.release_memory() > 0) continue;
        note_device_error(e.failure());
        if (!reference_step.empty()) throw reference_fault(task, name, reference_step, e.what());
        failure = e.failure();
        if (failure->contained && !events.detail.empty() &&
            (failure->status == EvalStatus::crashed || failure->status == EvalStatus::memory_limit))
          failure->message += fmt::format(" ({})", events.detail);
        break;
      } catch (const Error&) {
        throw;  // the request or the task is at fault, not the candidate
      } catch (const std::exception& e) {
        if (!reference_step.empty()) throw reference_fault(task, name, reference_step, e.what());
        failure = Failure{EvalStatus::runtime_error, fmt::format("the kernel threw an exception: {}", e.what())};
        break;
      } catch (...) {
        if (!reference_step.empty())
          throw reference_fault(task, name, reference_step, "an exception of unknown type");
        failure = Failure{EvalStatus::runtime_error, "the kernel threw an exception of unknown type"};
        break;
      }
    }
    if (failure) {
      failure->record(r);
      // What only the whole result has room for: a contained crash's output.
      if (!failure->log.empty() && failure->status != EvalStatus::compile_error)
        result.log = failure->message + "\n\n" + failure->log;
    }
    events.workload_finished(r);
    result.workloads.push_back(r);
    if (r.status != EvalStatus::passed) {
      result.status = r.status;
      break;
    }
  }
  add_process_facts(result, cand_programs);
  const auto& c = refs_.counters();
  result.metrics["reference_memory_hits"] = c.memory_hits - counters_before.memory_hits;
  result.metrics["reference_file_hits"] = c.file_hits - counters_before.file_hits;
  result.metrics["run_s"] = seconds_since(start);
  phases_ = clock.read();
  return result;
}

void Failure::record(WorkloadResult& w) const {
  w.status = status;
  w.message = message;
}

void Failure::record(EvalResult& r) const {
  r.status = status;
  r.log = log.empty() || log == message ? message : message + "\n\n" + log;
}

// Only an error that may have left the device unusable or its memory
// untrustworthy costs the worker (and the reference outputs it keeps): a
// crash, a sticky CUDA error, a write out of bounds. Plan-binding errors,
// running out of memory and ordinary launch errors leave it as it was.
void EvaluationFlow::note_device_error(const Failure& f) {
  if (f.contained) return;  // only the candidate's own process ended
  if (f.status == EvalStatus::crashed || f.memory_corrupted || !device_.usable()) device_suspect_ = true;
}

Error EvaluationFlow::reference_fault(const TaskSpec& task, const std::string& workload, const std::string& step,
                                      const std::string& what) {
  return Error(Status::invalid_argument,
               fmt::format("task \"{}\", workload \"{}\": the task's reference failed while {}: {}; the task or the "
                           "evaluator is at fault, not the candidate",
                           task.name, workload, step, what));
}

}  // namespace ks::eval
