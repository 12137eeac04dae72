#include "eval/host/candidate_process.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
#include <mutex>
#include <new>
#include <string_view>
#include <thread>

#include "eval/backend.hpp"
#include "eval/host/guarded_memory.hpp"
#include "eval/protocol.hpp"
#include "ksearch/json.hpp"

extern char** environ;

namespace ks::eval::host {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// The wire: one SOCK_SEQPACKET message per request or answer, a header of
// magic, op and token, then the op's fields (little-endian integers and
// length-prefixed strings).

constexpr std::uint32_t kMagic = 0x3143534bu;  // "KSC1"
constexpr std::size_t kHeaderBytes = 16;
constexpr std::size_t kMaxPacket = 128 * 1024;
constexpr int kResidentPollMs = 20;  // how often a resident limit is checked while the candidate works
constexpr int kExitSetupFailed = 125;  // the child could not enter its namespaces
constexpr int kExitHideFailed = 124;   // it could not cover the folders it must not see

enum Op : std::uint32_t {
  // worker -> candidate process
  kLoad = 1,
  kMap = 2,   // no answer: a block and its memfd
  kBind = 3,
  kRun = 4,
  kMapCuda = 5,  // no answer: a CUDA allocation and its POSIX descriptor
  kImport = 6,   // a Python candidate's module runs (eval/python/)
  // candidate process -> worker
  kHello = 16,  // sent once, before any candidate code is loaded
  kOk = 17,
  kError = 18,
  kDone = 19,
  kCrash = 20,  // from the crash reporter, just before the process dies
  // worker -> Python zygote: fork a candidate's process (its socket and
  // output pipe attached), answered kOk with its process id or kError
  kFork = 32,
};

struct Writer {
  std::string s;
  void u32(std::uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
  void u64(std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
  void str(std::string_view v) {
    u32(static_cast<std::uint32_t>(v.size()));
    s.append(v);
  }
};

// Reads fields; any read past the end marks the message malformed.
struct Reader {
  std::string_view s;
  std::size_t pos = 0;
  bool ok = true;
  template <class T>
  T num() {
    T v{};
    if (pos + sizeof v > s.size()) {
      ok = false;
      return v;
    }
    std::memcpy(&v, s.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = num<std::uint32_t>();
    if (!ok || n > s.size() - pos) {
      ok = false;
      return {};
    }
    std::string v(s.substr(pos, n));
    pos += n;
    return v;
  }
};

std::string make_packet(std::uint32_t op, std::uint64_t token, std::string_view payload) {
  Writer w;
  w.u32(kMagic);
  w.u32(op);
  w.u64(token);
  w.s.append(payload);
  return std::move(w.s);
}

std::uint64_t fresh_token() {
  std::uint64_t t = 0;
  while (t == 0)
    if (::getrandom(&t, sizeof t, 0) != static_cast<ssize_t>(sizeof t)) t = 0;
  return t;
}

// Receives one message and the descriptors that came with it. Returns the
// byte count, 0 at a hang-up, -1 on an error (errno set).
ssize_t receive(int sock, std::string& buf, std::vector<int>& fds) {
  buf.resize(kMaxPacket);
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
    }
  if (n >= 0) buf.resize(static_cast<std::size_t>(n));
  if (n > 0 && (m.msg_flags & MSG_TRUNC)) {
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

bool send_with_fds(int sock, std::string_view packet, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(packet.data()), packet.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  if (!fds.empty()) {
    m.msg_control = control;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do n = ::sendmsg(sock, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(packet.size());
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : fmt::format("signal {}", sig);
}

// ---------------------------------------------------------------------------
// Starting the process.

// Everything the child needs, prepared before clone(): between clone and
// exec a child of a threaded process may only make system calls.
struct ChildSetup {
  int sock = -1;
  int out = -1;  // the write end of the pipe its stdout and stderr go to
  bool namespaces = false;
  std::string uid_map, gid_map;
  std::string exe;
  std::vector<std::string> args;
  char isolation[64] = "process";  // filled in by the child, passed on in argv
  std::vector<char*> argv;
  std::vector<std::string> env;    // the whole environment, when it differs from the worker's
  std::vector<char*> envp;
  std::uint64_t rlimit_as = 0;     // set before exec (a Python candidate's process)
  bool pid_namespace = true;
  std::vector<std::string> hide;   // covered by an empty read-only tmpfs
  // Without a PID namespace of its own: /proc/<pid> of every other process
  // and thread there was when it started (its own is skipped in the child), covered.
  std::vector<std::string> other_processes;
  // Where a fresh tmpfs of its own is mounted, its TMPDIR and HOME: what the
  // libraries a candidate uses keep there (the CUDA JIT cache, PyTorch
  // Inductor's, Triton's dumps) is nobody else's. "" without namespaces.
  std::string private_tmp;
};

// A folder in the worker's /tmp for candidates to mount their own tmpfs on
// (ChildSetup::private_tmp); made once per worker, mode 0700. In every
// candidate's mount namespace it is a mount point, which no candidate can
// remove or replace. Throws RunError, every time, when it cannot be made.
const std::string& private_tmp_mount_point() {
  struct Made {
    std::string path, error;
    ~Made() {  // gone with the worker (an empty folder when it is killed)
      if (!path.empty()) ::rmdir(path.c_str());
    }
  };
  static const Made made = []() -> Made {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base == '/' ? base : "/tmp") + "/ksearch-candidate-XXXXXX";
    if (!::mkdtemp(templ.data()))
      return Made{"", fmt::format("cannot make a folder {} for the candidate's private /tmp: {}", templ,
                                  std::strerror(errno))};
    return Made{templ, ""};
  }();
  if (!made.error.empty()) throw RunError({EvalStatus::runtime_error, made.error});
  return made.path;
}

bool write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

void append(char* dst, std::size_t cap, const char* s) {
  std::size_t n = std::strlen(dst);
  while (*s && n + 1 < cap) dst[n++] = *s++;
  dst[n] = '\0';
}

int child_main(void* arg) {
  auto* c = static_cast<ChildSetup*>(arg);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // A session and process group of its own: kill(0, ...) reaches only it.
  ::setsid();
  if (c->namespaces) {
    // Its own user namespace, where it is an ordinary user: exec drops every
    // capability. Its own PID namespace: the worker and the sandbox's other
    // processes cannot be seen, signalled or traced from it.
    write_file("/proc/self/setgroups", "deny");
    if (!write_file("/proc/self/uid_map", c->uid_map) || !write_file("/proc/self/gid_map", c->gid_map))
      ::_exit(kExitSetupFailed);
    append(c->isolation, sizeof c->isolation, c->pid_namespace ? "+pidns" : "+userns");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
      if (!c->private_tmp.empty() &&
          (::mount("tmpfs", c->private_tmp.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=512m,mode=0700") != 0 ||
           ::chdir(c->private_tmp.c_str()) != 0))
        ::_exit(kExitHideFailed);
      // A /dev/shm of its own too: libraries keep files there (the CUDA
      // driver does), which no later candidate's should find.
      if (!c->private_tmp.empty() &&
          ::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=256m,mode=1777") != 0 &&
          errno != ENOENT)
        ::_exit(kExitHideFailed);
      // A /proc that shows only its own namespace; else an empty one. In
      // the worker's PID namespace the worker's /proc stays (the user
      // namespace keeps the worker's entries out of reach).
      if (!c->pid_namespace) {
        // In the worker's PID namespace /proc stays the worker's (the CUDA
        // driver needs one that matches its process ids), with every other
        // process's entry covered: it sees no process but itself.
        char own[24] = "/proc/";
        char digits[16];
        int n = 0;
        for (pid_t p = ::getpid(); p > 0 && n < 15; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
        std::size_t k = 6;
        while (n > 0) own[k++] = digits[--n];
        own[k] = '\0';
        bool covered = true;
        for (const auto& path : c->other_processes)
          if (std::strcmp(path.c_str(), own) != 0 &&
              ::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0555") !=
                  0 &&
              errno != ENOENT)
            covered = false;
        if (!covered) ::_exit(kExitHideFailed);
        append(c->isolation, sizeof c->isolation, "+ownproc");
      }
      if (c->pid_namespace) {
        // (A nested user namespace may not mount one where the sandbox
        // covered parts of its /proc, as bubblewrap does.)
        if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0)
          append(c->isolation, sizeof c->isolation, "+proc");
        else if (::mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k") == 0)
          append(c->isolation, sizeof c->isolation, "+noproc");
        else
          ::_exit(kExitHideFailed);  // never the worker's /proc in a namespace of its own
      }
      for (const auto& h : c->hide)
        if (::mount("tmpfs", h.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k") != 0 &&
            errno != ENOENT)
          ::_exit(kExitHideFailed);
    } else if (!c->hide.empty() || !c->private_tmp.empty()) {
      ::_exit(kExitHideFailed);
    }
  }
  // Its output goes to the worker, which keeps a tail for failure reports.
  if (::dup2(c->out, 1) != 1 || ::dup2(c->out, 2) != 2) ::_exit(127);
  // Descriptor 3 is the socket; nothing else of the worker's stays open.
  if (c->sock == 3) {
    ::fcntl(3, F_SETFD, 0);
  } else if (::dup2(c->sock, 3) != 3) {
    ::_exit(127);
  }
  if (::syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
    for (int fd = 4; fd < 4096; ++fd) ::close(fd);
  if (c->rlimit_as > 0) {
    rlimit lim{static_cast<rlim_t>(c->rlimit_as), static_cast<rlim_t>(c->rlimit_as)};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(127);
  }
  ::execve(c->exe.c_str(), c->argv.data(), c->envp.empty() ? environ : c->envp.data());
  ::_exit(127);
}

std::atomic<bool> g_namespaces_unavailable{false};

pid_t spawn(ChildSetup& setup) {
  constexpr std::size_t kStack = 256 * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  int flags = SIGCHLD;
  if (setup.namespaces) flags |= CLONE_NEWUSER | CLONE_NEWNS | (setup.pid_namespace ? CLONE_NEWPID : 0);
  const pid_t pid = ::clone(child_main, static_cast<char*>(stack) + kStack, flags, &setup);
  const int e = errno;
  ::munmap(stack, kStack);  // the child has its own copy
  errno = e;
  return pid;
}

// /proc/<pid> of every process and thread there is now (ChildSetup::other_processes).
std::vector<std::string> other_processes() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    out.push_back(e.path().string());
    // Its threads too: /proc/<tid> answers though readdir does not list it.
    std::error_code gone;  // a process that ended meanwhile
    for (const auto& t : fs::directory_iterator(e.path() / "task", gone))
      if (t.path().filename() != e.path().filename()) out.push_back("/proc/" + t.path().filename().string());
  }
  return out;
}

// ---------------------------------------------------------------------------
// The Python zygote (CandidateProcessOptions::zygote).
//
// One per worker process, started by spawn() like any candidate process but
// as uid 0 of its user namespace, so that it keeps the capabilities a forked
// child needs to build its own namespaces (candidate_runner.py's
// enter_own_namespaces); it never runs candidate code and is non-dumpable. A
// forked process is adopted by the worker: the zygote forks through an
// intermediate process that exits at once while the worker is a child
// subreaper, so the worker stops, continues and reaps it as it does a
// process it started itself.

// What makes one zygote serve a candidate: one per interpreter, imports and limit.
struct ZygoteKind {
  std::vector<std::string> interpreter;  // CandidateProcessOptions::command
  std::string imports;                   // CandidateProcessOptions::zygote_imports
  std::uint64_t rlimit_as = 0;           // its children's address-space limit, which it imports under
  bool operator==(const ZygoteKind&) const = default;
};

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
// fork_through_zygote's answer when a process may have been made with the
// socket and pipe it was given (the zygote died or broke the protocol after
// the request): the caller must not give them to another.
constexpr pid_t kZygoteUnclear = -2;

// receive() once `sock` has a message within `ms`; -1 (ETIMEDOUT) otherwise.
ssize_t receive_within(int sock, int ms, std::string& buf, std::vector<int>& fds) {
  pollfd p{sock, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, ms);
  while (r < 0 && errno == EINTR);
  if (r <= 0) {
    errno = r == 0 ? ETIMEDOUT : errno;
    return -1;
  }
  return receive(sock, buf, fds);
}

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

// Asks the zygote for a process that serves `sock` and writes to `out`, set
// up as `spec` says. Returns its process id (a child of this process now),
// or -1 where the caller starts the process directly instead; `*init` gets
// the idle init of its PID namespace (a child of this process too), or -1.
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

bool zygote_wanted(const CandidateProcessOptions& options) {
  const char* v = std::getenv("KSEARCH_PYTHON_ZYGOTE");
  return options.zygote && !options.command.empty() && !(v && std::string_view(v) == "0");
}

// ---------------------------------------------------------------------------
// The candidate's side.

int g_sock = -1;

void crash_sink(const char* line, std::size_t len) {
  // Async-signal-safe: a fixed buffer and one send.
  char buf[kHeaderBytes + 512];
  const std::uint32_t magic = kMagic, op = kCrash;
  const std::uint64_t token = 0;
  std::memcpy(buf, &magic, 4);
  std::memcpy(buf + 4, &op, 4);
  std::memcpy(buf + 8, &token, 8);
  len = std::min(len, sizeof buf - kHeaderBytes);
  std::memcpy(buf + kHeaderBytes, line, len);
  ssize_t r = ::send(g_sock, buf, kHeaderBytes + len, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)r;
}

// Refuses what a kernel never needs and an attacker would: new processes
// (threads are fine), exec, tracing or reading other processes, new
// namespaces, mounts, keyrings, BPF and perf. clone3 answers ENOSYS so that
// the C library falls back to clone, whose flags the filter can read.
std::vector<sock_filter> seccomp_filter(bool allow_processes, pid_t own_pid = 0) {
#if defined(__x86_64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return {};
#endif
#if defined(__x86_64__) || defined(__aarch64__)
  const std::uint32_t eperm = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  const std::uint32_t enosys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
  std::vector<sock_filter> f;
  auto stmt = [&](std::uint16_t code, std::uint32_t k) { f.push_back(BPF_STMT(code, k)); };
  auto refuse = [&](long nr, std::uint32_t ret) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 1));
    stmt(BPF_RET | BPF_K, ret);
  };
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));  // the x32 ABI
  stmt(BPF_RET | BPF_K, eperm);
  if (!allow_processes) {
    refuse(SYS_fork, eperm);
    refuse(SYS_vfork, eperm);
  }
#endif
  refuse(SYS_clone3, enosys);
  if (own_pid > 0) {
    // A process in the worker's PID namespace signals only itself (and its
    // threads): never the worker, its siblings, or the user's other processes.
    for (long nr : {long{SYS_kill}, long{SYS_tgkill}, long{SYS_rt_sigqueueinfo}, long{SYS_rt_tgsigqueueinfo}}) {
      f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 4));
      stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));  // pid_t: the low 32 bits
      f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(own_pid), 0, 1));
      stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
      stmt(BPF_RET | BPF_K, eperm);
    }
    refuse(SYS_tkill, eperm);
    refuse(SYS_pidfd_send_signal, eperm);
  }
  for (long nr : {long{SYS_ptrace}, long{SYS_process_vm_readv}, long{SYS_process_vm_writev}, long{SYS_unshare},
                  long{SYS_setns}, long{SYS_mount}, long{SYS_umount2}, long{SYS_pivot_root}, long{SYS_chroot},
                  long{SYS_keyctl}, long{SYS_add_key}, long{SYS_request_key}, long{SYS_bpf},
                  long{SYS_perf_event_open}, long{SYS_userfaultfd}})
    refuse(nr, eperm);
  if (allow_processes) {
    // A new process may share nothing but its memory's copy: no new namespaces through clone.
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(SYS_clone), 0, 4));
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K,
                         CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                             CLONE_NEWCGROUP,
                         0, 1));
    stmt(BPF_RET | BPF_K, eperm);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    return f;
  }
  for (long nr : {long{SYS_execve}, long{SYS_execveat}}) refuse(nr, eperm);
  // clone: a thread shares the process (CLONE_THREAD); anything else is a new one.
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(SYS_clone), 0, 4));
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1));
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  stmt(BPF_RET | BPF_K, eperm);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  return f;
#endif
}

bool install_seccomp() {
  std::vector<sock_filter> f = seccomp_filter(false);
  if (f.empty()) return false;
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  // SPEC_ALLOW, as container runtimes do: on kernels that tie the
  // speculative store bypass mitigation to seccomp, the filter does not
  // force it on the candidate's own code; the secrets are in other processes.
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog) == 0) return true;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

union RawArg {
  void* ptr;
  std::uint64_t bits;
};
using ShimFn = void (*)(void* const*);

struct ShimCall {
  ShimFn fn = nullptr;
  std::vector<RawArg> values;
  std::vector<void*> addrs;
};

[[noreturn]] void quit(int code) { ::_exit(code); }

void answer(std::uint32_t op, std::uint64_t token, std::string_view text = {}) {
  Writer w;
  w.str(text.substr(0, 16 * 1024));
  if (!send_with_fds(g_sock, make_packet(op, token, w.s), {})) quit(0);  // the worker is gone
}

}  // namespace

// ---------------------------------------------------------------------------
// The worker's side.

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
    ChildSetup setup;
    setup.sock = sv[1];
    setup.out = out[1];
    setup.namespaces = !g_namespaces_unavailable.load();
    setup.uid_map = fmt::format("1000 {} 1", ::geteuid());
    setup.gid_map = fmt::format("1000 {} 1", ::getegid());
    setup.pid_namespace = options.pid_namespace;
    setup.hide = options.hide;
    std::map<std::string, std::string> env_over;  // names the process gets other values for
    if (setup.namespaces) {
      setup.private_tmp = private_tmp_mount_point();
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
    if (!env_over.empty()) {
      for (char** e = environ; e && *e; ++e) {
        const std::string_view entry(*e);
        if (!env_over.count(std::string(entry.substr(0, entry.find('='))))) setup.env.emplace_back(entry);
      }
      for (const auto& [name, value] : env_over) setup.env.push_back(name + "=" + value);
      for (auto& e : setup.env) setup.envp.push_back(e.data());
      setup.envp.push_back(nullptr);
    }
    for (auto& a : setup.args) setup.argv.push_back(a.data());
    setup.argv.push_back(setup.isolation);
    setup.argv.push_back(nullptr);
    pid_ = -1;
    if (setup.namespaces && zygote_wanted(options)) {
      Json::Array env, hide;
      if (setup.env.empty())
        for (char** e = environ; e && *e; ++e) env.push_back(Json(std::string(*e)));
      for (const auto& e : setup.env) env.push_back(Json(e));
      for (const auto& h : setup.hide) hide.push_back(Json(h));
      const Json spec = Json::obj({{"pid_namespace", Json(setup.pid_namespace)},
                                   {"private_tmp", Json(setup.private_tmp)},
                                   {"hide", Json(std::move(hide))},
                                   {"env", Json(std::move(env))},
                                   {"rlimit_as", Json(static_cast<std::int64_t>(setup.rlimit_as))}});
      pid_ = fork_through_zygote({options.command, options.zygote_imports, setup.rlimit_as}, spec.dump(), sv[1],
                                 out[1], &init_pid_);
      forked = pid_ > 0;
    }
    if (pid_ == kZygoteUnclear) {
      // A process may hold this socket and pipe: new ones, and a fresh start.
      ::close(sv[0]);
      ::close(sv[1]);
      ::close(out[1]);
      continue;
    }
    if (pid_ < 0) {
      // Listed last, so that a zygote started just now is covered too.
      if (!options.pid_namespace) setup.other_processes = other_processes();
      pid_ = spawn(setup);
    }
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
    // Its first words come before any candidate code exists in it.
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
      // Its own words, said before any candidate code existed in it; but
      // the seccomp filter is what /proc shows (isolation()).
      if (const auto at = isolation_.find("+seccomp"); at != std::string::npos) isolation_.erase(at, 8);
      stop();
      return;
    }
    kill_and_reap();
    ::close(sock_);
    sock_ = -1;
    if (forked && WIFEXITED(wait_status_) &&
        (WEXITSTATUS(wait_status_) == kExitSetupFailed || WEXITSTATUS(wait_status_) == kExitHideFailed)) {
      // The forked process could not set up its layers: that says nothing of
      // what a started one can (which fails closed itself). Started directly
      // from now on.
      disable_zygote();
      forked = false;
      continue;
    }
    if (setup.namespaces && WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == kExitHideFailed)
      // Fail closed: never fall back to a process that sees the folders.
      throw RunError({EvalStatus::runtime_error,
                      "the candidate's process could not set up its mount namespace (a tmpfs or bind mount "
                      "covering the evaluator's reference folders, its own cache folders or its private /tmp "
                      "failed), so it does not run"});
    forked = false;
    if (setup.namespaces && WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == kExitSetupFailed) {
      g_namespaces_unavailable = true;
      continue;
    }
    throw RunError({EvalStatus::runtime_error,
                    fmt::format("the candidate's process did not start ({}): {}{}",
                                options.command.empty() ? options.exe + " --role candidate" : options.command.front(),
                                WIFEXITED(wait_status_) ? fmt::format("exit code {}", WEXITSTATUS(wait_status_))
                                                        : fmt::format("signal {}", WTERMSIG(wait_status_)),
                                [&] {
                                  const std::string tail = output_tail();
                                  return tail.empty() ? tail : "; " + tail;
                                }())});
  }
  throw RunError({EvalStatus::runtime_error, "cannot start the candidate's process"});
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

std::string candidate_seccomp_program(bool allow_processes, pid_t own_pid) {
  const std::vector<sock_filter> f = seccomp_filter(allow_processes, own_pid);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(sock_filter));
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

std::string CandidateProcess::isolation() {
  // "Seccomp: 2": a filter is installed (by this process, or inherited).
  if (!seccomp_seen_ && !dead_) seccomp_seen_ = status_kib("Seccomp") == 2;
  return isolation_ + (seccomp_seen_ ? "+seccomp" : "");
}

// ---------------------------------------------------------------------------

int candidate_process_main(int sock, std::uint64_t memory_limit, const std::string& isolation) {
  g_sock = sock;
  install_crash_reporter(crash_sink);
  if (memory_limit > 0) {
    rlimit lim{static_cast<rlim_t>(memory_limit), static_cast<rlim_t>(memory_limit)};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) return 2;
    set_memory_limit(memory_limit, true);
    // Said, then seen: the evaluator reads this process's memory while it
    // waits here, and that alone makes the memory_limit verdict.
    std::set_new_handler([] {
      static constexpr char kLine[] = "out of memory: operator new failed";
      crash_sink(kLine, sizeof kLine - 1);
      for (;;) ::pause();
    });
  }
  // No privilege can be gained from here on, and the filter holds for every
  // thread the candidate starts.
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  const bool filtered = install_seccomp();
  answer(kHello, 0, isolation + (filtered ? "+seccomp" : ""));

  void* handle = nullptr;
  std::map<std::uint64_t, void*> blocks;  // serial -> the block here
  std::string map_error;                  // a block that could not be mapped, told at the next bind
  std::vector<ShimCall> calls;
  std::string buf;
  for (;;) {
    std::vector<int> fds;
    const ssize_t n = receive(sock, buf, fds);
    if (n <= 0) quit(0);  // the worker hung up
    Reader r{buf};
    const auto magic = r.num<std::uint32_t>();
    const auto op = r.num<std::uint32_t>();
    const auto token = r.num<std::uint64_t>();
    if (!r.ok || magic != kMagic) quit(3);
    if (op == kMap) {
      const auto serial = r.num<std::uint64_t>();
      const auto bytes = r.num<std::uint64_t>();
      const std::string label = r.str();
      if (!r.ok || fds.size() != 1) quit(3);
      void* p = guarded_map_shared(fds[0], bytes, label);
      if (!p) map_error = fmt::format("cannot map {} of {} bytes: {}", label, bytes, std::strerror(errno));
      else blocks[serial] = p;
      ::close(fds[0]);
      continue;
    }
    for (int fd : fds) ::close(fd);
    if (op == kLoad) {
      const std::string path = r.str();
      if (handle) {
        answer(kError, token, "a candidate is loaded already");
        continue;
      }
      // Handles are never closed: a candidate's atexit handlers may point into its code.
      handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      const char* err = handle ? nullptr : ::dlerror();
      if (handle) answer(kOk, token);
      else answer(kError, token, err ? err : "unknown dlopen error");
    } else if (op == kBind) {
      calls.clear();
      std::string error = std::exchange(map_error, {});
      const auto live_count = r.num<std::uint32_t>();
      std::vector<std::uint64_t> live;
      for (std::uint32_t i = 0; i < live_count && r.ok; ++i) live.push_back(r.num<std::uint64_t>());
      for (auto it = blocks.begin(); it != blocks.end();) {
        if (std::find(live.begin(), live.end(), it->first) == live.end()) {
          guarded_free(it->second);
          it = blocks.erase(it);
        } else {
          ++it;
        }
      }
      const auto ncalls = r.num<std::uint32_t>();
      for (std::uint32_t i = 0; i < ncalls && r.ok && error.empty(); ++i) {
        ShimCall bc;
        const std::string shim = r.str(), fn = r.str();
        const auto nargs = r.num<std::uint32_t>();
        if (!r.ok || nargs > 4096) break;
        if (handle) bc.fn = reinterpret_cast<ShimFn>(::dlsym(handle, shim.c_str()));
        if (!bc.fn)
          error = fmt::format("the compiled candidate has no entry \"{}\" for call \"{}\"; it was compiled from a "
                              "different plan",
                              shim, fn);
        for (std::uint32_t k = 0; k < nargs && r.ok; ++k) {
          const auto kind = r.num<std::uint32_t>();
          const auto v = r.num<std::uint64_t>();
          RawArg a{};
          if (kind == 1) {
            auto it = blocks.find(v);
            if (it == blocks.end() && error.empty()) error = fmt::format("call \"{}\": a buffer was not mapped", fn);
            a.ptr = it == blocks.end() ? nullptr : it->second;
          } else {
            a.bits = v;
          }
          bc.values.push_back(a);
        }
        calls.push_back(std::move(bc));
      }
      if (!r.ok) quit(3);
      for (auto& bc : calls)
        for (auto& v : bc.values) bc.addrs.push_back(&v);
      if (error.empty()) answer(kOk, token);
      else answer(kError, token, error);
    } else if (op == kRun) {
      std::string error;
      try {
        for (const auto& c : calls) c.fn(c.addrs.data());
      } catch (const std::exception& e) {
        error = fmt::format("the kernel threw an exception: {}", e.what());
      } catch (...) {
        error = "the kernel threw an exception of unknown type";
      }
      if (error.empty()) answer(kDone, token);
      else answer(kError, token, error);
    } else {
      quit(3);
    }
  }
}

}  // namespace ks::eval::host
