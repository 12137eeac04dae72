#include "eval/host/zygote.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "eval/host/candidate_wire.hpp"
#include "eval/host/child_spawn.hpp"

namespace ks::eval::host {
namespace {

using namespace wire;

struct Zygote {
  ZygoteKind kind;
  pid_t pid = -1;
  int sock = -1;
  int out = -1;  // its stdout and stderr, read when it fails
  int failures = 0;
  std::string problem;  // why it last refused a fork or failed to start

  ~Zygote() { end(); }
  // What it printed since the last call (a warning an import gives), read so
  // that a full pipe never blocks it; its end is kept for `problem`.
  std::string drain() {
    std::string text;
    char buf[4096];
    ssize_t n;
    while (out >= 0 && (n = ::read(out, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
    return text.size() > 2048 ? text.substr(text.size() - 2048) : text;
  }
  void end() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    if (sock >= 0) ::close(sock);
    if (out >= 0) ::close(out);
    pid = -1;
    sock = out = -1;
  }
};

std::mutex g_zygote_mutex;
Zygote g_zygote;
constexpr int kZygoteFailuresAllowed = 3;  // then candidates are started directly
constexpr int kZygoteStartMs = 180'000;    // its imports, on a loaded machine
constexpr int kZygoteForkMs = 60'000;

// This process adopts orphaned descendants while it lives.
struct SubreaperWindow {
  SubreaperWindow() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
  ~SubreaperWindow() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
  SubreaperWindow(const SubreaperWindow&) = delete;
  SubreaperWindow& operator=(const SubreaperWindow&) = delete;
};

bool start_zygote(Zygote& z, const ZygoteKind& kind) {
  z.end();
  int sv[2], out[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return false;
  }
  ChildSetup setup;
  setup.sock = sv[1];
  setup.out = out[1];
  setup.namespaces = true;
  setup.pid_namespace = false;  // its children get theirs
  setup.layers = false;
  setup.uid_map = fmt::format("0 {} 1", ::geteuid());
  setup.gid_map = fmt::format("0 {} 1", ::getegid());
  // It imports under its children's limit, as a started process would:
  // libraries that size what they reserve by the limit then fit them too.
  setup.exe = kind.interpreter.front();
  setup.args = kind.interpreter;
  setup.args.emplace_back("--zygote");
  setup.args.push_back(kind.imports);
  setup.rlimit_as = kind.rlimit_as;
  for (auto& a : setup.args) setup.argv.push_back(a.data());
  setup.argv.push_back(setup.isolation);
  setup.argv.push_back(nullptr);
  z.pid = spawn(setup);
  ::close(sv[1]);
  ::close(out[1]);
  z.sock = sv[0];
  z.out = out[0];
  ::fcntl(z.out, F_SETFL, O_NONBLOCK);
  z.kind = kind;
  if (z.pid < 0) {
    z.end();
    return false;
  }
  std::string buf;
  std::vector<int> fds;
  const ssize_t n = receive_within(z.sock, kZygoteStartMs, buf, fds);  // after its imports
  for (int fd : fds) ::close(fd);
  Reader r{buf};
  if (n <= 0 || r.num<std::uint32_t>() != kMagic || r.num<std::uint32_t>() != kHello) {
    z.problem = "it did not start: " + z.drain();
    z.end();
    return false;
  }
  z.drain();
  return true;
}

}  // namespace

pid_t fork_through_zygote(const ZygoteKind& kind, const std::string& spec, int sock, int out, pid_t* init) {
  *init = -1;
  std::lock_guard lock(g_zygote_mutex);
  Zygote& z = g_zygote;
  for (int attempt = 0; attempt < 2 && z.failures < kZygoteFailuresAllowed; ++attempt) {
    if (z.pid <= 0 || z.kind != kind) {
      if (!start_zygote(z, kind)) {
        ++z.failures;
        continue;
      }
    }
    z.drain();
    const std::uint64_t token = fresh_token();
    Writer w;
    w.str(spec);
    std::string buf;
    std::vector<int> fds;
    ssize_t n = -1;
    bool sent = false;
    {
      // Orphans of this moment are this process's: the intermediate process
      // exits before the zygote answers, and so the new one is adopted.
      SubreaperWindow adopt;
      sent = send_with_fds(z.sock, make_packet(kFork, token, w.s), {sock, out});
      if (sent) n = receive_within(z.sock, kZygoteForkMs, buf, fds);
    }
    for (int fd : fds) ::close(fd);
    Reader r{buf};
    const bool framed = n > 0 && r.num<std::uint32_t>() == kMagic;
    const auto op = r.num<std::uint32_t>();
    const bool mine = r.num<std::uint64_t>() == token;
    const std::string text = r.str();
    if (framed && mine && r.ok && op == kOk) {
      char* end = nullptr;
      const long pid = std::strtol(text.c_str(), &end, 10);
      if (const long second = std::strtol(end, nullptr, 10); second > 0) *init = static_cast<pid_t>(second);
      if (pid > 0) return static_cast<pid_t>(pid);
    }
    ++z.failures;
    if (framed && mine && op == kError) {  // it refused, and made nothing: a fresh one next time
      z.problem = text;
      z.end();
      return -1;
    }
    // Gone, silent or broken after the request: it may have made a process.
    z.problem = sent ? "it did not answer a fork request: " + z.drain() : "it hung up";
    z.end();
    return sent ? kZygoteUnclear : -1;
  }
  return -1;
}

void disable_zygote() {
  std::lock_guard lock(g_zygote_mutex);
  g_zygote.end();
  g_zygote.failures = kZygoteFailuresAllowed;
}

pid_t python_zygote_pid() {
  std::lock_guard lock(g_zygote_mutex);
  return g_zygote.pid;
}

std::string python_zygote_problem() {
  std::lock_guard lock(g_zygote_mutex);
  return g_zygote.problem;
}

void end_python_zygote() {
  std::lock_guard lock(g_zygote_mutex);
  g_zygote.end();
}

}  // namespace ks::eval::host
