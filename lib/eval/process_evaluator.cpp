#include "eval/process_evaluator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "eval/deadline.hpp"
#include "eval/evaluator_common.hpp"
#include "eval/flow.hpp"
#include "eval/host/host_compiler.hpp"
#include "eval/python/python_program.hpp"
#include "eval/host/host_device.hpp"
#include "eval/messages.hpp"
#include "eval/oracle_client.hpp"
#include "eval/phases.hpp"
#include "eval/isolation/sandbox.hpp"
#include "eval/thread_pool.hpp"
#include "eval/worker_client.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/log.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "util/fs.hpp"
#if KS_HAVE_CUDA_BACKEND
#include "eval/cuda/cuda_backend.hpp"
#endif

namespace ks::eval {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kStartTimeoutS = 60;       // a CUDA context can take seconds to create
constexpr double kLoadGraceS = 10;          // loading the candidate, before the first workload
constexpr int kMaxBuildsPerWorker = 256;    // loaded shared objects are never unloaded; recycle
constexpr double kCompileGraceS = 5;        // NVRTC's own cancellation comes first

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}


// Charges a worker's start to `into`: the part before its main() to
// sandbox_setup, the rest (its own start-up, the hello) to worker_start.
void charge_start(PhaseTimes& into, const WorkerProcess& w, double total_s) {
  const double to_main = std::min(w.start_times().to_main_s, total_s);
  into[Phase::sandbox_setup] += to_main;
  into[Phase::worker_start] += total_s - to_main;
}

// What starting CUDA compile workers cost the compilations of this thread:
// a compile job reads it to tell a worker's start from the compilation.
thread_local PhaseTimes t_compile_worker_starts;

// One run worker bound to one device, restarted after every crash.
class RunSlot {
 public:
  // `arch`: a CUDA device's architecture (its own kernels are compiled for it); empty for the host.
  RunSlot(fs::path exe, std::string device_spec, std::string arch, fs::path cache_dir, const isolation::Sandbox& sandbox,
          std::uint64_t memory_limit_bytes, const std::atomic<bool>& cancelled)
      : exe_(std::move(exe)),
        device_(std::move(device_spec)),
        arch_(std::move(arch)),
        cache_dir_(std::move(cache_dir)),
        sandbox_(sandbox),
        memory_limit_bytes_(memory_limit_bytes),
        cancelled_(cancelled) {}

  const DeviceInfo& info() {
    ensure_started();
    return info_;
  }
  const std::string& device_spec() const { return device_; }

  struct Outcome {
    EvalResult result;
    std::map<std::string, TimingStats> reference_times;
    // The worker's phases, and the protocol's round trip (transfers): the
    // time from the request to the result less the worker's own; nothing
    // when the worker died or hung.
    PhaseTimes phases;
  };

  // The starts of this slot's worker since the last call, by phase
  // (worker_start, sandbox_setup): what they cost an evaluation.
  PhaseTimes take_starts() { return std::exchange(starts_, PhaseTimes{}); }
  double starts_so_far() const { return starts_.sum(); }

  Outcome run(const std::string& key, const TaskSpec& task, const RunRequest& req) {
    // A worker that died while idle (killed from outside?) must not be
    // blamed on the next candidate.
    if (worker_ && !worker_->running()) reset();
    // A sandboxed worker sees only the folders it was started with: one that
    // must read a workload's data files (a FlashInfer dataset's safetensors)
    // starts again with their folders visible, read-only.
    bool more = false;
    for (const auto& w : task.workloads)
      for (const auto& [name, d] : w.data)
        if (d.from_file()) {
          fs::path f = fs::path(d.file).is_absolute() ? fs::path(d.file) : task.base_dir / d.file;
          more = data_folders_.insert(fs::absolute(f).lexically_normal().parent_path()).second || more;
        }
    if (more && worker_ && sandbox_.active()) reset();
    ensure_started();
    msg::Evaluate evaluate{key, std::nullopt, req};
    if (!tasks_sent_.count(key)) evaluate.task = task;
    auto sent = Clock::now();  // the round trip starts
    try {
      worker_->send(evaluate);
    } catch (const Error&) {
      // The idle worker died (killed from outside?): one fresh start.
      reset();
      ensure_started();
      evaluate.task = task;
      sent = Clock::now();
      worker_->send(evaluate);
    }
    tasks_sent_.insert(key);

    Outcome out;
    EvalResult& r = out.result;
    r.solution_id = req.candidate.solution.id;
    r.device = info_.name;
    std::string current;  // the workload in progress
    Deadline deadline(req.options.run_timeout_s, kLoadGraceS, Clock::now());
    for (;;) {
      Json frame;
      WorkerProcess::Received got;
      std::string corrupt;  // why the stream from the worker cannot be read any more
      try {
        got = worker_->receive(frame, deadline.at(), &cancelled_);
      } catch (const Error& e) {
        // Bytes that are no frame: something in the worker (a candidate, on
        // the host) wrote to the protocol's descriptor. The stream cannot be
        // resynchronised, so the worker goes, like one that crashed.
        got = WorkerProcess::Received::exited;
        corrupt = e.what();
      }
      if (got == WorkerProcess::Received::message) {
        msg::Reply reply;
        try {
          reply = msg::reply_from_json(frame);
        } catch (const Error&) {
          reset();
          throw;
        }
        if (auto* started = std::get_if<msg::WorkloadStarted>(&reply)) {
          current = started->workload;
          deadline.workload_started(Clock::now());
        } else if (auto* p = std::get_if<msg::Phase>(&reply)) {
          deadline.enter(std::move(p->phase), Clock::now());
        } else if (auto* timed = std::get_if<msg::ReferenceTimed>(&reply)) {
          out.reference_times[timed->workload] = timed->timing;
        } else if (auto* finished_workload = std::get_if<msg::WorkloadFinished>(&reply)) {
          r.workloads.push_back(std::move(finished_workload->result));
          current.clear();
        } else if (auto* finished = std::get_if<msg::Finished>(&reply)) {
          if (finished->phases) {
            out.phases += *finished->phases;
            out.phases[Phase::transfers] += std::max(0.0, seconds_since(sent) - finished->phases->wall_s);
          }
          EvalResult& fin = finished->result;
          r.status = fin.status;
          r.metrics = fin.metrics;
          // The PID as this process sees it (a sandboxed worker counts from 2 in its own namespace).
          r.metrics["worker_pid"] = static_cast<int>(worker_->pid());
          if (!fin.log.empty()) r.log = fin.log;
          builds_loaded_ = static_cast<int>(fin.metrics.get_int("worker_loaded_builds"));
          // After a device error (possibly a sticky CUDA error), or once the
          // worker holds many loaded candidates, start afresh next time.
          if (finished->restart || builds_loaded_ >= kMaxBuildsPerWorker) reset();
          return out;
        } else if (auto* failed = std::get_if<msg::Failed>(&reply)) {
          // The request failed as a whole (a malformed request, or the task's
          // reference failed): the worker's device may be in any state, so
          // the next candidate gets a fresh one.
          reset();
          throw Error(failed->status, failed->message);
        } else {
          reset();
          throw Error(Status::subprocess,
                      fmt::format("ksearch-worker sent an unexpected \"{}\" event", msg::name_of(reply)));
        }
        continue;
      }
      if (got == WorkerProcess::Received::cancelled) {
        // The run was cancelled: the candidate's result no longer matters
        // (it is not journalled), the worker and what it runs go now.
        worker_->kill_and_describe();
        reset();
        throw Error(Status::cancelled, "the evaluation was cancelled; its worker process was killed");
      }
      // The worker died or hung: record it against the workload in progress.
      record_lost_worker(out, task, current, deadline, got == WorkerProcess::Received::timed_out, corrupt);
      return out;
    }
  }

 private:
  // The worker died or hung (`hung`) while `current` ran ("": while loading
  // the candidate): the result says so, with what the step was allowed; a
  // reference that did it throws instead. `corrupt`: why the stream from the
  // worker could not be read, when that ended it.
  void record_lost_worker(Outcome& out, const TaskSpec& task, const std::string& current, const Deadline& deadline,
                          bool hung, const std::string& corrupt) {
    EvalResult& r = out.result;
    std::string how = worker_->kill_and_describe();
    const bool memory_limit = !hung && worker_->hit_memory_limit();
    if (!corrupt.empty())
      how = fmt::format("killed, because something in it (the candidate?) corrupted the worker protocol: "
                        "{}; a kernel must not write to file descriptors it did not open",
                        corrupt);
    reset();
    ++restarts_;
    const FlowPhase& phase = deadline.step();
    if (!current.empty() && phase.reference) {
      // The task's reference hung or took the worker down: not the candidate's doing.
      std::string what =
          hung ? fmt::format("did not finish within {:.3g} s while {}; the worker was killed",
                             deadline.reference_allowed_s(), phase.detail)
               : fmt::format("ended the worker while {}: {}", phase.detail, how);
      throw Error(hung ? Status::timeout : Status::subprocess,
                  fmt::format("task \"{}\", workload \"{}\": the task's reference {}; the task or the evaluator "
                              "is at fault, not the candidate",
                              task.name, current, what));
    }
    EvalStatus status = hung ? EvalStatus::timeout : memory_limit ? EvalStatus::memory_limit : EvalStatus::crashed;
    const double limit = deadline.limit_s(), allowed = deadline.allowed_s();
    const std::string extra =
        allowed > limit ? fmt::format(" (run_timeout_s of {:.3g} s plus {:.3g} s for timing)", limit, allowed - limit)
                        : "";
    std::string message =
        hung ? (current.empty()
                    ? fmt::format("loading the candidate did not finish within {:.3g} s; the worker was killed",
                                  deadline.load_allowed_s())
                    : fmt::format("did not finish within {:.3g} s{}; the worker was killed while {} (an endless "
                                  "loop, a deadlock, or a kernel far too slow for this workload)",
                                  allowed, extra, phase.detail))
        : memory_limit
             ? fmt::format("the candidate reached the memory limit of {} MiB per host candidate while running this "
                           "{}{} (an allocation failed); use less memory, or raise the limit (--memory-limit): {}",
                           memory_limit_bytes_ >> 20, current.empty() ? "candidate" : "workload",
                           current.empty() ? "" : " (" + phase.detail + ")", how)
             : fmt::format("the worker process {} while running this {}{}: {}", corrupt.empty() ? "died" : "ended",
                           current.empty() ? "candidate" : "workload",
                           current.empty() ? "" : " (" + phase.detail + ")", how);
    if (!current.empty()) {
      WorkloadResult w;
      w.name = current;
      const WorkloadSpec* spec = task.find_workload(current);
      w.benchmark = spec && spec->benchmark;
      Failure{status, message}.record(w);
      r.workloads.push_back(w);
    }
    Failure{status, hung ? message : "worker " + how}.record(r);
    r.metrics = Json::obj({{"worker_restarted", true}});
  }

 public:
  int restarts() const { return restarts_; }
  pid_t pid() const { return worker_ ? worker_->pid() : -1; }

  // Whether this slot's worker can open a reference oracle's tensor `t`;
  // `why` says why not.
  bool probe_external(const ExternalTensor& t, std::string* why) {
    if (worker_ && !worker_->running()) reset();
    ensure_started();
    worker_->send(msg::ProbeExternal{t});
    Json frame;
    auto got = worker_->receive(frame, after(kStartTimeoutS));
    if (got != WorkerProcess::Received::message) {
      if (why) *why = "the worker " + worker_->kill_and_describe();
      reset();
      return false;
    }
    const msg::Reply reply = msg::reply_from_json(frame);
    if (std::holds_alternative<msg::ExternalOk>(reply)) return true;
    if (why) {
      const auto* failed = std::get_if<msg::Failed>(&reply);
      *why = failed ? failed->message : fmt::format("the worker answered \"{}\"", msg::name_of(reply));
    }
    return false;
  }

 private:
  // A CUDA worker runs only trusted host code (candidates are device code):
  // it keeps reference outputs on disk. A host worker's candidates run in
  // processes of its own that see the files it sees, so in a sandbox it keeps
  // no reference files, and it hands them the memory limit.
  void ensure_started() {
    if (worker_) return;
    const auto t0 = Clock::now();
    std::vector<std::string> args{"--role", "run", "--device", device_, "--cache-dir", cache_dir_.string()};
    isolation::SandboxView view;
    const fs::path refs = cache_dir_ / "refs";
    // A reference oracle's file handover (KernelBench tasks) is read here.
    view.read_only.push_back(cache_dir_ / "kernelbench");
    if (device_ == "host") {
      view.read_only.push_back(cache_dir_ / "host");
      if (sandbox_.active()) args.insert(args.end(), {"--refs-dir", "none"});
      args.insert(args.end(), {"--memory-limit", std::to_string(memory_limit_bytes_)});
    } else {
      view.read_only.push_back(cache_dir_ / "cuda");
      // Its own kernels (inputs, poisoning, comparison), which judge every
      // candidate: compiled here, by this trusted process, into a folder no
      // compile worker may write and the worker may only read. Part of its
      // start (worker_start_s); a cache hit after the first time.
#if KS_HAVE_CUDA_BACKEND
      ensure_cuda_runtime_kernels(arch_, (cache_dir_ / "cuda-runtime").string());
#endif
      view.read_only.push_back(cache_dir_ / "cuda-runtime");
      view.read_write.push_back(refs);
      view.gpu = true;
      // Not RLIMIT_AS (CUDA reserves far more than it uses): the limit on what its Python candidates hold.
      args.insert(args.end(), {"--python-memory-limit", std::to_string(memory_limit_bytes_)});
    }
    // Python candidates' artifacts, and the interpreter they run under; the
    // libraries of C++/CUDA Solutions the worker built and keeps
    // (python_program.cpp's ExtensionCache). Candidates see none of it.
    view.read_only.push_back(cache_dir_ / "python");
    view.read_write.push_back(cache_dir_ / "python" / "ext");
    if (const std::string python = python::python_interpreter(); !python.empty()) {
      args.insert(args.end(), {"--python", python});
      for (const auto& d : isolation::program_folders(python)) view.read_only.push_back(d);
    }
    if (sandbox_.active()) args.emplace_back("--sandboxed");
    for (const auto& d : view.read_only) util::make_dirs(d);  // the cache's folders, before binding them
    for (const auto& d : view.read_write) util::make_dirs(d);
    for (const auto& d : data_folders_) view.read_only.push_back(d);
    auto w = std::make_unique<WorkerProcess>(exe_, args, &sandbox_, view);
    msg::Hello hello = w->wait_hello(kStartTimeoutS);
    if (!hello.device)
      throw Error(Status::subprocess, fmt::format("ksearch-worker (role \"{}\") named no device in its hello", hello.role));
    info_ = *hello.device;
    worker_ = std::move(w);
    charge_start(starts_, *worker_, seconds_since(t0));
  }
  void reset() {
    worker_.reset();
    tasks_sent_.clear();
    builds_loaded_ = 0;
  }

  fs::path exe_;
  std::string device_;
  std::string arch_;
  fs::path cache_dir_;
  const isolation::Sandbox& sandbox_;
  std::uint64_t memory_limit_bytes_;
  const std::atomic<bool>& cancelled_;
  std::set<fs::path> data_folders_;  // folders of workload data files the worker reads
  std::unique_ptr<WorkerProcess> worker_;
  DeviceInfo info_;
  std::set<std::string> tasks_sent_;
  int builds_loaded_ = 0;
  int restarts_ = 0;
  PhaseTimes starts_;  // see take_starts
};

// Long-lived CUDA compile workers (NVRTC and its precompiled headers stay
// warm), at most `max_workers`, each used by one compilation at a time.
class CudaCompileService {
 public:
  CudaCompileService(fs::path exe, fs::path cache_dir, int max_workers, const isolation::Sandbox& sandbox,
                     const std::atomic<bool>& cancelled)
      : exe_(std::move(exe)),
        cache_dir_(std::move(cache_dir)),
        max_(std::max(1, max_workers)),
        sandbox_(sandbox),
        cancelled_(cancelled) {}

  Artifact compile(const CompileRequest& req) {
    const msg::Request request = msg::Compile{req};
    // NVRTC cancels itself at the time limit (the flow callback); the worker
    // is killed only if that did not work out, a few seconds later.
    const double limit = req.timeout_s > 0 ? req.timeout_s + kCompileGraceS : 1e9;
    for (int attempt = 0;; ++attempt) {
      Lease w(*this, acquire());
      Json frame;
      WorkerProcess::Received got;
      try {
        w->send(request);
        got = w->receive(frame, after(limit), &cancelled_);
      } catch (const Error&) {
        // An idle worker that died (killed from outside?) or a corrupt
        // stream: the lease kills it and frees its place; one fresh try.
        if (attempt == 0) continue;
        throw;
      }
      if (got == WorkerProcess::Received::cancelled) {
        w.kill();
        throw Error(Status::cancelled, "the compilation was cancelled; its compiler process was killed");
      }
      if (got == WorkerProcess::Received::timed_out) {
        w.kill();
        throw CompileError(fmt::format("compilation did not finish within {:.3g} s (the compiler was killed)",
                                       req.timeout_s),
                           "");
      }
      if (got == WorkerProcess::Received::exited) {
        std::string how = w.kill();
        // A worker killed from outside can still take a request while its
        // last threads wind down; the candidate is to blame only when a
        // fresh compiler dies on it too.
        if (attempt == 0) continue;
        throw CompileError("the CUDA compiler process died twice on this candidate: " + how, how);
      }
      w.give_back();
      msg::Reply reply = msg::reply_from_json(frame);
      if (auto* compiled = std::get_if<msg::Compiled>(&reply)) return std::move(compiled->artifact);
      if (const auto* failed = std::get_if<msg::CompileFailed>(&reply)) throw CompileError(failed->message, failed->log);
      if (const auto* failed = std::get_if<msg::Failed>(&reply))
        throw Error(failed->status, failed->message.empty() ? "the CUDA compile worker failed" : failed->message);
      throw Error(Status::subprocess,
                  fmt::format("the CUDA compile worker sent an unexpected \"{}\" event", msg::name_of(reply)));
    }
  }

 private:
  // A worker out of the pool. Unless given back, it is killed and its place
  // freed, however the compilation ends (exceptions included): a lost place
  // would make acquire() wait forever once all are lost.
  class Lease {
   public:
    Lease(CudaCompileService& service, std::unique_ptr<WorkerProcess> w) : service_(service), w_(std::move(w)) {}
    ~Lease() {
      if (w_) kill();
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    WorkerProcess* operator->() const { return w_.get(); }
    void give_back() { service_.release(std::move(w_)); }
    std::string kill() {
      std::string how = w_->kill_and_describe();
      w_.reset();
      service_.lost();
      return how;
    }

   private:
    CudaCompileService& service_;
    std::unique_ptr<WorkerProcess> w_;
  };

  std::unique_ptr<WorkerProcess> acquire() {
    std::unique_lock lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return !idle_.empty() || live_ < max_; });
      if (idle_.empty()) break;
      auto w = std::move(idle_.back());
      idle_.pop_back();
      if (w->running()) return w;
      --live_;  // it died while idle (killed from outside?): its place is free again
    }
    ++live_;
    lock.unlock();
    try {
      // NVRTC sees the candidate's source: it writes only the cubin cache, and
      // its precompiled headers go to the sandbox's private /tmp (every
      // compile worker is process 2 of its own PID namespace there).
      std::vector<std::string> args{"--role", "compile", "--cache-dir", cache_dir_.string()};
      isolation::SandboxView view;
      view.read_write.push_back(cache_dir_ / "cuda");
      util::make_dirs(cache_dir_ / "cuda");
      if (sandbox_.active()) args.insert(args.end(), {"--pch-dir", "/tmp/ksearch-pch"});
      const auto t0 = Clock::now();
      auto w = std::make_unique<WorkerProcess>(exe_, args, &sandbox_, view);
      w->wait_hello(kStartTimeoutS);
      charge_start(t_compile_worker_starts, *w, seconds_since(t0));
      return w;
    } catch (...) {
      lost();
      throw;
    }
  }
  void release(std::unique_ptr<WorkerProcess> w) {
    {
      std::lock_guard lock(m_);
      idle_.push_back(std::move(w));
    }
    cv_.notify_one();
  }
  void lost() {
    {
      std::lock_guard lock(m_);
      --live_;
    }
    cv_.notify_one();
  }

  fs::path exe_, cache_dir_;
  int max_;
  const isolation::Sandbox& sandbox_;
  const std::atomic<bool>& cancelled_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<WorkerProcess>> idle_;
  int live_ = 0;
};

// config.sandbox, checked (with the backend) before the sandbox is made.
SandboxMode checked_sandbox_mode(const EvaluatorConfig& config) {
  validate_config_sets(config);
  return config.sandbox;
}

int default_compile_workers(int configured) {
  if (configured > 0) return configured;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

class ProcessEvaluator final : public Evaluator {
 public:
  explicit ProcessEvaluator(const EvaluatorConfig& config)
      : config_(config),
        options_(config.options),
        worker_exe_(locate_worker(config.worker_path)),
        cache_dir_(fs::absolute(config.cache_dir.empty() ? util::default_cache_dir() : config.cache_dir)),
        sandbox_(checked_sandbox_mode(config)),
        memory_limit_bytes_(config.memory_limit_bytes ? config.memory_limit_bytes : default_memory_limit_bytes()),
        host_compiler_(host::make_host_compiler({.compiler = "",
                                                 .cache_dir = (cache_dir_ / "host").string(),
                                                 .sandbox = &sandbox_,
                                                 .cancel = &cancelled_})),
        ref_times_(cache_dir_ / "reference-times"),
        pool_(default_compile_workers(config.compile_workers)) {
    util::make_dirs(cache_dir_);
  }

  EvalResult evaluate(const Task& task, const Solution& solution) override {
    return evaluate_batch(task, {solution}).front();
  }

  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& solutions) override {
    // Every result's wall_s counts from here (in a batch, waiting for a
    // device while earlier candidates run is in its other_s).
    const auto batch_start = Clock::now();
    if (cancelled_.load()) throw Error(Status::cancelled, "the evaluator was cancelled");
    std::lock_guard lock(mu_);
    const TaskSpec& spec = task.spec();
    validate_options(options_);
    const EvalOptions opts = options_;
    const std::vector<std::string> workloads = select_workloads(spec, opts);
    const std::string key = task_key(spec);
    // Configuration errors surface before any work starts.
    std::vector<Backend> backend(solutions.size());
    std::set<Language> languages;
    for (std::size_t i = 0; i < solutions.size(); ++i) {
      backend[i] = backend_for(solutions[i].language, config_.backend, cuda_usable());
      check_solution_fits(spec, solutions[i], backend[i]);
      languages.insert(reference_language(backend[i]));
      if (language_is_python(solutions[i].language))
        if (std::string problem = python::python_problem(solutions[i].language, backend[i] == Backend::cuda);
            !problem.empty())
          throw Error(Status::not_found, problem);
    }
    if (languages.count(Language::cuda)) ensure_cuda_slots();
    // An oracle task has no reference program: its oracle supplies the data.
    const bool oracle_task = !spec.oracle.is_null();
    std::map<Language, const PreparedSolution*> references;
    static const PreparedSolution kNoReference{};
    // A reference compiled now is charged to the first candidate that needs it.
    std::map<Language, PhaseTimes> reference_phases;
    for (Language l : languages) {
      if (oracle_task) {
        references[l] = &kNoReference;
        continue;
      }
      const std::size_t known = references_.size();
      t_compile_worker_starts = PhaseTimes{};
      const auto t0 = Clock::now();
      references[l] = &reference_for(spec, key, l, opts);
      if (references_.size() > known) {
        PhaseTimes& p = reference_phases[l];
        p = std::exchange(t_compile_worker_starts, PhaseTimes{});
        p[Phase::reference_compile] = std::max(0.0, seconds_since(t0) - p.sum());
      }
    }
    std::map<Language, std::size_t> first_of;  // the first candidate checked against each reference
    for (std::size_t i = solutions.size(); i-- > 0;) first_of[reference_language(backend[i])] = i;

    // Compile everything on the pool; measurement starts as soon as the first is ready.
    // Everything a job needs is worked out here, on this thread: the jobs
    // must not touch the run slots, whose workers their own threads drive.
    // Each job notes what its compilation cost (the compile phase, and the
    // start of a CUDA compile worker when one had to start), read after get().
    std::vector<PhaseTimes> compile_phases(solutions.size());
    std::vector<std::future<std::variant<PreparedSolution, EvalResult>>> compiled;
    for (std::size_t i = 0; i < solutions.size(); ++i) {
      const Language l = solutions[i].language;
      compiled.push_back(pool_.submit([&, i, arch = arch_for(l), dir = cache_dir_for(l), compile = compile_fn(l)] {
        t_compile_worker_starts = PhaseTimes{};
        const auto t0 = Clock::now();
        auto out = prepare_solution(spec, solutions[i], workloads, opts, arch, dir, compile);
        PhaseTimes& p = compile_phases[i];
        p = std::exchange(t_compile_worker_starts, PhaseTimes{});
        p[Phase::compile] = std::max(0.0, seconds_since(t0) - p.sum());
        return out;
      }));
    }
    // Whatever happens below, no pool job may outlive the locals it reads.
    struct WaitAll {
      std::vector<std::future<std::variant<PreparedSolution, EvalResult>>>& f;
      ~WaitAll() {
        for (auto& x : f)
          if (x.valid()) x.wait();
      }
    } wait_all{compiled};

    std::vector<EvalResult> results(solutions.size());
    auto run_one = [&](RunSlot& slot, std::size_t i) {
      auto prepared = compiled[i].get();
      PhaseTimes phases = compile_phases[i];
      if (const Language l = reference_language(backend[i]); first_of.at(l) == i && reference_phases.count(l))
        phases += reference_phases.at(l);
      slot.take_starts();  // a start outside any evaluation (device()) is no one's
      // Whatever this candidate's evaluation started is its own; the wall
      // time counts from the batch's start.
      auto finish = [&](EvalResult& r) {
        phases += slot.take_starts();
        phases.wall_s = seconds_since(batch_start);
        r.metrics["phases"] = phases.to_json();
      };
      if (auto* failed = std::get_if<EvalResult>(&prepared)) {
        results[i] = std::move(*failed);
        results[i].device = backend[i] == Backend::host ? host::host_device_info().name : slot.info().name;
        results[i].metrics["worker_device"] = slot.device_spec();
        finish(results[i]);
        return;
      }
      auto& p = std::get<PreparedSolution>(prepared);
      RunRequest req;
      req.candidate = p;
      req.reference = *references.at(reference_language(backend[i]));
      req.options = opts;
      req.workloads = workloads;
      std::string timing_device;  // the reference latencies' identity (timing_identity)
      Json baselines;
      if (oracle_task) {
        // The oracle's start, preparation and baselines (a worker it
        // started to probe CUDA IPC is worker_start, not the oracle's).
        const auto t0 = Clock::now();
        const double starts_before = slot.starts_so_far();
        {
          std::lock_guard ol(oracle_mu_);
          OracleState& o = oracle_state(spec, key, slot, opts);
          req.oracle = o.data.at(slot.device_spec());
          if (opts.time_reference) baselines = oracle_baselines(o);
        }
        phases[Phase::oracle] += std::max(0.0, seconds_since(t0) - (slot.starts_so_far() - starts_before));
      } else if (opts.time_reference) {
        std::lock_guard rl(ref_mu_);
        timing_device = timing_identity(slot.info(), req.reference, opts, false);
        req.time_reference = ref_times_.missing(spec, key, timing_device, workloads);
      }
      auto outcome = slot.run(key, spec, req);
      EvalResult& r = outcome.result;
      phases += outcome.phases;
      if (oracle_task) {
        apply_baselines(r, baselines);
        std::lock_guard ol(oracle_mu_);
        // One oracle per evaluator and task: every candidate names the same process.
        for (const auto& [k, o] : oracles_)
          if (k.rfind(key + "\n", 0) == 0 && o.process) r.metrics["oracle_pid"] = o.process->hello().pid;
      } else {
        std::lock_guard rl(ref_mu_);
        for (const auto& [w, t] : outcome.reference_times) ref_times_.put(key, timing_device, w, t.latency());
        ref_times_.apply(r, key, timing_device);
      }
      add_compile_info(r, p);
      if (backend[i] == Backend::cuda && gpus_skipped_ > 0) r.metrics["gpus_skipped"] = gpus_skipped_;
      r.metrics["worker_device"] = slot.device_spec();  // which GPU ("cuda:1") or "host"
      r.solution_id = p.solution.id;
      finish(r);
      results[i] = std::move(r);
    };

    // One thread per device slot; each takes the next solution of its backend in input order.
    std::vector<std::pair<RunSlot*, Backend>> slots;
    for (std::size_t i = 0; i < solutions.size(); ++i) {
      if (backend[i] == Backend::host && !host_slot_) host_slot_ = make_host_slot();
    }
    if (std::find(backend.begin(), backend.end(), Backend::host) != backend.end())
      slots.push_back({host_slot_.get(), Backend::host});
    if (std::find(backend.begin(), backend.end(), Backend::cuda) != backend.end())
      for (auto& s : cuda_slots_) slots.push_back({s.get(), Backend::cuda});
    std::atomic<std::size_t> next[2] = {0, 0};  // per backend
    std::mutex err_mu;
    std::exception_ptr error;
    auto drive = [&](RunSlot* slot, Backend b) {
      try {
        // A host candidate is timed on the CPU the compilers use: the host
        // worker waits until the batch's host candidates are all compiled,
        // so no compilation disturbs a measurement (they still compile
        // concurrently). A GPU's measurement overlaps compilation.
        if (b == Backend::host)
          for (std::size_t i = 0; i < solutions.size(); ++i)
            if (backend[i] == Backend::host) compiled[i].wait();
        for (;;) {
          // Claim the next unclaimed solution of this backend.
          std::size_t i;
          do {
            i = next[static_cast<int>(b)].fetch_add(1);
          } while (i < solutions.size() && backend[i] != b);
          if (i >= solutions.size()) return;
          run_one(*slot, i);
        }
      } catch (...) {
        std::lock_guard el(err_mu);
        if (!error) error = std::current_exception();
      }
    };
    std::vector<std::thread> threads;
    for (std::size_t s = 1; s < slots.size(); ++s) threads.emplace_back(drive, slots[s].first, slots[s].second);
    if (!slots.empty()) drive(slots[0].first, slots[0].second);
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
    return results;
  }

  DeviceInfo device() const override {
    std::lock_guard lock(mu_);
    auto* self = const_cast<ProcessEvaluator*>(this);
    if (config_.backend == EvalBackend::host || (config_.backend == EvalBackend::automatic && !cuda_usable()))
      return host::host_device_info();
    self->ensure_cuda_slots();
    DeviceInfo d = self->cuda_slots_.front()->info();
    d.count = static_cast<int>(cuda_slots_.size());
    return d;
  }

  EvalOptions& options() override { return options_; }

  // Only a flag: the threads that drive workers and compilers see it within
  // 100 ms, kill what they started and throw Status::cancelled.
  void cancel() override { cancelled_.store(true); }

 private:
  static bool cuda_usable() {
    std::string why;
    return cuda_available(&why);
  }

  std::unique_ptr<RunSlot> make_host_slot() {
    return std::make_unique<RunSlot>(worker_exe_, "host", "", cache_dir_, sandbox_, memory_limit_bytes_, cancelled_);
  }

  // One run slot per GPU: the configured ordinals, or every device the
  // driver reports. Candidates are compiled once for one architecture, so
  // only GPUs of the first device's architecture are used; the others are
  // skipped with a warning. Workers start when their slot first runs.
  void ensure_cuda_slots() {
    if (!cuda_slots_.empty()) return;
    std::string why;
    if (!cuda_available(&why)) throw Error(Status::no_device, "CUDA evaluation is not possible here: " + why);
#if KS_HAVE_CUDA_BACKEND
    std::vector<int> ordinals = config_.devices;
    if (ordinals.empty())
      for (int d = 0, n = cuda_device_count(); d < n; ++d) ordinals.push_back(d);
    std::string first_arch;
    std::vector<std::unique_ptr<RunSlot>> slots;
    for (int d : ordinals) {
      const std::string arch = cuda_device_arch(d);  // no_device, naming the ordinal, for a bad one
      if (first_arch.empty()) first_arch = arch;
      if (arch != first_arch) {
        ++gpus_skipped_;
        log_message(LogLevel::warning,
                    fmt::format("CUDA device {} ({}) is not used: the evaluator compiles for the first device's "
                                "architecture ({})",
                                d, arch, first_arch));
        continue;
      }
      slots.push_back(std::make_unique<RunSlot>(worker_exe_, fmt::format("cuda:{}", d), arch, cache_dir_, sandbox_,
                                                memory_limit_bytes_, cancelled_));
    }
    if (slots.empty()) throw Error(Status::no_device, "CUDA evaluation is not possible here: no device selected");
    cuda_arch_ = config_.cuda_arch.empty() ? first_arch : config_.cuda_arch;
    cuda_slots_ = std::move(slots);
#else
    throw Error(Status::no_device, "this build of libksearch has no CUDA backend");
#endif
  }

  // The architecture to compile for: fixed once the CUDA slots exist, so
  // compile jobs never ask a run worker.
  std::string arch_for(Language l) const { return l == Language::cuda ? cuda_arch_ : ""; }

  std::string cache_dir_for(Language l) const { return (cache_dir_ / cache_folder(l)).string(); }

  CompileFn compile_fn(Language l) {
    if (l == Language::cpp) return [this](const CompileRequest& r) { return host_compiler_->compile(r); };
    if (language_is_python(l)) return [this](const CompileRequest& r) { return python_compiler_->compile(r); };
    {
      std::lock_guard lock(cuda_compile_mu_);
      if (!cuda_compile_)
        cuda_compile_ = std::make_unique<CudaCompileService>(
            worker_exe_, cache_dir_, default_compile_workers(config_.compile_workers), sandbox_, cancelled_);
    }
    return [this](const CompileRequest& r) { return cuda_compile_->compile(r); };
  }

  // A reference oracle and what it handed over, per task.
  struct OracleState {
    std::unique_ptr<OracleProcess> process;
    int seeds = 0;
    std::vector<std::string> workloads;
    std::map<std::string, std::map<std::string, std::vector<OracleSeed>>> data;  // by slot device spec
    std::map<std::string, std::map<std::string, std::vector<OracleSeed>>> by_handover;
    Json baselines;
  };

  // Starts the task's oracle on the first device that asks (the host: its
  // CPU; a GPU: that GPU), once per evaluator, and has it prepare every seed
  // of the selected workloads. GPU workers read the oracle's memory in place
  // (CUDA IPC) when they can reach it, else from files in the cache.
  OracleState& oracle_state(const TaskSpec& spec, const std::string& key, RunSlot& slot, const EvalOptions& opts) {
    const std::string okey = key + "\n" + (slot.device_spec() == "host" ? "host" : "cuda");
    // An oracle holds its problem's data in (GPU) memory: only the latest
    // task's stays; a run has one task, an evaluation of many problems
    // starts one oracle after the other.
    for (auto it = oracles_.begin(); it != oracles_.end();)
      it = it->first == okey ? std::next(it) : oracles_.erase(it);
    OracleState& o = oracles_[okey];
    const std::vector<std::string> workloads = select_workloads(spec, opts);
    if (o.process && (o.seeds != opts.seeds_per_workload || o.workloads != workloads)) {
      o.data.clear();
      o.by_handover.clear();
    }
    if (!o.process)
      o.process = std::make_unique<OracleProcess>(spec, slot.device_spec() == "host" ? "cpu" : slot.device_spec(),
                                                  cache_dir_);
    o.seeds = opts.seeds_per_workload;
    o.workloads = workloads;
    if (o.data.count(slot.device_spec())) return o;
    auto data_for = [&](const std::string& handover) -> const std::map<std::string, std::vector<OracleSeed>>& {
      auto it = o.by_handover.find(handover);
      if (it == o.by_handover.end())
        it = o.by_handover.emplace(handover, o.process->prepare(spec, workloads, opts.seeds_per_workload, handover))
                 .first;
      return it->second;
    };
    if (slot.device_spec() == "host") {
      o.data[slot.device_spec()] = data_for("file");
      return o;
    }
    const auto& ipc = data_for("cuda_ipc");
    std::string why;
    const ExternalTensor* probe = nullptr;
    for (const auto& [w, seeds] : ipc)
      for (const auto& s : seeds)
        for (const auto& t : s.inputs)
          if (!probe && t.bytes > 0) probe = &t;
    if (!probe || slot.probe_external(*probe, &why)) {
      o.data[slot.device_spec()] = ipc;
    } else {
      log_message(LogLevel::info,
                  fmt::format("note: {} cannot map the reference oracle's GPU memory ({}); its data goes through "
                              "files in the cache instead",
                              slot.device_spec(), why));
      o.data[slot.device_spec()] = data_for("file");
    }
    return o;
  }

  Json oracle_baselines(OracleState& o) {
    if (o.baselines.is_null()) o.baselines = o.process->baseline({"eager", "compile"}, 5, 100);
    return o.baselines;
  }

  // The oracle's eager time is the reference each benchmark workload is
  // compared with (speedup over eager); torch.compile's joins the metrics.
  static void apply_baselines(EvalResult& r, const Json& b) {
    if (b.is_object()) {
      for (const char* mode : {"eager", "compile"}) {
        const Json* m = b.find(mode);
        if (m && m->is_object() && m->contains("mean_ms"))
          r.metrics[fmt::format("{}_ms", mode)] = m->get_number("mean_ms");
      }
      // The eager time in the statistic the candidate's latency uses (a
      // baseline cached before the oracle reported quantiles has the mean).
      if (const Json* e = b.find("eager"); e && e->contains("mean_ms"))
        for (auto& w : r.workloads) {
          if (!w.benchmark) continue;
          const char* field = w.timing.statistic == LatencyStatistic::median ? "median_ms"
                              : w.timing.statistic == LatencyStatistic::p10  ? "p10_ms"
                                                                              : "mean_ms";
          w.reference_ms = e->get_number(field, e->get_number("mean_ms"));
        }
    }
    r.compute_summary();
    if (r.passed() && r.latency_ms > 0 && r.metrics.contains("compile_ms"))
      r.metrics["speedup_over_compile"] = r.metrics.get_number("compile_ms") / r.latency_ms;
  }

  const PreparedSolution& reference_for(const TaskSpec& spec, const std::string& key, Language l,
                                        const EvalOptions& opts) {
    const std::string rkey = key + "/" + ks::to_string(l);
    if (auto it = references_.find(rkey); it != references_.end()) return it->second;
    PreparedSolution ref = prepare_reference(spec, l, opts, arch_for(l), cache_dir_for(l), compile_fn(l));
    return references_.emplace(rkey, std::move(ref)).first->second;
  }

  EvaluatorConfig config_;
  EvalOptions options_;
  fs::path worker_exe_;
  fs::path cache_dir_;
  isolation::Sandbox sandbox_;
  std::uint64_t memory_limit_bytes_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::unique_ptr<Compiler> host_compiler_;
  std::unique_ptr<Compiler> python_compiler_ = python::make_python_compiler((cache_dir_ / "python").string());
  std::mutex cuda_compile_mu_;
  std::unique_ptr<CudaCompileService> cuda_compile_;
  std::unique_ptr<RunSlot> host_slot_;
  std::vector<std::unique_ptr<RunSlot>> cuda_slots_;
  std::string cuda_arch_;
  int gpus_skipped_ = 0;  // GPUs of another architecture than the first
  std::map<std::string, PreparedSolution> references_;
  std::mutex ref_mu_;
  ReferenceTimes ref_times_;
  std::mutex oracle_mu_;
  std::map<std::string, OracleState> oracles_;  // by task key and backend
  // Last, so it is destroyed first: its threads may use the members above.
  ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Evaluator> make_process_evaluator(const EvaluatorConfig& config) {
  return std::make_unique<ProcessEvaluator>(config);
}

}  // namespace ks::eval
