// A loaded host candidate: the shared object, its call plan bound to one
// workload, and the argument blocks its shims read. A candidate runs in a
// process of its own (candidate_process.hpp) when the device isolates it,
// else in this one (trusted code, the in-process evaluator, tests).
#include <dirent.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include "eval/host/call_plan.hpp"
#include "eval/host/candidate_process.hpp"
#include "eval/host/guarded_memory.hpp"
#include "eval/host/host_device.hpp"
#include "ksearch/error.hpp"

namespace ks::eval::host {
namespace {

using ShimFn = void (*)(void* const*);

[[noreturn]] void fail(std::string message) {
  throw RunError({EvalStatus::runtime_error, std::move(message)});
}

std::string list_vars(const util::Vars& vars) {
  std::string s;
  for (const auto& [k, v] : vars) s += (s.empty() ? "" : ", ") + fmt::format("{}={}", k, v);
  return s;
}

// One argument's value, addressed by the shim through args[i].
union ArgValue {
  void* ptr;
  std::int64_t i64;
  std::int32_t i32;
  std::int16_t i16;
  std::int8_t i8;
  std::uint8_t u8;
  bool b;
  float f32;
  double f64;
};

struct BoundCall {
  ShimFn fn = nullptr;           // in this process
  WireCall wire;                 // in the candidate's process
  std::vector<ArgValue> values;
  std::vector<void*> addrs;
};

// Nanoseconds the threads of `pid` (or this thread, for 0) have spent
// runnable but waiting for a CPU: the second field of schedstat
// (Documentation/scheduler/sched-stats.rst). nullopt where it cannot be read.
std::optional<std::uint64_t> schedstat_wait_ns(pid_t pid) {
  auto field = [](const std::string& path) -> std::optional<std::uint64_t> {
    std::FILE* f = std::fopen(path.c_str(), "re");
    if (!f) return std::nullopt;
    unsigned long long cpu = 0, wait = 0;
    const bool ok = std::fscanf(f, "%llu %llu", &cpu, &wait) == 2;
    std::fclose(f);
    if (!ok) return std::nullopt;
    return wait;
  };
  if (pid == 0) return field("/proc/thread-self/schedstat");
  const std::string dir = fmt::format("/proc/{}/task", pid);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return std::nullopt;
  std::uint64_t sum = 0;
  bool any = false;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (auto w = field(dir + "/" + e->d_name + "/schedstat")) {
      sum += *w;
      any = true;
    }
  }
  ::closedir(d);
  if (!any) return std::nullopt;
  return sum;
}

class HostProgram final : public Program {
 public:
  HostProgram(const Artifact& artifact, const Solution& solution, std::unique_ptr<CandidateProcess> process)
      : plan_source_(solution.launch_plan), path_(artifact.path), process_(std::move(process)) {
    if (process_) {
      process_->load(path_);
      isolation_ = process_->isolation();
      return;
    }
    // RTLD_LOCAL keeps candidates' symbols apart. Handles are never closed:
    // a candidate's threads or atexit handlers may still point into its code.
    handle_ = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* err = ::dlerror();
      fail(fmt::format("cannot load the compiled candidate: {}", err ? err : "unknown dlopen error"));
    }
  }

  ~HostProgram() override { release_scratch(); }

  void bind(const Bindings& b) override {
    release_scratch();
    calls_.clear();
    tensors_.clear();
    if (!plan_) {
      // At run time only the names matter: tensor or not. Types were fixed
      // when the shims were generated.
      std::vector<TensorSpec> names;
      for (const auto& [name, buf] : b.tensors) names.push_back(TensorSpec{.name = name});
      // Scalar inputs are values of their own type, as in the shims.
      for (const auto& [name, sc] : b.scalars) names.push_back(TensorSpec{.name = name, .dtype = sc.dtype, .scalar = true});
      try {
        plan_ = HostPlan::parse(plan_source_, names);
      } catch (const Error& e) {
        fail(e.what());
      }
    }
    const HostPlanBody* body = nullptr;
    try {
      body = &plan_->select(b.vars);
    } catch (const Error& e) {
      fail(fmt::format("{} (variables: {})", e.what(), list_vars(b.vars)));
    }
    for (const auto& [name, buf] : b.tensors) tensors_.push_back(buf);
    const std::map<std::string, Buffer> scratch_by_name = allocate_scratch(*body, b.vars);
    poison_scratch();
    const util::RealVars reals = b.reals();
    for (const auto& call : body->calls) {
      BoundCall bc;
      bc.wire.shim = call.shim;
      bc.wire.fn = call.fn;
      if (!process_) bc.fn = reinterpret_cast<ShimFn>(::dlsym(handle_, call.shim.c_str()));
      if (!process_ && !bc.fn)
        fail(fmt::format("the compiled candidate has no entry \"{}\" for call \"{}\"; it was compiled "
                         "from a different plan",
                         call.shim, call.fn));
      bc.values.resize(call.args.size());
      for (std::size_t i = 0; i < call.args.size(); ++i) {
        const HostArg& a = call.args[i];
        ArgValue& v = bc.values[i];
        std::string where = fmt::format("call plan: call \"{}\" argument {} (\"{}\")", call.fn, i, a.text);
        if (a.kind == HostArg::Kind::tensor) {
          auto it = b.tensors.find(a.text);
          if (it == b.tensors.end()) fail(where + ": no such tensor is bound");
          v.ptr = it->second.host_ptr();
        } else if (a.kind == HostArg::Kind::scratch) {
          auto it = scratch_by_name.find(a.text);
          if (it == scratch_by_name.end())
            fail(where + ": the scratch buffer is not declared for the selected variant");
          v.ptr = it->second.host_ptr();
        } else {
          try {
            v = value_of(a, b.vars, reals, where);
          } catch (const Error& e) {
            fail(fmt::format("{}: {} (variables: {})", where, e.what(), list_vars(b.vars)));
          }
        }
      }
      calls_.push_back(std::move(bc));
    }
    // Addresses last: the value vectors no longer move.
    for (auto& bc : calls_)
      for (auto& v : bc.values) bc.addrs.push_back(&v);
    if (process_) bind_in_process(*body);
  }

  void launch() override {
    if (calls_.empty()) fail("launch() before bind()");
    if (process_) {
      process_->run();
      return;
    }
    for (const auto& c : calls_) c.fn(c.addrs.data());
  }

  void synchronize() override {
    // Host calls are synchronous; what is left to check is that nothing was
    // written outside the buffers.
    for (const auto& t : tensors_)
      if (std::string v = check_canaries(t.host_ptr()); !v.empty()) fail(v);
    for (const auto& s : scratch_)
      if (std::string v = check_canaries(s.host_ptr()); !v.empty()) fail(v);
  }

  double timed_launch() override {
    // The candidate's process cannot reach this clock: the time is the
    // request's round trip, and the process is stopped outside it. The run
    // queues' wait of this thread and of the candidate's (read outside the
    // timed window) tells whether another process interrupted the call.
    const auto waited_before = run_queue_wait_ns();
    double ms = 0;
    if (process_) {
      if (calls_.empty()) fail("launch() before bind()");
      ms = process_->run();
    } else {
      auto t0 = std::chrono::steady_clock::now();
      launch();
      auto t1 = std::chrono::steady_clock::now();
      ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    }
    const auto waited_after = run_queue_wait_ns();
    disturbed_.reset();
    if (waited_before && waited_after)
      disturbed_ = static_cast<double>(*waited_after - *waited_before) > std::max(kQuietWaitNs, 1e4 * ms);
    return ms;
  }

  std::optional<bool> last_call_disturbed() const override { return disturbed_; }

  void poison_scratch() override {
    for (const auto& s : scratch_) std::memset(s.host_ptr(), 0xFF, s.bytes);
  }

  ProcessFacts process_facts() const override {
    ProcessFacts f;
    f.isolation = isolation_;
    return f;
  }

 private:
  // The plan's scratch buffers for this binding, guarded and labelled.
  std::map<std::string, Buffer> allocate_scratch(const HostPlanBody& body, const util::Vars& vars) {
    std::map<std::string, Buffer> by_name;
    for (const auto& s : body.scratch) {
      std::int64_t bytes = 0;
      try {
        if (!s.bytes.empty()) {
          bytes = s.bytes.eval_int(vars);
        } else {
          bytes = static_cast<std::int64_t>(dtype_size(s.dtype));
          for (std::size_t d = 0; d < s.shape.size(); ++d) {
            const std::int64_t n = s.shape[d].eval_int(vars);
            if (n < 0)
              fail(fmt::format("call plan: scratch \"{}\": shape[{}] = {} is negative (variables: {})", s.name, d,
                               n, list_vars(vars)));
            if (__builtin_mul_overflow(bytes, n, &bytes))
              fail(fmt::format("call plan: scratch \"{}\": its size overflows 64 bits at shape[{}] (variables: {})",
                               s.name, d, list_vars(vars)));
          }
        }
      } catch (const Error& e) {
        fail(fmt::format("call plan: scratch \"{}\": {} (variables: {})", s.name, e.what(), list_vars(vars)));
      }
      if (bytes < 0 || bytes > (std::int64_t{1} << 40))
        fail(fmt::format("call plan: scratch \"{}\" has an invalid size of {} bytes", s.name, bytes));
      void* p = guarded_alloc(static_cast<std::size_t>(bytes));
      set_guard_label(p, fmt::format("scratch \"{}\"", s.name));
      Buffer buf{reinterpret_cast<std::uint64_t>(p), static_cast<std::size_t>(bytes)};
      scratch_.push_back(buf);
      by_name[s.name] = buf;
    }
    return by_name;
  }

  // A value argument in its own type, as its shim reads it.
  ArgValue value_of(const HostArg& a, const util::Vars& vars, const util::RealVars& reals, const std::string& where) {
    ArgValue v{};
    auto small_int = [&](std::int64_t lo, std::int64_t hi, const char* type) {
      std::int64_t x = a.expr.eval_int(vars, reals);
      if (x < lo || x > hi) fail(fmt::format("{}: value {} does not fit in {}", where, x, type));
      return x;
    };
    switch (a.dtype) {
      case DType::f32: v.f32 = static_cast<float>(a.expr.eval_double(vars, reals)); break;
      case DType::f64: v.f64 = a.expr.eval_double(vars, reals); break;
      case DType::i32:
        v.i32 = static_cast<std::int32_t>(
            small_int(std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(), "i32"));
        break;
      case DType::i16: v.i16 = static_cast<std::int16_t>(small_int(-32768, 32767, "i16")); break;
      case DType::i8: v.i8 = static_cast<std::int8_t>(small_int(-128, 127, "i8")); break;
      case DType::u8: v.u8 = static_cast<std::uint8_t>(small_int(0, 255, "u8")); break;
      case DType::boolean: v.b = a.expr.eval_double(vars, reals) != 0.0; break;
      default: v.i64 = a.expr.eval_int(vars, reals); break;
    }
    return v;
  }

  // Over there a tensor or scratch argument is that process's mapping of the block.
  void bind_in_process(const HostPlanBody& body) {
    std::vector<WireCall> wire;
    for (std::size_t c = 0; c < calls_.size(); ++c) {
      BoundCall& bc = calls_[c];
      const HostCall& call = body.calls[c];
      for (std::size_t i = 0; i < bc.values.size(); ++i) {
        WireArg a;
        if (call.args[i].kind == HostArg::Kind::value) std::memcpy(&a.value, &bc.values[i], sizeof a.value);
        else a.block = bc.values[i].ptr;
        bc.wire.args.push_back(a);
      }
      wire.push_back(bc.wire);
    }
    process_->bind(wire);
  }

  void release_scratch() {
    for (const auto& s : scratch_) guarded_free(s.host_ptr());
    scratch_.clear();
  }

  LaunchPlan plan_source_;
  std::string path_;
  std::unique_ptr<CandidateProcess> process_;  // null: the calls run in this process
  std::string isolation_;                      // its layers, once loaded
  std::optional<bool> disturbed_;              // of the last timed call

  // A wake-up's own wait on an idle machine is a few microseconds; more than
  // this (or 1% of the call) is another process's time.
  static constexpr double kQuietWaitNs = 20e3;
  // This thread's run-queue wait plus the candidate process's threads'.
  std::optional<std::uint64_t> run_queue_wait_ns() const {
    auto mine = schedstat_wait_ns(0);
    if (!mine || !process_) return mine;
    auto theirs = schedstat_wait_ns(process_->pid());
    if (!theirs) return std::nullopt;
    return *mine + *theirs;
  }
  void* handle_ = nullptr;
  std::optional<HostPlan> plan_;
  std::vector<BoundCall> calls_;
  std::vector<Buffer> tensors_;
  std::vector<Buffer> scratch_;
};

}  // namespace

std::unique_ptr<Program> load_host_program(const Artifact& artifact, const Solution& solution,
                                           const CandidateProcessOptions* isolate) {
  return std::make_unique<HostProgram>(artifact, solution,
                                       isolate ? std::make_unique<CandidateProcess>(*isolate) : nullptr);
}

}  // namespace ks::eval::host
