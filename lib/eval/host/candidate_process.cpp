#include "eval/host/candidate_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>
#include <thread>

#include "eval/backend.hpp"
#include "eval/host/candidate_wire.hpp"
#include "eval/host/child_spawn.hpp"
#include "eval/host/guarded_memory.hpp"
#include "eval/host/zygote.hpp"
#include "eval/isolation/layers.hpp"
#include "eval/protocol.hpp"
#include "ksearch/json.hpp"

extern char** environ;

namespace ks::eval::host {
namespace {

namespace fs = std::filesystem;
using namespace wire;

constexpr int kResidentPollMs = 20;  // how often a resident limit is checked while the candidate works

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : fmt::format("signal {}", sig);
}

std::atomic<bool> g_namespaces_unavailable{false};

bool zygote_wanted(const CandidateProcessOptions& options) {
  const char* v = std::getenv("KSEARCH_PYTHON_ZYGOTE");
  return options.zygote && !options.command.empty() && !(v && std::string_view(v) == "0");
}

}  // namespace

struct CandidateProcess::Reply {
  std::uint32_t op = 0;
  std::string text;
  std::vector<int> fds;  // kept for a load request's answer only (CandidateProcess::ask)
};

CandidateProcess::CandidateProcess(const CandidateProcessOptions& options)
    : memory_limit_(options.memory_limit), resident_limit_(options.resident_limit) {
  bool forked = false;  // the last attempt's process came from the Python zygote
  for (int attempt = 0; attempt < 4; ++attempt) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      throw RunError({EvalStatus::runtime_error,
                      fmt::format("cannot start the candidate's process: socketpair: {}", std::strerror(errno))});
    pid_ = -1;
    dead_ = running_ = false;
    wait_status_ = 0;
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(sv[0]);
      ::close(sv[1]);
      throw RunError({EvalStatus::runtime_error,
                      fmt::format("cannot start the candidate's process: pipe: {}", std::strerror(errno))});
    }
    if (out_ >= 0) ::close(out_);
    out_ = out[0];
    ::fcntl(out_, F_SETFL, O_NONBLOCK);
    ChildSetup setup = child_setup(options, sv[1], out[1]);
    if (setup.namespaces && zygote_wanted(options)) {
      pid_ = fork_through_zygote({options.command, options.zygote_imports, setup.rlimit_as}, zygote_spec(setup),
                                 sv[1], out[1], &init_pid_);
      forked = pid_ > 0;
    }
    if (pid_ == kZygoteUnclear) {
      // A process may hold this socket and pipe: new ones, and a fresh start.
      ::close(sv[0]);
      ::close(sv[1]);
      ::close(out[1]);
      continue;
    }
    if (pid_ < 0) pid_ = spawn(setup);
    const int spawn_errno = errno;
    ::close(sv[1]);
    ::close(out[1]);
    sock_ = sv[0];
    if (pid_ < 0 && setup.namespaces) {
      // No user namespaces here (or not nested ones): a plain process.
      g_namespaces_unavailable = true;
      ::close(sock_);
      sock_ = -1;
      continue;
    }
    if (pid_ < 0)
      throw RunError({EvalStatus::runtime_error,
                      fmt::format("cannot start the candidate's process: clone: {}", std::strerror(spawn_errno))});
    running_ = true;
    if (read_hello()) return;
    if (!start_failed(options, setup.namespaces, forked)) break;
  }
  throw RunError({EvalStatus::runtime_error, "cannot start the candidate's process"});
}

// How the process is started: its program, its layers, its environment.
ChildSetup CandidateProcess::child_setup(const CandidateProcessOptions& options, int sock, int out) {
  ChildSetup setup;
  setup.sock = sock;
  setup.out = out;
  setup.namespaces = !g_namespaces_unavailable.load();
  setup.uid_map = fmt::format("1000 {} 1", ::geteuid());
  setup.gid_map = fmt::format("1000 {} 1", ::getegid());
  setup.pid_namespace = options.pid_namespace;
  setup.hide = options.hide;
  std::map<std::string, std::string> env_over;  // names the process gets other values for
  if (setup.namespaces) {
    setup.private_tmp = isolation::private_tmp_mount_point();
    env_over["TMPDIR"] = env_over["HOME"] = setup.private_tmp;
  } else {
    // No tmpfs of its own: a folder of its own, deleted with the process.
    env_over["TMPDIR"] = env_over["HOME"] = own_tmp_folder();
  }
  if (options.command.empty()) {
    setup.exe = options.exe;
    setup.args = {"ksearch-worker", "--role", "candidate", "--memory-limit", std::to_string(options.memory_limit),
                  "--isolation"};
  } else {
    setup.exe = options.command.front();
    setup.args = options.command;
    setup.rlimit_as = options.memory_limit;
  }
  for (const auto& e : options.env)
    if (const auto eq = e.find('='); eq != std::string::npos) env_over[e.substr(0, eq)] = e.substr(eq + 1);
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    if (!env_over.count(std::string(entry.substr(0, entry.find('='))))) setup.env.emplace_back(entry);
  }
  for (const auto& [name, value] : env_over) setup.env.push_back(name + "=" + value);
  for (auto& e : setup.env) setup.envp.push_back(e.data());
  setup.envp.push_back(nullptr);
  for (auto& a : setup.args) setup.argv.push_back(a.data());
  setup.argv.push_back(setup.isolation);
  setup.argv.push_back(nullptr);
  return setup;
}

// What the zygote's forked child is told: its layers, as the steps the
// spawned child carries out too, its environment and limit.
std::string CandidateProcess::zygote_spec(const ChildSetup& setup) {
  Json::Array env;
  for (const auto& e : setup.env) env.push_back(Json(e));
  return Json::obj({{"pid_namespace", Json(setup.pid_namespace)},
                    {"mounts", isolation::mounts_json(isolation::candidate_mounts(setup.private_tmp,
                                                                                  setup.pid_namespace, setup.hide))},
                    {"env", Json(std::move(env))},
                    {"rlimit_as", Json(static_cast<std::int64_t>(setup.rlimit_as))}})
      .dump();
}

// Its first words come before any candidate code exists in it. True once
// they came; false when it died first.
bool CandidateProcess::read_hello() {
  std::string buf;
  std::vector<int> fds;
  const ssize_t n = receive(sock_, buf, fds);
  for (int fd : fds) ::close(fd);
  Reader r{buf};
  const auto magic = r.num<std::uint32_t>();
  const auto op = r.num<std::uint32_t>();
  r.num<std::uint64_t>();
  if (n > 0 && magic == kMagic && op == kHello) {
    isolation_ = r.str();
    // Its own words, said before any candidate code existed in it; but the
    // seccomp filter is what /proc shows (isolation()).
    if (const auto at = isolation_.find("+seccomp"); at != std::string::npos) isolation_.erase(at, 8);
    stop();
    return true;
  }
  kill_and_reap();
  ::close(sock_);
  sock_ = -1;
  return false;
}

// A process that died before its first words: true where another way of
// starting it is worth a try (directly instead of forked, or without
// namespaces); otherwise throws why.
bool CandidateProcess::start_failed(const CandidateProcessOptions& options, bool namespaces, bool& forked) {
  const bool exited = WIFEXITED(wait_status_);
  const int code = exited ? WEXITSTATUS(wait_status_) : -1;
  if (forked && (code == isolation::kExitSetupFailed || code == isolation::kExitHideFailed)) {
    // The forked process could not set up its layers: that says nothing of
    // what a started one can (which fails closed itself). Started directly
    // from now on.
    disable_zygote();
    forked = false;
    return true;
  }
  forked = false;
  if (namespaces && code == isolation::kExitHideFailed)
    // Fail closed: never fall back to a process that sees the folders.
    throw RunError({EvalStatus::runtime_error,
                    "the candidate's process could not set up its mount namespace (a tmpfs covering the "
                    "evaluator's reference folders, its private /tmp or its /proc failed), so it does not run"});
  if (namespaces && code == isolation::kExitSetupFailed) {
    g_namespaces_unavailable = true;
    return true;
  }
  const std::string tail = output_tail();
  throw RunError({EvalStatus::runtime_error,
                  fmt::format("the candidate's process did not start ({}): {}{}",
                              options.command.empty() ? options.exe + " --role candidate" : options.command.front(),
                              exited ? fmt::format("exit code {}", code)
                                     : fmt::format("signal {}", WTERMSIG(wait_status_)),
                              tail.empty() ? tail : "; " + tail)});
}

CandidateProcess::~CandidateProcess() {
  kill_and_reap();
  if (sock_ >= 0) ::close(sock_);
  if (out_ >= 0) ::close(out_);
  if (!own_tmp_.empty()) {
    std::error_code ec;
    fs::remove_all(own_tmp_, ec);  // links in it are removed, never followed
  }
}

const std::string& CandidateProcess::own_tmp_folder() {
  if (own_tmp_.empty()) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/ksearch-candidate-XXXXXX";
    if (!::mkdtemp(pattern.data()))
      throw RunError({EvalStatus::runtime_error,
                      fmt::format("cannot make the candidate's own folder {}: {}", pattern, std::strerror(errno))});
    own_tmp_ = pattern;
  }
  return own_tmp_;
}

// Keeps the last bytes the candidate printed; never blocks.
void CandidateProcess::drain_output() {
  if (out_ < 0) return;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) return;
    output_.append(buf, static_cast<std::size_t>(n));
    if (output_.size() > 2 * kOutputTail) output_.erase(0, output_.size() - kOutputTail);
  }
}

std::string CandidateProcess::output_tail() {
  drain_output();
  if (output_.empty()) return {};
  const bool clipped = output_.size() > kOutputTail;
  return fmt::format("the candidate's output{}:\n{}", clipped ? " (its end)" : "",
                     clipped ? output_.substr(output_.size() - kOutputTail) : output_);
}

void CandidateProcess::kill_and_reap() {
  if (pid_ > 0 && !dead_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    wait_status_ = st;
    dead_ = true;
  }
  end_init();
}

void CandidateProcess::end_init() {
  if (init_pid_ <= 0) return;
  ::kill(init_pid_, SIGKILL);  // and with it whatever is left in the namespace
  while (::waitpid(init_pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  init_pid_ = -1;
}

// Freezes the process and every thread in it until the next request.
void CandidateProcess::stop() {
  if (dead_ || !running_) return;
  ::kill(pid_, SIGSTOP);
  int st = 0;
  pid_t r;
  do r = ::waitpid(pid_, &st, WUNTRACED);
  while (r < 0 && errno == EINTR);
  running_ = false;
  if (r == pid_ && !WIFSTOPPED(st)) {
    dead_ = true;
    wait_status_ = st;
  }
}

void CandidateProcess::send_packet(const std::string& packet, const std::vector<int>& fds) {
  if (!running_ && !dead_) {
    ::kill(pid_, SIGCONT);
    running_ = true;
  }
  if (!send_with_fds(sock_, packet, fds)) died("receiving a request");
}

[[noreturn]] void CandidateProcess::broke(const std::string& what) {
  kill_and_reap();
  failure_ = fmt::format(
      "the candidate's process broke the evaluator's protocol ({}) and was stopped; a kernel must not write to "
      "descriptors it did not open",
      what);
  throw RunError(Failure{.status = EvalStatus::runtime_error, .message = failure_, .contained = true});
}

[[noreturn]] void CandidateProcess::died(const std::string& while_doing) {
  // A crash report about memory comes from a process that waits to be seen
  // (its new-handler and crash handler pause): the evaluator reads its
  // memory itself, which alone makes the verdict, then ends it.
  const bool waits = crash_line_.rfind("out of memory", 0) == 0 ||
                     crash_line_.find("after an allocation failed") != std::string::npos;
  if (auto f = memory_verdict(while_doing); f && waits) {
    f->message += crash_line_.empty() ? "" : "; it said: " + crash_line_;
    kill_and_reap();
    failure_ = f->message;
    f->log = output_tail();
    throw RunError(*f);
  }
  // It is dying (a crash report came, or it hung up): give it a moment to
  // finish of its own accord, so its real cause of death is seen.
  for (int i = 0; i < (waits ? 0 : 200) && !dead_; ++i) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      dead_ = true;
      wait_status_ = st;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const bool hung_up = !dead_ && !waits;
  const std::string memory = waits ? memory_note() : "";
  kill_and_reap();
  const std::string said = crash_line_.empty() ? "" : ": " + crash_line_;
  Failure f{.status = EvalStatus::crashed, .contained = true};
  const int st = wait_status_;
  if (hung_up) {
    f.message = fmt::format("the candidate's process closed its channel to the evaluator while {} and was stopped",
                            while_doing);
  } else if (waits) {
    // Its words: not a verdict the evaluator saw (memory_verdict).
    f.status = EvalStatus::runtime_error;
    f.message = fmt::format("the candidate's process reported that an allocation failed while {}{}{}", while_doing,
                            said, memory);
  } else if (WIFEXITED(st) && WEXITSTATUS(st) > 128 && !crash_line_.empty()) {
    // The first process of its PID namespace reports a fatal signal this way
    // (guarded_memory.cpp); the crash line says which.
    const int sig = WEXITSTATUS(st) - 128;
    f.message = fmt::format("the candidate's process died of signal {} ({}) while {}{}", sig, signal_name(sig),
                            while_doing, said);
  } else if (WIFEXITED(st)) {
    f.message = fmt::format("the candidate's process exited with code {} while {}; a kernel must return, not exit{}",
                            WEXITSTATUS(st), while_doing, said);
  } else {
    const int sig = WTERMSIG(st);
    f.message = fmt::format("the candidate's process died of signal {} ({}) while {}{}", sig, signal_name(sig),
                            while_doing, said);
  }
  failure_ = f.message;
  f.log = output_tail();
  throw RunError(f);
}

std::uint64_t CandidateProcess::resident_bytes() const {
  // What the process holds itself: anonymous and shared-memory pages (of
  // every thread). Not the pages of the files it maps: PyTorch's and CUDA's
  // libraries alone are over 1 GiB of those, shared with every process and
  // given back to the page cache at will.
  return (status_kib("RssAnon") + status_kib("RssShmem")) << 10;
}

std::uint64_t CandidateProcess::status_kib(std::string_view field) const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 && line[field.size()] == ':')
      return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10);
  return 0;
}

std::optional<Failure> CandidateProcess::memory_verdict(const std::string& while_doing) {
  if (pid_ <= 0 || dead_) return std::nullopt;
  peak_vm_ = std::max(peak_vm_, status_kib("VmPeak") << 10);
  if (memory_limit_ > 0 && peak_vm_ >= memory_limit_ / 10 * 9) {
    Failure f{.status = EvalStatus::memory_limit, .contained = true};
    f.message = fmt::format(
        "the candidate's process reached the memory limit of {} MiB per candidate process while {} (its address "
        "space peaked at {} MiB); use less memory, or raise the limit (--memory-limit)",
        memory_limit_ >> 20, while_doing, peak_vm_ >> 20);
    return f;
  }
  if (const std::uint64_t rss = resident_limit_ ? resident_bytes() : 0; rss > resident_limit_) {
    Failure f{.status = EvalStatus::memory_limit, .contained = true};
    f.message = fmt::format(
        "the candidate's process held {} MiB of host memory while {}, over the limit of {} MiB per candidate "
        "process; use less host memory, or raise the limit (--memory-limit)",
        rss >> 20, while_doing, resident_limit_ >> 20);
    return f;
  }
  return std::nullopt;
}

std::string CandidateProcess::memory_note() {
  if (pid_ > 0 && !dead_) peak_vm_ = std::max(peak_vm_, status_kib("VmPeak") << 10);
  const std::uint64_t limit = memory_limit_ ? memory_limit_ : resident_limit_;
  if (!limit) return {};
  return fmt::format(" (the limit is {} MiB per candidate process{}; raise it with --memory-limit)", limit >> 20,
                     peak_vm_ && memory_limit_ ? fmt::format(", and its address space peaked at {} MiB", peak_vm_ >> 20)
                                               : "");
}

[[noreturn]] void CandidateProcess::over_memory(const std::string& while_doing, std::uint64_t resident) {
  kill_and_reap();
  failure_ = fmt::format(
      "the candidate's process held {} MiB of host memory while {}, over the limit of {} MiB per candidate "
      "process, and was stopped; use less host memory, or raise the limit (--memory-limit)",
      resident >> 20, while_doing, resident_limit_ >> 20);
  // Not out_of_memory: the evaluator's memory is not what it held.
  Failure f{.status = EvalStatus::memory_limit, .message = failure_, .contained = true};
  f.log = output_tail();
  throw RunError(f);
}

CandidateProcess::Reply CandidateProcess::request(std::uint32_t op, const std::string& payload,
                                                  const std::vector<int>& fds) {
  const std::string what = op == kLoad   ? "loading the candidate"
                           : op == kImport ? "importing the candidate's module"
                           : op == kBind   ? "binding its calls"
                                           : "running the kernel";
  if (dead_) {
    // Gone since its last answer (a thread of its own ended it): say how, once.
    if (failure_.empty()) died("it was idle after its last answer");
    throw RunError(Failure{.status = EvalStatus::runtime_error, .message = failure_, .contained = true});
  }
  const std::uint64_t token = fresh_token();
  send_packet(make_packet(op, token, payload), fds);
  std::string buf;
  for (;;) {
    // Its output is read while it runs: a full pipe would stall it.
    pollfd p[2] = {{sock_, POLLIN, 0}, {out_, POLLIN, 0}};
    if (::poll(p, 2, resident_limit_ ? kResidentPollMs : -1) < 0 && errno != EINTR) died(what);
    if (resident_limit_)
      if (const std::uint64_t rss = resident_bytes(); rss > resident_limit_) over_memory(what, rss);
    if (p[1].revents) drain_output();
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::vector<int> got_fds;
    const ssize_t n = receive(sock_, buf, got_fds);
    // Descriptors are words too: only a load request's answer, given before
    // any candidate code exists in the process, may carry one.
    if (op != kLoad) {
      for (int fd : got_fds) ::close(fd);
      got_fds.clear();
    }
    struct Closer {
      std::vector<int>& fds;
      ~Closer() {
        for (int fd : fds) ::close(fd);
      }
    } closer{got_fds};
    if (n == 0 || (n < 0 && errno != EMSGSIZE)) died(what);
    if (n < 0) broke("an oversized message");
    Reader r{buf};
    const auto magic = r.num<std::uint32_t>();
    const auto got_op = r.num<std::uint32_t>();
    const auto got_token = r.num<std::uint64_t>();
    if (!r.ok || magic != kMagic) broke("a message without the protocol's header");
    if (got_op == kCrash) {
      crash_line_ = std::string(buf.substr(kHeaderBytes));
      while (!crash_line_.empty() && (crash_line_.back() == '\n' || crash_line_.back() == '\0')) crash_line_.pop_back();
      constexpr std::string_view kPrefix = "ksearch-worker: fatal: ";
      if (crash_line_.rfind(kPrefix, 0) == 0) crash_line_.erase(0, kPrefix.size());
      died(what);
    }
    if (got_token != token) broke("an answer to a request it was not asked");
    const bool expected = got_op == kError || (op == kRun ? got_op == kDone : got_op == kOk);
    if (!expected) broke(fmt::format("an answer of the wrong kind ({})", got_op));
    Reply reply{got_op, r.str(), {}};
    if (!r.ok || r.pos != buf.size()) broke("a malformed answer");
    stop();
    reply.fds.swap(got_fds);
    return reply;
  }
}

// An error the process answered: its words, and the evaluator's own verdict
// on its memory where it saw the limit reached.
[[noreturn]] void CandidateProcess::failed_answer(const std::string& while_doing, const std::string& said) {
  if (auto f = memory_verdict(while_doing)) {
    f->message += "; it said: " + said;
    throw RunError(*f);
  }
  throw RunError(Failure{.status = EvalStatus::runtime_error, .message = said, .contained = true});
}

void CandidateProcess::load(const std::string& path) {
  Writer w;
  w.str(path);
  Reply r = request(kLoad, w.s);
  if (r.op == kError)
    throw RunError(Failure{.status = EvalStatus::runtime_error,
                           .message = "cannot load the compiled candidate: " + r.text,
                           .contained = true});
}

// Sends a block with its memfd, once: a block the process has mapped is not sent again.
void CandidateProcess::map_block(const SharedBlock& block) {
  if (std::find(mapped_.begin(), mapped_.end(), block.serial) != mapped_.end()) return;
  Writer m;
  m.u64(block.serial);
  m.u64(block.bytes);
  m.str(block.label);
  send_packet(make_packet(kMap, 0, m.s), {block.fd});
  mapped_.push_back(block.serial);
}

void CandidateProcess::share_cuda(std::uint64_t serial, std::uint64_t size, int fd) {
  Writer m;
  m.u64(serial);
  m.u64(size);
  send_packet(make_packet(kMapCuda, 0, m.s), {fd});
}

std::vector<std::uint64_t> CandidateProcess::share(const std::vector<const void*>& blocks) {
  std::vector<std::uint64_t> serials;
  for (const void* p : blocks) {
    const auto block = shared_block(p);
    if (!block)
      throw RunError(Failure{.status = EvalStatus::runtime_error, .message = "a tensor is no buffer of the evaluator"});
    serials.push_back(block->serial);
    map_block(*block);
  }
  mapped_.erase(std::remove_if(mapped_.begin(), mapped_.end(),
                               [&](std::uint64_t s) {
                                 return std::find(serials.begin(), serials.end(), s) == serials.end();
                               }),
                mapped_.end());
  return serials;
}

CandidateProcess::Answer CandidateProcess::ask(Request request_kind, std::string_view text, double* ms,
                                               const std::vector<int>& send) {
  using Clock = std::chrono::steady_clock;
  const auto op = static_cast<std::uint32_t>(request_kind);
  Writer w;
  w.str(text);
  if (w.s.size() + kHeaderBytes > kMaxPacket)
    throw RunError(Failure{.status = EvalStatus::runtime_error,
                           .message = fmt::format("a request is too large to send ({} bytes)", w.s.size())});
  if (!running_ && !dead_) {
    ::kill(pid_, SIGCONT);  // outside the timed window
    running_ = true;
  }
  const auto t0 = Clock::now();
  Reply r = request(op, w.s, send);
  if (ms) *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return Answer{r.op == kError, std::move(r.text), std::move(r.fds)};
}

void CandidateProcess::bind(const std::vector<WireCall>& calls) {
  // New blocks first, each with its memfd.
  std::vector<std::uint64_t> live;
  Writer body;
  body.u32(static_cast<std::uint32_t>(calls.size()));
  for (const auto& c : calls) {
    body.str(c.shim);
    body.str(c.fn);
    body.u32(static_cast<std::uint32_t>(c.args.size()));
    for (const auto& a : c.args) {
      if (!a.block) {
        body.u32(0);
        body.u64(a.value);
        continue;
      }
      const auto block = shared_block(a.block);
      if (!block)
        throw RunError(Failure{.status = EvalStatus::runtime_error,
                               .message = fmt::format("call \"{}\": an argument is no buffer of the evaluator", c.fn)});
      body.u32(1);
      body.u64(block->serial);
      live.push_back(block->serial);
      map_block(*block);
    }
  }
  // Blocks no call names any more are unmapped over there.
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  mapped_.erase(std::remove_if(mapped_.begin(), mapped_.end(),
                               [&](std::uint64_t s) { return !std::binary_search(live.begin(), live.end(), s); }),
                mapped_.end());
  Writer w;
  w.u32(static_cast<std::uint32_t>(live.size()));
  for (auto s : live) w.u64(s);
  w.s += body.s;
  if (w.s.size() + kHeaderBytes > kMaxPacket)
    throw RunError(Failure{.status = EvalStatus::runtime_error,
                           .message = fmt::format("the call plan is too large to send ({} bytes)", w.s.size())});
  Reply r = request(kBind, w.s);
  if (r.op == kError) failed_answer("binding its calls", r.text);
}

double CandidateProcess::run() {
  using Clock = std::chrono::steady_clock;
  if (!running_ && !dead_) {
    ::kill(pid_, SIGCONT);  // outside the timed window
    running_ = true;
  }
  const auto t0 = Clock::now();
  Reply r = request(kRun, {});
  const auto t1 = Clock::now();
  if (r.op == kError) failed_answer("running the kernel", r.text);
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

std::string CandidateProcess::isolation() {
  // "Seccomp: 2": a filter is installed (by this process, or inherited).
  if (!seccomp_seen_ && !dead_) seccomp_seen_ = status_kib("Seccomp") == 2;
  return isolation_ + (seccomp_seen_ ? "+seccomp" : "");
}

// ---------------------------------------------------------------------------

}  // namespace ks::eval::host
