// ksearch-worker: runs candidates (role "run": owns one device, CUDA GPU or
// the host CPU) or compiles CUDA candidates (role "compile": keeps NVRTC and
// its precompiled headers warm) for the evaluator in the parent process.
//
//   ksearch-worker --role run --device host|cuda:<ordinal> [--cache-dir DIR]
//   ksearch-worker --role compile [--cache-dir DIR]
//
// A run worker on the host starts one more process per loaded host program
// (role "candidate", eval/host/candidate_process.hpp): candidate code runs
// only there, never in the worker that speaks to the parent.
//
// The parent talks to it over stdin/stdout in the framed protocol of
// eval/protocol.hpp. It exits when stdin closes, and within a fraction of a
// second when its parent dies, even while a candidate spins forever.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <filesystem>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>

#include "eval/flow.hpp"
#include "eval/host/guarded_memory.hpp"
#include "eval/host/host_device.hpp"
#include "eval/host/zygote.hpp"
#include "eval/messages.hpp"
#include "eval/eval_server.hpp"
#include "eval/phases.hpp"
#include "eval/protocol.hpp"
#include "eval/reference_store.hpp"
#include "ksearch/error.hpp"
#include "util/fs.hpp"
#if KS_HAVE_CUDA_BACKEND
#include "eval/cuda/cuda_backend.hpp"
#endif

namespace {

using namespace ks;
using namespace ks::eval;
namespace fs = std::filesystem;

struct Args {
  std::string role = "run";
  std::string device = "host";
  std::string cache_dir;
  std::string refs_dir;            // empty: <cache>/refs; "none": reference outputs in memory only
  std::uint64_t memory_limit = 0;  // RLIMIT_AS in bytes; 0: none
  std::uint64_t python_memory_limit = 0;  // a CUDA worker's Python candidates: their resident bytes; 0: none
  std::string pch_dir;             // compile role: where NVRTC keeps precompiled headers
  bool sandboxed = false;          // started by bubblewrap in a PID namespace of its own
  std::string isolation;           // candidate role: the layers its parent set up
  std::string python;              // the interpreter Python candidates run under
  std::string server_config;       // eval-server role: the EvaluatorConfig it serves, as JSON
  std::string server_socket, server_lock;
  double server_idle_s = 600;
  int server_ready_fd = -1;  // gets a byte once the server listens
};

// In a sandbox the worker is process 2 of its PID namespace (bubblewrap's
// init is 1), so every other process there was started by a candidate. They
// are killed after each evaluation, setsid() or not, and the candidate is
// told. Never outside a sandbox: kill(-1) there would reach every process of
// this user.
int kill_leftover_processes(bool sandboxed) {
  if (!sandboxed || ::getpid() != 2) return 0;
  int found = 0;
  std::error_code ec;
  // The worker's long-lived Python (the zygote Python candidates are forked
  // from) is no candidate's.
  const pid_t zygote = host::python_zygote_pid();
  const std::string kept = zygote > 0 ? std::to_string(zygote) : "";
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (name != "1" && name != "2" && name != kept) ++found;
  }
  if (found == 0) return 0;
  host::end_python_zygote();  // ends with the rest; the next candidate starts a fresh one
  ::kill(-1, SIGKILL);
  // Our own children are ours to reap; orphans go to bubblewrap's init.
  for (int i = 0; i < 100; ++i) {
    int st;
    pid_t r = ::waitpid(-1, &st, WNOHANG);
    if (r < 0) break;
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return found;
}

int g_out = -1;  // the protocol's write end
double g_main_started_s = 0;  // main()'s start, for the hello (sandbox_setup_s)
PhaseClockType::time_point g_request_received;  // when the request in hand arrived

void send(const msg::Reply& reply) {
  if (!write_frame(g_out, msg::to_json(reply))) std::_Exit(0);  // the parent is gone
}

void send_error(const Error& e) { send(msg::Failed{e.status(), e.what()}); }

[[noreturn]] void fatal(Status status, const std::string& message) {
  send(msg::Fatal{status, message});
  std::_Exit(2);
}

// Exits when the parent dies. A thread of its own, so it works while the
// main thread is stuck in a candidate. (PR_SET_PDEATHSIG would follow the
// parent *thread* that spawned us, which may be a short-lived pool thread.)
// The protocol's input pipe tells: once no writer is left it hangs up, also
// in a sandbox, where the parent is bubblewrap's init and never changes.
// The main thread normally sees the end of input first and exits cleanly;
// the grace period is for a candidate that keeps it busy.
void start_watchdog(int protocol_in) {
  const pid_t parent = ::getppid();
  std::thread([parent, protocol_in] {
    for (;;) {
      pollfd p{protocol_in, 0, 0};  // POLLHUP and POLLERR are always reported
      if (::poll(&p, 1, 100) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        std::_Exit(3);
      }
      if (parent != 1 && ::getppid() != parent) std::_Exit(3);
    }
  }).detach();
}

// The memory limit of a host run worker: the kernel refuses address space
// beyond it, so a candidate that allocates without bound fails an
// allocation instead of driving the machine into its OOM killer. A failed
// `new` ends the worker with kWorkerExitMemoryLimit; a fault that follows a
// failed malloc is recognised by the crash reporter (guarded_memory.hpp).
void apply_memory_limit(std::uint64_t bytes) {
  if (bytes == 0) return;
  rlimit lim{static_cast<rlim_t>(bytes), static_cast<rlim_t>(bytes)};
  if (::setrlimit(RLIMIT_AS, &lim) != 0) {
    fatal(Status::internal, fmt::format("cannot set the memory limit of {} bytes: {}", bytes, std::strerror(errno)));
  }
  host::set_memory_limit(bytes);
  std::set_new_handler([] {
    static const char msg[] = "ksearch-worker: fatal: an allocation failed at the memory limit\n";
    ssize_t r = ::write(2, msg, sizeof msg - 1);
    (void)r;
    std::_Exit(kWorkerExitMemoryLimit);
  });
}

// Moves the protocol off descriptors 0 and 1 so nothing a candidate prints
// can corrupt it: its stdout goes to stderr, which the parent keeps a tail of.
int take_protocol_fds() {
  int in = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
  g_out = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (in < 0 || g_out < 0) std::_Exit(2);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    ::close(devnull);
  }
  ::dup2(2, 1);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return in;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ksearch-worker: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--role") a.role = value();
    else if (k == "--device") a.device = value();
    else if (k == "--cache-dir") a.cache_dir = value();
    else if (k == "--refs-dir") a.refs_dir = value();
    else if (k == "--pch-dir") a.pch_dir = value();
    else if (k == "--sandboxed") a.sandboxed = true;
    else if (k == "--isolation") a.isolation = value();
    else if (k == "--python") a.python = value();
    else if (k == "--server-config") a.server_config = value();
    else if (k == "--server-socket") a.server_socket = value();
    else if (k == "--server-lock") a.server_lock = value();
    else if (k == "--server-idle") a.server_idle_s = std::strtod(value().c_str(), nullptr);
    else if (k == "--server-ready-fd") a.server_ready_fd = std::atoi(value().c_str());
    else if (k == "--memory-limit" || k == "--python-memory-limit") {
      const std::string v = value();
      char* end = nullptr;
      (k == "--memory-limit" ? a.memory_limit : a.python_memory_limit) = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0') {
        std::fprintf(stderr, "ksearch-worker: %s takes a number of bytes, not \"%s\"\n", k.c_str(), v.c_str());
        std::exit(2);
      }
    } else {
      std::fprintf(stderr,
                   "ksearch-worker: unknown argument \"%s\"\n"
                   "usage: ksearch-worker --role run|compile|candidate|eval-server [--device host|cuda:N] [--cache-dir DIR]\n"
                   "       [--refs-dir DIR|none] [--memory-limit BYTES] [--pch-dir DIR] [--python PATH]\n"
                   "This program is started by libksearch; it speaks a binary protocol on stdin/stdout.\n",
                   k.c_str());
      std::exit(2);
    }
  }
  if (a.cache_dir.empty()) a.cache_dir = util::default_cache_dir().string();
  return a;
}

// Sends progress as frames the moment it happens.
class FrameEvents final : public FlowEvents {
 public:
  void workload_started(const std::string& w) override { send(msg::WorkloadStarted{w}); }
  void phase(const std::string& w, const FlowPhase& p) override { send(msg::Phase{w, p}); }
  void reference_timed(const std::string& w, const TimingStats& t) override { send(msg::ReferenceTimed{w, t}); }
  void workload_finished(const WorkloadResult& r) override { send(msg::WorkloadFinished{r}); }
};

// This program, to start candidate processes from: a path that works in a
// sandbox too, where the program is bound where it lies outside.
std::string own_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fatal(Status::internal, fmt::format("cannot read /proc/self/exe: {}", std::strerror(errno)));
  return std::string(buf, static_cast<std::size_t>(n));
}

std::unique_ptr<Device> open_device(const Args& args) {
  const std::string& spec = args.device;
  // Candidates run in processes of their own; host ones under the memory
  // limit. None of them sees the reference outputs the worker keeps on disk.
  host::CandidateProcessOptions isolate{.exe = own_path(), .memory_limit = args.memory_limit, .python = args.python};
  const fs::path cache(args.cache_dir);
  // Nor the Python candidates' artifacts and the extension libraries the
  // worker keeps (python_program.cpp).
  isolate.python_cache = (cache / "python").string();
  isolate.hide = {(args.refs_dir.empty() || args.refs_dir == "none" ? cache / "refs" : fs::path(args.refs_dir)).string(),
                  (cache / "kernelbench").string(), (cache / "python").string()};
  if (spec == "host") return std::make_unique<host::HostDevice>(isolate);
  if (spec.rfind("cuda:", 0) == 0) {
    int ordinal = 0;
    try {
      ordinal = std::stoi(spec.substr(5));
    } catch (const std::exception&) {
      fatal(Status::invalid_argument, fmt::format("bad device \"{}\" (expected host or cuda:N)", spec));
    }
#if KS_HAVE_CUDA_BACKEND
    isolate.memory_limit = args.python_memory_limit;  // a resident limit there (python_program.cpp)
    // Its own kernels come from <cache>/cuda-runtime, read-only in a sandbox:
    // the evaluator compiled them there before starting this worker.
    return make_cuda_device(ordinal, isolate, (cache / "cuda-runtime").string());
#else
    (void)ordinal;
    throw Error(Status::no_device, "this build of libksearch has no CUDA backend");
#endif
  }
  fatal(Status::invalid_argument, fmt::format("bad device \"{}\" (expected host or cuda:N)", spec));
}

// The request loop both roles share: Exit ends it, Ping is answered here,
// every other request goes to `handle`, which returns false for one its role
// does not serve. Every error is answered (a malformed request too): an
// exception leaving main would end the worker without a word.
template <class Handler>
int serve(int in, const char* role, Handler&& handle) {
  while (auto frame = read_frame(in)) {
    g_request_received = PhaseClockType::now();
    try {
      msg::Request request = msg::request_from_json(*frame);
      if (std::holds_alternative<msg::Exit>(request)) break;
      if (std::holds_alternative<msg::Ping>(request)) send(msg::Pong{static_cast<int>(::getpid())});
      else if (!handle(request))
        throw Error(Status::invalid_argument, fmt::format("unknown op \"{}\"", msg::name_of(request)));
    } catch (const Error& e) {
      send_error(e);
    } catch (const std::exception& e) {
      send_error(Error(Status::internal, fmt::format("{}: {}", role, e.what())));
    }
  }
  return 0;
}

int run_role(int in, const Args& args) {
  host::install_crash_reporter();
  // Nothing of this user's may trace it or read its memory through /proc:
  // it holds the reference outputs and the protocol.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // Every live host buffer holds a memfd (guarded_memory.hpp).
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  // A host worker passes the memory limit on to its candidates' processes;
  // a CUDA worker runs no candidate code on the host and keeps it itself.
  if (args.device != "host") apply_memory_limit(args.memory_limit);
  std::unique_ptr<Device> device;
  try {
    device = open_device(args);
  } catch (const Error& e) {
    fatal(e.status(), e.what());
  }
  DeviceInfo info = device->info();
  send(msg::Hello{.role = "run", .pid = static_cast<int>(::getpid()), .device = info, .started_s = g_main_started_s});
  std::size_t budget = reference_budget(info);
  // Reference outputs share the limited address space with the candidate.
  if (args.memory_limit > 0) budget = std::min<std::size_t>(budget, args.memory_limit / 4);
  const fs::path refs_dir = args.refs_dir == "none" ? fs::path()
                            : args.refs_dir.empty()  ? fs::path(args.cache_dir) / "refs"
                                                     : fs::path(args.refs_dir);
  ReferenceStore refs(*device, refs_dir, budget);
  std::map<std::string, ks::TaskSpec> tasks;  // by key: sent once per worker
  int loaded_builds = 0;

  return serve(in, "worker", [&](msg::Request& request) {
    if (auto* probe = std::get_if<msg::ProbeExternal>(&request)) {
      // Can this worker reach a reference oracle's memory this way (CUDA IPC
      // across a sandbox's namespaces may not work)? Answers ExternalOk or Failed.
      Buffer b = device->open_external(probe->tensor);
      device->release_external(b, probe->tensor);
      send(msg::ExternalOk{});
      return true;
    }
    auto* evaluate = std::get_if<msg::Evaluate>(&request);
    if (!evaluate) return false;
    // Decoding the request (a task, a candidate, an oracle's tensors) is
    // part of its handover.
    const double decode_s = std::chrono::duration<double>(PhaseClockType::now() - g_request_received).count();
    const std::string& key = evaluate->task_key;
    if (evaluate->task) tasks[key] = std::move(*evaluate->task);
    auto it = tasks.find(key);
    if (it == tasks.end())
      throw Error(Status::invalid_argument, fmt::format("evaluate: unknown task key \"{}\"", key));
    RunRequest& req = evaluate->run;
    // Mappings of an earlier oracle's memory go: they would keep it alive.
    std::set<std::string> handles;
    for (const auto& [w, seeds] : req.oracle)
      for (const auto& s : seeds) {
        for (const auto& t : s.inputs) handles.insert(t.handle);
        for (const auto& t : s.outputs) handles.insert(t.handle);
      }
    device->keep_only_externals(handles);
    EvaluationFlow flow(*device, refs);
    FrameEvents events;
    EvalResult result = flow.run(it->second, req, events);
    bool restart = flow.device_suspect();
    if (int left = kill_leftover_processes(args.sandboxed); left > 0) {
      if (result.passed()) {
        result.status = EvalStatus::runtime_error;
        result.compute_summary();  // no latency or score for a failure
      }
      const std::string note = fmt::format(
          "the candidate left {} process{} running after its calls returned (fork, exec or setsid); they were "
          "killed. A kernel must not start processes",
          left, left == 1 ? "" : "es");
      result.log = result.log.empty() ? note : note + "\n" + result.log;
      result.metrics["leftover_processes"] = left;
      restart = true;
    }
    loaded_builds += static_cast<int>(req.candidate.builds.size());
    result.metrics["worker_pid"] = static_cast<int>(::getpid());
    result.metrics["worker_loaded_builds"] = loaded_builds;
    PhaseTimes phases = flow.phases();
    phases[Phase::transfers] += decode_s;
    phases.wall_s = std::chrono::duration<double>(PhaseClockType::now() - g_request_received).count();
    send(msg::Finished{std::move(result), restart, phases});
    return true;
  });
}

int compile_role(int in, const Args& args) {
#if KS_HAVE_CUDA_BACKEND
  host::install_crash_reporter();  // a crash inside NVRTC is reported like a candidate's
  send(msg::Hello{.role = "compile", .pid = static_cast<int>(::getpid()), .started_s = g_main_started_s});
  std::map<std::string, std::unique_ptr<Compiler>> compilers;  // by architecture
  return serve(in, "compile worker", [&](msg::Request& request) {
    auto* compile = std::get_if<msg::Compile>(&request);
    if (!compile) return false;
    const CompileRequest& req = compile->request;
    auto& compiler = compilers[req.arch];
    if (!compiler) {
      CudaCompilerOptions o;
      o.arch = req.arch;
      o.cache_dir = req.cache_dir.empty() ? (fs::path(args.cache_dir) / "cuda").string() : req.cache_dir;
      o.pch_dir = args.pch_dir;
      compiler = make_cuda_compiler(o);
    }
    try {
      Artifact a = compiler->compile(req);
      send(msg::Compiled{std::move(a)});
    } catch (const CompileError& e) {
      send(msg::CompileFailed{e.what(), e.log()});
    }
    return true;
  });
#else
  (void)in;
  (void)args;
  fatal(Status::no_device, "this build of libksearch has no CUDA backend, so there is no CUDA compiler");
#endif
}

int eval_server_role(const Args& args) {
  try {
    const EvaluatorConfig config = server_config_from_json(Json::parse(args.server_config));
    ServerPaths paths;
    paths.socket = args.server_socket;
    paths.lock = args.server_lock;
    paths.log = fs::path(args.server_lock).replace_extension(".log");  // where the client sent its stderr
    if (paths.socket.empty() || paths.lock.empty() || !(args.server_idle_s > 0)) {
      std::fprintf(stderr, "ksearch evaluation server: needs --server-socket, --server-lock and a positive --server-idle\n");
      return 1;
    }
    return serve_evaluations(config, paths, args.server_idle_s, args.server_ready_fd);
  } catch (const Error& e) {
    std::fprintf(stderr, "ksearch evaluation server: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  g_main_started_s = monotonic_seconds();
  Args args = parse_args(argc, argv);
  // A candidate's process talks only on descriptor 3, to the run worker that started it.
  if (args.role == "candidate") return host::candidate_process_main(3, args.memory_limit, args.isolation);
  // The evaluation server (eval_server.hpp) talks on its socket, not on a pipe.
  if (args.role == "eval-server") return eval_server_role(args);
  int in = take_protocol_fds();
  start_watchdog(in);
  try {
    if (args.role == "run") return run_role(in, args);
    if (args.role == "compile") return compile_role(in, args);
    fatal(Status::invalid_argument, fmt::format("unknown role \"{}\" (expected run or compile)", args.role));
  } catch (const Error& e) {
    // A broken stream: nothing more can be said over it.
    std::fprintf(stderr, "ksearch-worker: %s\n", e.what());
    return 1;
  }
}
