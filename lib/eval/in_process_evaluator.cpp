// The in-process evaluator: the same flow as the workers, in the calling
// process. For trusted kernels only: a crash takes the process down and a
// hang is not interrupted (run_timeout_s does not apply).
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include "eval/evaluator_common.hpp"
#include "eval/flow.hpp"
#include "eval/host/host_compiler.hpp"
#include "eval/python/python_program.hpp"
#include "eval/host/host_device.hpp"
#include "eval/phases.hpp"
#include "eval/process_evaluator.hpp"
#include "eval/reference_store.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "util/fs.hpp"
#if KS_HAVE_CUDA_BACKEND
#include "eval/cuda/cuda_backend.hpp"
#endif

namespace ks::eval {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;


// Collects what the flow reports; nothing needs streaming in-process.
class CollectEvents final : public FlowEvents {
 public:
  void workload_started(const std::string&) override {}
  void reference_timed(const std::string& w, const TimingStats& t) override { reference_ms[w] = t.latency(); }
  void workload_finished(const WorkloadResult&) override {}
  std::map<std::string, double> reference_ms;
};

// A device with its reference store (the store frees into the device, so it
// must go first).
struct DeviceSlot {
  std::unique_ptr<Device> device;
  std::unique_ptr<ReferenceStore> refs;
  DeviceInfo info;
};

class InProcessEvaluator final : public Evaluator {
 public:
  explicit InProcessEvaluator(const EvaluatorConfig& config)
      : config_(config),
        options_(config.options),
        cache_dir_(config.cache_dir.empty() ? util::default_cache_dir() : config.cache_dir),
        host_compiler_(host::make_host_compiler({.compiler = "", .cache_dir = (cache_dir_ / "host").string()})),
        ref_times_(cache_dir_ / "reference-times") {
    validate_config_sets(config);
    util::make_dirs(cache_dir_);
  }

  ~InProcessEvaluator() override {
    for (auto* s : {&host_, &cuda_}) s->refs.reset();
  }

  EvalResult evaluate(const Task& task, const Solution& solution) override {
    const auto start = Clock::now();
    if (cancelled_.load()) throw Error(Status::cancelled, "the evaluator was cancelled");
    std::lock_guard lock(mu_);
    const TaskSpec& spec = task.spec();
    if (!spec.oracle.is_null())
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\" takes its inputs and reference outputs from an oracle process; evaluate it "
                              "with worker processes (in_process off)",
                              spec.name));
    validate_options(options_);
    const EvalOptions opts = options_;
    const auto workloads = select_workloads(spec, opts);
    const Backend backend = backend_for(solution.language, config_.backend, [] {
      std::string why;
      return cuda_available(&why);
    }());
    check_solution_fits(spec, solution, backend);
    // The same phases as the process evaluator's; opening the device (a
    // CUDA context) stands for a worker's start.
    PhaseTimes phases;
    auto finish = [&](EvalResult& r) {
      phases.wall_s = seconds_since(start);
      r.metrics["phases"] = phases.to_json();
    };
    auto t0 = Clock::now();
    DeviceSlot& slot = device_slot(backend);
    phases[Phase::worker_start] = seconds_since(t0);
    const std::string key = task_key(spec);
    t0 = Clock::now();
    const PreparedSolution& ref = reference_for(spec, key, reference_language(backend), opts, slot);
    phases[Phase::reference_compile] = seconds_since(t0);
    t0 = Clock::now();
    auto prepared = prepare_solution(spec, solution, workloads, opts, arch_for(solution.language, slot),
                                     cache_dir_for(solution.language), compile_fn(solution.language, slot));
    phases[Phase::compile] = seconds_since(t0);
    if (auto* failed = std::get_if<EvalResult>(&prepared)) {
      failed->device = slot.info.name;
      finish(*failed);
      return *failed;
    }
    auto& p = std::get<PreparedSolution>(prepared);
    RunRequest req;
    req.candidate = p;
    req.reference = ref;
    req.options = opts;
    req.workloads = workloads;
    const std::string timing_device = timing_identity(slot.info, ref, opts, true);
    if (opts.time_reference) req.time_reference = ref_times_.missing(spec, key, timing_device, workloads);
    EvaluationFlow flow(*slot.device, *slot.refs);
    CollectEvents events;
    EvalResult r;
    try {
      r = flow.run(spec, req, events);
    } catch (const Error&) {
      // The task's reference failed; a CUDA context it broke is opened again.
      if (!slot.device->usable()) {
        slot.refs.reset();
        slot.device.reset();
      }
      throw;
    }
    phases += flow.phases();
    for (const auto& [w, ms] : events.reference_ms) ref_times_.put(key, timing_device, w, ms);
    ref_times_.apply(r, key, timing_device);
    add_compile_info(r, p);
    // A device error may leave a CUDA context unusable: open it again.
    if (flow.device_suspect() && backend == Backend::cuda) {
      slot.refs.reset();
      slot.device.reset();
    }
    finish(r);
    return r;
  }

  DeviceInfo device() const override {
    std::lock_guard lock(mu_);
    auto* self = const_cast<InProcessEvaluator*>(this);
    std::string why;
    if (config_.backend == EvalBackend::host ||
        (config_.backend == EvalBackend::automatic && !cuda_available(&why)))
      return host::host_device_info(false);
    return self->device_slot(Backend::cuda).info;
  }

  EvalOptions& options() override { return options_; }

  // A kernel running in this process cannot be interrupted: the run stops
  // when it returns (the engine drops its result).
  void cancel() override { cancelled_.store(true); }

 private:
  std::atomic<bool> cancelled_{false};
  DeviceSlot& device_slot(Backend b) {
    DeviceSlot& s = b == Backend::cuda ? cuda_ : host_;
    if (s.device) return s;
    if (b == Backend::host) {
      s.device = std::make_unique<host::HostDevice>();
    } else {
#if KS_HAVE_CUDA_BACKEND
      std::string why;
      if (!cuda_available(&why)) throw Error(Status::no_device, "CUDA evaluation is not possible here: " + why);
      s.device = make_cuda_device(config_.devices.empty() ? 0 : config_.devices.front(), {}, (cache_dir_ / "cuda-runtime").string());
#else
      throw Error(Status::no_device, "this build of libksearch has no CUDA backend");
#endif
    }
    s.info = s.device->info();
    s.refs = std::make_unique<ReferenceStore>(*s.device, cache_dir_ / "refs", reference_budget(s.info));
    return s;
  }

  std::string arch_for(Language l, const DeviceSlot& slot) const {
    if (l != Language::cuda) return "";
    return config_.cuda_arch.empty() ? slot.info.arch : config_.cuda_arch;
  }

  std::string cache_dir_for(Language l) const { return (cache_dir_ / cache_folder(l)).string(); }

  CompileFn compile_fn(Language l, const DeviceSlot& slot) {
    if (l == Language::cpp) return [this](const CompileRequest& r) { return host_compiler_->compile(r); };
    if (language_is_python(l)) {
      auto compiler = std::shared_ptr<Compiler>(python::make_python_compiler(cache_dir_for(l)));
      return [compiler](const CompileRequest& r) { return compiler->compile(r); };
    }
#if KS_HAVE_CUDA_BACKEND
    if (!cuda_compiler_) {
      CudaCompilerOptions o;
      o.arch = arch_for(l, slot);
      o.cache_dir = cache_dir_for(l);
      cuda_compiler_ = make_cuda_compiler(o);
    }
    return [this](const CompileRequest& r) { return cuda_compiler_->compile(r); };
#else
    (void)slot;
    throw Error(Status::no_device, "this build of libksearch has no CUDA backend");
#endif
  }

  const PreparedSolution& reference_for(const TaskSpec& spec, const std::string& key, Language l,
                                        const EvalOptions& opts, const DeviceSlot& slot) {
    const std::string rkey = key + "/" + ks::to_string(l);
    if (auto it = references_.find(rkey); it != references_.end()) return it->second;
    PreparedSolution ref =
        prepare_reference(spec, l, opts, arch_for(l, slot), cache_dir_for(l), compile_fn(l, slot));
    return references_.emplace(rkey, std::move(ref)).first->second;
  }

  EvaluatorConfig config_;
  EvalOptions options_;
  fs::path cache_dir_;
  mutable std::mutex mu_;
  std::unique_ptr<Compiler> host_compiler_;
  std::unique_ptr<Compiler> cuda_compiler_;
  DeviceSlot host_, cuda_;
  std::map<std::string, PreparedSolution> references_;
  ReferenceTimes ref_times_;
};

}  // namespace

std::unique_ptr<Evaluator> make_in_process_evaluator(const EvaluatorConfig& config) {
  return std::make_unique<InProcessEvaluator>(config);
}

}  // namespace ks::eval
