#include "eval/eval_server.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>
#include <vector>

#include "eval/phases.hpp"
#include "eval/isolation/sandbox.hpp"
#include "eval/worker_client.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "util/fs.hpp"
#include "util/secrets.hpp"
#include "util/sha256.hpp"

extern char** environ;

namespace ks::eval {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kProtocol = 1;
constexpr std::size_t kMaxFrame = std::size_t{1} << 30;  // a batch's sources or results, never more
constexpr double kStartTimeoutS = 60;                    // the server binds its socket within ms; this is slack


// The configuration a server is for: everything but the options, which
// travel with each request.
Json config_json(const EvaluatorConfig& c) {
  Json devices = Json::array();
  for (int d : c.devices) devices.push_back(d);
  return Json::obj({{"backend", to_string(c.backend)},
                    {"devices", devices},
                    {"cache_dir", c.cache_dir.string()},
                    {"worker_path", c.worker_path.string()},
                    {"compile_workers", c.compile_workers},
                    {"cuda_arch", c.cuda_arch},
                    {"sandbox", to_string(c.sandbox)},
                    {"memory_limit_bytes", static_cast<std::int64_t>(c.memory_limit_bytes)}});
}

EvaluatorConfig config_from_json(const Json& j) {
  EvaluatorConfig c;
  c.backend = parse_backend(j.get_string("backend"), "evaluator backend");
  if (const Json* d = j.find("devices"); d && d->is_array())
    for (std::size_t i = 0; i < d->size(); ++i) c.devices.push_back(static_cast<int>((*d)[i].as_int()));
  c.cache_dir = j.get_string("cache_dir");
  c.worker_path = j.get_string("worker_path");
  c.compile_workers = static_cast<int>(j.get_int("compile_workers", 0));
  c.cuda_arch = j.get_string("cuda_arch");
  c.sandbox = parse_sandbox_mode(j.get_string("sandbox"), "sandbox");
  c.memory_limit_bytes = static_cast<std::uint64_t>(j.get_int("memory_limit_bytes", 0));
  return c;
}

// Paths made absolute and the worker found, so the id and the server's own
// evaluator do not depend on the working folder.
EvaluatorConfig resolved(EvaluatorConfig c) {
  if (c.in_process)
    throw Error(Status::invalid_argument,
                "an evaluation server runs candidates in worker processes; an in-process evaluator cannot be served");
  c.cache_dir = fs::absolute(c.cache_dir.empty() ? util::default_cache_dir() : c.cache_dir).lexically_normal();
  c.worker_path = fs::absolute(locate_worker(c.worker_path)).lexically_normal();
  c.options = EvalOptions{};
  return c;
}

// The server's whole environment: what its workers get (their allowlist,
// $KSEARCH_WORKER_ENV's names included) and what the server itself and its
// trusted helpers (a task's reference oracle) read: the home and cache
// folders, TMPDIR, the compiler ($CXX), Python's path and ksearch's own
// settings. Never a credential (by name, or a value holding a registered
// secret): a server idles for minutes, and a key it holds is a key a
// process of this user's could read from /proc/<pid>/environ.
std::map<std::string, std::string> server_environment() {
  static const char* const kServerNames[] = {"HOME", "XDG_CACHE_HOME", "TMPDIR", "CXX", "PYTHONPATH"};
  std::map<std::string, std::string> env = isolation::candidate_environment(false);
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string name(kv.substr(0, eq));
    const std::string_view value = kv.substr(eq + 1);
    const bool wanted = name.rfind("KSEARCH_", 0) == 0 ||
                        std::find(std::begin(kServerNames), std::end(kServerNames), name) != std::end(kServerNames);
    if (wanted && !util::looks_like_credential_name(name) && !util::contains_secret(value))
      env[name] = std::string(value);
  }
  return env;
}

// A client with another environment gets a server of its own: the digest is
// of exactly what the server is started with.
std::string environment_digest() {
  std::string all;
  for (const auto& [name, value] : server_environment()) all += name + "=" + value + '\n';
  return util::sha256_hex(all);
}

fs::path server_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  std::error_code ec;
  const fs::path dir = xdg && *xdg && fs::is_directory(xdg, ec) ? fs::path(xdg) / "ksearch"
                                                                : fs::path("/tmp") / fmt::format("ksearch-{}", ::getuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error(Status::io, fmt::format("cannot create the evaluation server's folder {}: {}", dir.string(),
                                        std::strerror(errno)));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0)
    throw Error(Status::io, fmt::format("refusing {} as the evaluation server's folder: it must be a folder of this "
                                        "user's that nobody else may enter (mode 0700, not a link)",
                                        dir.string()));
  return dir;
}

sockaddr_un address_of(const fs::path& socket) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string s = socket.string();
  if (s.size() >= sizeof a.sun_path)
    throw Error(Status::invalid_argument,
                fmt::format("the evaluation server's socket path {} is longer than a Unix socket allows", s));
  std::memcpy(a.sun_path, s.c_str(), s.size() + 1);
  return a;
}

int try_connect(const fs::path& socket) {
  const sockaddr_un a = address_of(socket);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(Status::subprocess, fmt::format("the evaluation server's connection broke: {}", std::strerror(errno)));
    done += static_cast<std::size_t>(n);
  }
}

void send_frame(int fd, const Json& j) { write_all(fd, j.dump() + '\n'); }

// Reads one line. `keep_waiting` is asked every 100 ms; false stops with
// Status::cancelled. EOF before a line is Status::subprocess.
Json read_frame(int fd, const std::function<bool()>& keep_waiting) {
  std::string line;
  char buf[1 << 16];
  for (;;) {
    if (!keep_waiting()) throw Error(Status::cancelled, "cancelled while waiting for the other side of the evaluation server's connection");
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 100);
    if (r < 0 && errno != EINTR) throw Error(Status::subprocess, std::string("poll: ") + std::strerror(errno));
    if (r <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(Status::subprocess, "the evaluation server's connection closed before a whole message");
    const std::size_t seen = line.size();
    line.append(buf, static_cast<std::size_t>(n));
    if (const auto nl = line.find('\n', seen); nl != std::string::npos) {
      line.resize(nl);
      return Json::parse(line);
    }
    if (line.size() > kMaxFrame) throw Error(Status::parse, "a message on the evaluation server's connection is over 1 GiB");
  }
}

Json error_frame(const Error& e) {
  return Json::obj({{"error", Json::obj({{"status", static_cast<int>(e.status())}, {"message", e.what()}})}});
}

std::string log_tail(const fs::path& log) {
  std::string text;
  try {
    text = util::read_file(log, 1 << 20);
  } catch (const Error&) {
    return "";
  }
  if (text.size() > 2000) text = "..." + text.substr(text.size() - 2000);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

pid_t fork_without_handlers() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  return ::_Fork();  // no atfork handlers: the client may have threads holding their locks
#else
  return ::fork();
#endif
}

// Starts the server detached: a session of its own, no descriptor of its
// client's but its log and the readiness pipe, reparented to init, so it
// outlives this process and nothing of this process outlives it. Returns
// when the server listens (true) or has given up (false: its log says why).
bool start_server(const EvaluatorConfig& config, const ServerPaths& paths, double idle_s) {
  const std::string exe = config.worker_path.string();
  std::vector<std::string> args{exe, "--role", "eval-server", "--server-config", config_json(config).dump(),
                                "--server-socket", paths.socket.string(), "--server-lock", paths.lock.string(),
                                "--server-idle", fmt::format("{}", idle_s), "--server-ready-fd", "3"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Built before the fork: only async-signal-safe calls after it.
  std::vector<std::string> env;
  for (const auto& [name, value] : server_environment()) env.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Appended to, never truncated here: a racing client must not wipe what
  // another start wrote. The server that wins the lock truncates it.
  const int log_fd = ::open(paths.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log_fd < 0)
    throw Error(Status::io, fmt::format("cannot open the evaluation server's log {}: {}", paths.log.string(),
                                        std::strerror(errno)));
  // Above the standard descriptors, whatever of them this process has closed.
  const int log = ::fcntl(log_fd, F_DUPFD_CLOEXEC, 3);
  ::close(log_fd);
  int ready[2] = {-1, -1};
  if (log < 0 || ::pipe2(ready, O_CLOEXEC) != 0) {
    if (log >= 0) ::close(log);
    throw Error(Status::subprocess, fmt::format("cannot start the evaluation server: {}", std::strerror(errno)));
  }
  int moved_ready = ::fcntl(ready[1], F_DUPFD_CLOEXEC, 10);  // out of the way of 0..3
  const pid_t pid = fork_without_handlers();
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    ::setsid();
    const pid_t again = fork_without_handlers();
    if (again != 0) ::_exit(again < 0 ? 1 : 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::dup2(moved_ready, 3);  // dup2 clears close-on-exec on 0..3
    if (::syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
      for (int fd = 4; fd < 65536; ++fd) ::close(fd);
    ::execve(argv[0], argv.data(), envp.data());
    static const char kFailed[] = "ksearch evaluation server: cannot execute the worker program\n";
    if (::write(2, kFailed, sizeof kFailed - 1) < 0) {
    }
    ::_exit(127);
  }
  ::close(log);
  ::close(ready[1]);
  ::close(moved_ready);
  if (pid < 0) {
    ::close(ready[0]);
    throw Error(Status::subprocess, fmt::format("cannot start the evaluation server: {}", std::strerror(errno)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // One byte once it listens; end of file without it when it gives up (or
  // steps back for a server that holds the lock).
  char byte = 0;
  ssize_t n = 0;
  const auto t0 = Clock::now();
  for (;;) {
    pollfd p{ready[0], POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      n = ::read(ready[0], &byte, 1);
      if (n >= 0 || errno != EINTR) break;
    }
    if (seconds_since(t0) > kStartTimeoutS) break;
  }
  ::close(ready[0]);
  return n == 1;
}

// Whether a live server holds the lock (then it is starting or serving).
bool lock_held(const fs::path& lock) {
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

class ServedEvaluator final : public Evaluator {
 public:
  ServedEvaluator(EvaluatorConfig config, ServerPaths paths, double idle_s)
      : config_(std::move(config)), paths_(std::move(paths)), idle_s_(idle_s), options_(config_.options) {}

  EvalResult evaluate(const Task& task, const Solution& solution) override {
    return evaluate_batch(task, {solution}).front();
  }

  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& solutions) override {
    Json list = Json::array();
    for (const auto& s : solutions) list.push_back(s.to_json());
    std::error_code ec;
    const Json reply = call(Json::obj({{"protocol", kProtocol},
                                       {"op", "evaluate"},
                                       {"cwd", fs::current_path(ec).string()},
                                       {"task", task.spec().to_json()},
                                       {"solutions", list},
                                       {"options", options_.to_json()}}));
    const Json* results = reply.find("results");
    if (!results || !results->is_array() || results->size() != solutions.size())
      throw Error(Status::subprocess, "the evaluation server's answer has no result for every solution");
    std::vector<EvalResult> out;
    for (std::size_t i = 0; i < results->size(); ++i) out.push_back(EvalResult::from_json((*results)[i]));
    return out;
  }

  DeviceInfo device() const override {
    const Json reply = call(Json::obj({{"protocol", kProtocol}, {"op", "device"}}));
    const Json* d = reply.find("device");
    if (!d) throw Error(Status::subprocess, "the evaluation server's answer names no device");
    return DeviceInfo::from_json(*d);
  }

  EvalOptions& options() override { return options_; }
  void cancel() override { cancelled_.store(true); }

 private:
  // One connection per request: a client that waits holds no place another
  // one needs. Cancelling closes it, which the server takes as a cancel.
  Json call(const Json& request) const {
    const int fd = connect_or_start();
    struct Close {
      int fd;
      ~Close() { ::close(fd); }
    } close{fd};
    Json reply;
    try {
      send_frame(fd, request);
      reply = read_frame(fd, [&] { return !cancelled_.load(); });
    } catch (const Error& e) {
      if (e.status() != Status::subprocess) throw;
      // It crashed, was stopped, or refused this process: its log says which.
      throw Error(Status::subprocess, fmt::format("{} (the server's log: {})", e.what(), paths_.log.string()));
    }
    if (const Json* e = reply.find("error"))
      throw Error(static_cast<Status>(e->get_int("status", static_cast<int>(Status::internal))),
                  e->get_string("message"));
    return reply;
  }

  int connect_or_start() const {
    for (int attempt = 0;; ++attempt) {
      if (cancelled_.load()) throw Error(Status::cancelled, "cancelled before reaching the evaluation server");
      if (const int fd = try_connect(paths_.socket); fd >= 0) return fd;
      // A server that holds the lock is starting or serving: wait for its socket.
      const auto t0 = Clock::now();
      while (lock_held(paths_.lock) && seconds_since(t0) < kStartTimeoutS) {
        if (const int fd = try_connect(paths_.socket); fd >= 0) return fd;
        if (cancelled_.load()) throw Error(Status::cancelled, "cancelled while the evaluation server started");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (const int fd = try_connect(paths_.socket); fd >= 0) return fd;
      // None: start one. It steps back when another start won the lock
      // meanwhile; then that one's socket is tried again.
      if (start_server(config_, paths_, idle_s_)) continue;
      if (attempt < 2 && lock_held(paths_.lock)) continue;
      const std::string why = log_tail(paths_.log);
      throw Error(Status::subprocess, fmt::format("the evaluation server did not start{}{}", why.empty() ? "" : ": ",
                                                  why.empty() ? fmt::format(" (log: {})", paths_.log.string()) : why));
    }
  }

  EvaluatorConfig config_;
  ServerPaths paths_;
  double idle_s_;
  EvalOptions options_;
  mutable std::atomic<bool> cancelled_{false};
};

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }

// One request, read whole from its connection. While an evaluation runs, a
// client that hangs up (cancelled, killed) or a stop signal cancels it; the
// evaluator is then replaced, since a cancelled one stays cancelled.
void handle(int fd, const std::string& line, const EvaluatorConfig& config, std::unique_ptr<Evaluator>& ev) {
  try {
    const Json request = Json::parse(line);
    if (request.get_int("protocol", 0) != kProtocol)
      throw Error(Status::version, fmt::format("the client speaks protocol {}, this server {}",
                                               request.get_int("protocol", 0), kProtocol));
    const std::string op = request.get_string("op");
    if (op == "stop") {
      g_stop.store(true);
      send_frame(fd, Json::obj({{"stopping", true}, {"pid", static_cast<int>(::getpid())}}));
      return;
    }
    // A client that gave up while its request waited: nothing to do, and
    // no reason to lose the warm evaluator.
    if (pollfd p{fd, POLLIN | POLLRDHUP, 0}; ::poll(&p, 1, 0) > 0) return;
    if (!ev) ev = make_evaluator(config);
    if (op == "device") {
      send_frame(fd, Json::obj({{"device", ev->device().to_json()}}));
      return;
    }
    if (op != "evaluate") throw Error(Status::invalid_argument, fmt::format("unknown request \"{}\"", op));
    // Relative paths in the task (data files) are the client's.
    if (const std::string cwd = request.get_string("cwd"); !cwd.empty() && ::chdir(cwd.c_str()) != 0)
      throw Error(Status::io, fmt::format("the evaluation server cannot enter the client's folder {}: {}", cwd,
                                          std::strerror(errno)));
    const Json* task_json = request.find("task");
    const Json* solutions_json = request.find("solutions");
    if (!task_json || !solutions_json || !solutions_json->is_array())
      throw Error(Status::invalid_argument, "an evaluate request needs a task and a list of solutions");
    const SpecTask task(TaskSpec::from_json(*task_json));
    std::vector<Solution> solutions;
    for (std::size_t i = 0; i < solutions_json->size(); ++i) solutions.push_back(Solution::from_json((*solutions_json)[i]));
    const Json* options = request.find("options");
    ev->options() = options ? EvalOptions::from_json(*options) : EvalOptions{};

    std::atomic<bool> done{false}, cancelled{false};
    std::thread watch([&] {
      while (!done.load()) {
        pollfd p{fd, POLLIN | POLLRDHUP, 0};
        const int r = ::poll(&p, 1, 100);
        if ((r > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) || g_stop.load()) {
          cancelled.store(true);
          ev->cancel();
          return;
        }
      }
    });
    std::vector<EvalResult> results;
    try {
      results = ev->evaluate_batch(task, solutions);
    } catch (...) {
      done.store(true);
      watch.join();
      if (cancelled.load()) ev.reset();
      throw;
    }
    done.store(true);
    watch.join();
    if (cancelled.load()) {
      ev.reset();
      return;  // nobody is listening
    }
    Json list = Json::array();
    for (auto& r : results) {
      r.metrics["evaluation_server_pid"] = static_cast<int>(::getpid());
      list.push_back(r.to_json());
    }
    send_frame(fd, Json::obj({{"results", list}}));
  } catch (const Error& e) {
    try {
      send_frame(fd, error_frame(e));
    } catch (const Error&) {
    }
  } catch (const std::exception& e) {
    try {
      send_frame(fd, error_frame(Error(Status::internal, e.what())));
    } catch (const Error&) {
    }
  }
}

// Whether a peer lives in this process's PID, user and mount namespaces:
// a sandboxed candidate (bubblewrap gives it new ones) that could reach the
// socket through a folder bound into its sandbox is refused, although its
// uid maps to this user's.
bool same_namespaces(pid_t peer) {
  if (peer <= 0) return false;  // from a PID namespace this one cannot see
  for (const char* ns : {"pid", "user", "mnt"}) {
    struct stat theirs {}, ours {};
    if (::stat(fmt::format("/proc/{}/ns/{}", peer, ns).c_str(), &theirs) != 0 ||
        ::stat(fmt::format("/proc/self/ns/{}", ns).c_str(), &ours) != 0 || theirs.st_ino != ours.st_ino ||
        theirs.st_dev != ours.st_dev)
      return false;
  }
  return true;
}

// Connections whose request has not arrived whole, read side by side: a
// client that connects and says nothing, or half a request, holds no place
// another one needs, and is dropped after kRequestSilenceS without a byte
// (kRequestWholeS at most for the whole request). A client writes its one
// line right after connecting, so 2 s of silence is a client that will not.
// Only the time the server spends waiting counts: while it evaluates,
// nobody is read.
class WaitingClients {
 public:
  static constexpr double kRequestSilenceS = 2;
  static constexpr double kRequestWholeS = 30;
  static constexpr std::size_t kMaxClients = 64;

  struct Request {
    int fd = -1;
    std::string line;
  };

  ~WaitingClients() {
    for (auto& c : clients_) ::close(c.fd);
  }

  bool empty() const { return clients_.empty(); }

  // An accepted connection of this user's.
  void add(int fd) {
    if (clients_.size() >= kMaxClients) {
      drop(fd, Status::state, fmt::format("the evaluation server already has {} connections waiting for "
                                                "their requests", kMaxClients));
      return;
    }
    const auto now = Clock::now();
    clients_.push_back({fd, {}, now, now});
  }

  // Descriptors to poll for input, appended to `fds`.
  void poll_list(std::vector<pollfd>& fds) const {
    for (const auto& c : clients_) fds.push_back({c.fd, POLLIN, 0});
  }

  // Reads the connections `fds` (from poll_list, in order, starting at
  // `first`) said are readable and drops the silent ones; returns the first
  // request that has arrived whole, taken out of the list.
  std::optional<Request> read(const std::vector<pollfd>& fds, std::size_t first) {
    std::optional<Request> whole;
    std::vector<Client> kept;
    for (std::size_t i = 0; i < clients_.size(); ++i) {
      Client& c = clients_[i];
      // One accepted after the poll is at the end, not in `fds` yet.
      const bool readable = first + i < fds.size() && (fds[first + i].revents & (POLLIN | POLLHUP | POLLERR));
      if (readable && whole) {
        kept.push_back(std::move(c));  // read on the next pass: not silent
        continue;
      }
      if (readable) {
        if (!receive(c)) continue;  // closed or dropped
        if (const auto nl = c.data.find('\n'); nl != std::string::npos) {
          buffered_ -= c.data.size();
          c.data.resize(nl);
          whole = Request{c.fd, std::move(c.data)};
          continue;
        }
      }
      const double silent = seconds_since(c.heard), waited = seconds_since(c.since);
      if (silent >= kRequestSilenceS || waited >= kRequestWholeS) {
        buffered_ -= c.data.size();
        std::fprintf(stderr, "ksearch evaluation server: dropped a connection that sent %s in %.1f s\n",
                     c.data.empty() ? "nothing" : "half a request", waited);
        drop(c.fd, Status::timeout,
             fmt::format("the evaluation server got no whole request within {:g} s of silence ({:g} s in all)",
                         kRequestSilenceS, kRequestWholeS));
        continue;
      }
      kept.push_back(std::move(c));
    }
    clients_ = std::move(kept);
    return whole;
  }

  // The server was busy for `busy`: that time does not count against anyone.
  void pause(Clock::duration busy) {
    for (auto& c : clients_) {
      c.since += busy;
      c.heard += busy;
    }
  }

 private:
  struct Client {
    int fd = -1;
    std::string data;
    Clock::time_point since;  // connected
    Clock::time_point heard;  // its last byte
  };

  // Best effort (the client may be gone): says why, then closes.
  static void drop(int fd, Status status, const std::string& why) {
    const std::string frame = error_frame(Error(status, why)).dump() + '\n';
    if (::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) errno = 0;
    ::close(fd);
  }

  // False when the connection is closed (or was dropped for its size).
  bool receive(Client& c) {
    char buf[1 << 16];
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {
      buffered_ -= c.data.size();
      ::close(c.fd);
      return false;
    }
    // All waiting requests together stay within one frame's cap.
    if (buffered_ + static_cast<std::size_t>(n) > kMaxFrame) {
      buffered_ -= c.data.size();
      drop(c.fd, Status::parse, "a request to the evaluation server is over 1 GiB");
      return false;
    }
    c.data.append(buf, static_cast<std::size_t>(n));
    buffered_ += static_cast<std::size_t>(n);
    c.heard = Clock::now();
    return true;
  }

  std::vector<Client> clients_;
  std::size_t buffered_ = 0;
};

// Accepts a connection, keeping it when its peer is this user's in this
// process's namespaces.
void accept_client(int listener, WaitingClients& waiting) {
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && peer.uid == ::getuid() &&
      same_namespaces(peer.pid)) {
    waiting.add(fd);
    return;
  }
  std::fprintf(stderr, "ksearch evaluation server: refused a connection from pid %d, uid %u (another user, or "
                       "another namespace such as a sandbox)\n", static_cast<int>(peer.pid), peer.uid);
  ::close(fd);
}

// Serves until a stop or `idle_s` without a request; `ev` is the warm
// evaluator, kept by the caller so its workers end after the socket is gone.
void serve_loop(int listener, const EvaluatorConfig& config, double idle_s, std::unique_ptr<Evaluator>& ev) {
  WaitingClients waiting;
  auto last = Clock::now();
  while (!g_stop.load()) {
    std::vector<pollfd> fds{{listener, POLLIN, 0}};
    waiting.poll_list(fds);
    const int r = ::poll(fds.data(), fds.size(), 100);
    if (r < 0 && errno != EINTR) break;
    if (r > 0 && (fds[0].revents & POLLIN)) {
      accept_client(listener, waiting);
      last = Clock::now();
    }
    if (auto request = waiting.read(fds, 1)) {
      const auto t0 = Clock::now();
      handle(request->fd, request->line, config, ev);
      ::close(request->fd);
      waiting.pause(Clock::now() - t0);
      last = Clock::now();
    }
    if (waiting.empty() && seconds_since(last) >= idle_s) break;
  }
}

}  // namespace

ServerPaths server_paths(const EvaluatorConfig& config) {
  const EvaluatorConfig c = resolved(config);
  struct stat st {};
  ::stat(c.worker_path.c_str(), &st);
  const std::string identity =
      fmt::format("ksearch-eval-server {}\n{}\n{} {} {}\nuid {}\nenv {}", kProtocol, config_json(c).dump(),
                  c.worker_path.string(), st.st_size, st.st_mtim.tv_sec, ::getuid(), environment_digest());
  ServerPaths p;
  p.id = util::sha256_hex(identity).substr(0, 16);
  p.dir = server_dir();
  p.socket = p.dir / ("eval-" + p.id + ".sock");
  p.lock = p.dir / ("eval-" + p.id + ".lock");
  p.log = p.dir / ("eval-" + p.id + ".log");
  return p;
}

int serve_evaluations(const EvaluatorConfig& config, const ServerPaths& paths, double idle_s, int ready_fd) {
  const int lock = ::open(paths.lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock < 0) {
    std::fprintf(stderr, "ksearch evaluation server: cannot open %s: %s\n", paths.lock.c_str(), std::strerror(errno));
    return 1;
  }
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0) return 0;  // another server serves this configuration
  // What earlier starts wrote (its stderr appends); a log that cannot be
  // truncated only keeps their lines.
  if (!paths.log.empty() && ::truncate(paths.log.c_str(), 0) != 0) errno = 0;
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock, 0) != 0 || ::pwrite(lock, pid.data(), pid.size(), 0) < 0) {
    // The pid is for people; the lock is what counts.
  }
  ::unlink(paths.socket.c_str());  // a server that died without cleaning up
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  try {
    a = address_of(paths.socket);
  } catch (const Error& e) {
    std::fprintf(stderr, "ksearch evaluation server: %s\n", e.what());
    return 1;
  }
  const mode_t old_mask = ::umask(077);
  const bool bound = listener >= 0 && ::bind(listener, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 &&
                     ::listen(listener, 16) == 0;
  ::umask(old_mask);
  if (!bound) {
    std::fprintf(stderr, "ksearch evaluation server: cannot listen on %s: %s\n", paths.socket.c_str(),
                 std::strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  for (int s : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(s, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  std::fprintf(stderr, "ksearch evaluation server %d: serving on %s, exiting after %g s idle\n",
               static_cast<int>(::getpid()), paths.socket.c_str(), idle_s);
  if (ready_fd >= 0) {
    const char byte = 1;
    if (::write(ready_fd, &byte, 1) < 0) {
      // The client gave up waiting; it will find the socket next time.
    }
    ::close(ready_fd);
  }

  std::unique_ptr<Evaluator> ev;
  serve_loop(listener, config, idle_s, ev);
  // Removed before the workers end, so no client connects to a server on its way out.
  ::unlink(paths.socket.c_str());
  ::close(listener);
  ev.reset();
  // Nothing stays behind: the log (which a client reads only when a start
  // fails) and the lock go too, while the lock is still held.
  if (!paths.log.empty()) ::unlink(paths.log.c_str());
  ::unlink(paths.lock.c_str());
  ::close(lock);
  return 0;
}

std::unique_ptr<Evaluator> connect_evaluation_server(const EvaluatorConfig& config, double idle_s) {
  if (!(idle_s > 0)) throw Error(Status::invalid_argument, "the evaluation server's idle timeout must be positive");
  EvaluatorConfig c = resolved(config);
  c.options = config.options;
  // The sandbox's state (and its warning, or its refusal with "on") is this
  // process's to tell, as with an evaluator of its own; the server's log is
  // read by nobody.
  isolation::Sandbox probe(c.sandbox);
  ServerPaths paths = server_paths(c);
  return std::make_unique<ServedEvaluator>(std::move(c), std::move(paths), idle_s);
}

bool stop_evaluation_server(const EvaluatorConfig& config) {
  const ServerPaths paths = server_paths(config);
  if (!lock_held(paths.lock)) return false;
  // The lock holder wrote its pid there. SIGTERM stops it at once, an
  // evaluation in progress included (it is cancelled), rather than after it.
  int pid = 0;
  try {
    pid = std::stoi(util::read_file(paths.lock, 64));
  } catch (const std::exception&) {
    return false;
  }
  // That pid is still the server (not a process that reused it).
  std::ifstream proc(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(proc)), std::istreambuf_iterator<char>());
  if (pid <= 0 || cmdline.find("eval-server") == std::string::npos || !lock_held(paths.lock)) return false;
  if (::kill(pid, SIGTERM) != 0) return false;
  // Its workers end before it exits and lets go of the lock.
  const auto t0 = Clock::now();
  while (lock_held(paths.lock) && seconds_since(t0) < 60) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return true;
}

// Used by ksearch-worker --role eval-server.
EvaluatorConfig server_config_from_json(const Json& j) { return config_from_json(j); }

}  // namespace ks::eval
