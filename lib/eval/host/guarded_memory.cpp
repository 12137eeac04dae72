#include "eval/host/guarded_memory.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "eval/backend.hpp"
#include "eval/protocol.hpp"

namespace ks::eval::host {
namespace {

constexpr unsigned char kCanary = 0xA5;
constexpr std::size_t kAlign = 64;
constexpr std::size_t kMaxBlocks = 4096;
constexpr std::size_t kLabelBytes = 64;

std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

// The registry the crash reporter reads. A slot is published by storing
// `user` last (release) and retired by clearing it first, so the signal
// handler, which cannot lock, never sees a half-written slot as live.
struct Slot {
  std::atomic<std::uintptr_t> user{0};
  std::uintptr_t map_begin = 0, map_end = 0, user_end = 0;
  std::size_t bytes = 0;
  int fd = -1;                 // the memfd of the data pages; -1 for a mapping of another process's block
  std::uint64_t serial = 0;
  char label[kLabelBytes] = {};
};

std::array<Slot, kMaxBlocks>& slots() {
  static std::array<Slot, kMaxBlocks> s;
  return s;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

Slot* find_slot(std::uintptr_t user) {
  for (auto& s : slots())
    if (s.user.load(std::memory_order_acquire) == user) return &s;
  return nullptr;
}

std::atomic<std::uint64_t> g_next_serial{1};

// The layout both processes compute from the block's size alone.
struct Layout {
  std::size_t page, rounded, data, total;
  explicit Layout(std::size_t bytes)
      : page(page_size()),
        rounded(round_up(bytes == 0 ? 1 : bytes, kAlign)),
        data(round_up(rounded, page)),
        total(data + 2 * page) {}
};

// Reserves guard page + data + guard page, all inaccessible, and maps the
// memfd's pages over the middle. nullptr with errno set on failure.
unsigned char* map_layout(const Layout& l, int fd) {
  void* base = ::mmap(nullptr, l.total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  auto* b = static_cast<unsigned char*>(base);
  if (::mmap(b + l.page, l.data, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    const int e = errno;
    ::munmap(base, l.total);
    errno = e;
    return nullptr;
  }
  return b;
}

// Publishes a mapping in the registry; false when it is full.
bool register_slot(unsigned char* b, const Layout& l, unsigned char* user, std::size_t bytes, int fd,
                   std::uint64_t serial, std::string_view label) {
  std::lock_guard lock(registry_mutex());
  for (auto& s : slots()) {
    if (s.user.load(std::memory_order_relaxed) != 0) continue;
    s.map_begin = reinterpret_cast<std::uintptr_t>(b);
    s.map_end = s.map_begin + l.total;
    s.user_end = reinterpret_cast<std::uintptr_t>(user) + bytes;
    s.bytes = bytes;
    s.fd = fd;
    s.serial = serial;
    const std::size_t n = std::min(label.size(), kLabelBytes - 1);
    std::memcpy(s.label, label.data(), n);
    s.label[n] = '\0';
    s.user.store(reinterpret_cast<std::uintptr_t>(user), std::memory_order_release);
    return true;
  }
  return false;
}

}  // namespace

void* guarded_alloc(std::size_t bytes) {
  const Layout l(bytes);
  auto exhausted = [&](const char* what) -> RunError {
    return RunError({EvalStatus::runtime_error,
                     fmt::format("host memory exhausted: cannot allocate {} bytes ({}: {})", bytes, what,
                                 std::strerror(errno)),
                     true});
  };
  // Sealed against shrinking: a candidate that holds the descriptor cannot
  // truncate the file and make the worker's own accesses fault.
  const int fd = ::memfd_create("ksearch-block", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw exhausted("memfd_create");
  if (::ftruncate(fd, static_cast<off_t>(l.data)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    RunError e = exhausted("sizing the block");
    ::close(fd);
    throw e;
  }
  unsigned char* b = map_layout(l, fd);
  if (!b) {
    RunError e = exhausted("mmap");
    ::close(fd);
    throw e;
  }
  unsigned char* user = b + l.page + l.data - l.rounded;
  // Canaries fill the slack before and after the block.
  std::memset(b + l.page, kCanary, static_cast<std::size_t>(user - (b + l.page)));
  std::memset(user + bytes, kCanary, l.rounded - bytes);
  if (register_slot(b, l, user, bytes, fd, g_next_serial.fetch_add(1), {})) return user;
  // Registry full: the block works but cannot be freed by address lookup, so
  // refuse rather than leak.
  ::munmap(b, l.total);
  ::close(fd);
  throw RunError({EvalStatus::runtime_error,
                  fmt::format("host backend: more than {} live buffers", kMaxBlocks)});
}

void* guarded_map_shared(int fd, std::size_t bytes, std::string_view label) {
  const Layout l(bytes);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return nullptr;
  if (static_cast<std::size_t>(st.st_size) < l.data) {
    errno = EINVAL;
    return nullptr;
  }
  unsigned char* b = map_layout(l, fd);
  if (!b) return nullptr;
  unsigned char* user = b + l.page + l.data - l.rounded;
  if (register_slot(b, l, user, bytes, -1, 0, label)) return user;
  ::munmap(b, l.total);
  errno = ENOSPC;
  return nullptr;
}

std::optional<SharedBlock> shared_block(const void* p) {
  std::lock_guard lock(registry_mutex());
  const Slot* s = find_slot(reinterpret_cast<std::uintptr_t>(p));
  if (!s || s->fd < 0) return std::nullopt;
  const Layout l(s->bytes);
  return SharedBlock{s->fd, s->serial, s->bytes, l.data - l.rounded, s->label};
}

void guarded_free(void* p) {
  if (!p) return;
  std::uintptr_t map_begin = 0, map_end = 0;
  int fd = -1;
  {
    std::lock_guard lock(registry_mutex());
    Slot* s = find_slot(reinterpret_cast<std::uintptr_t>(p));
    if (!s) return;
    map_begin = s->map_begin;
    map_end = s->map_end;
    fd = s->fd;
    s->fd = -1;
    s->user.store(0, std::memory_order_release);
  }
  ::munmap(reinterpret_cast<void*>(map_begin), map_end - map_begin);
  if (fd >= 0) ::close(fd);
}

void set_guard_label(void* p, std::string_view label) {
  std::lock_guard lock(registry_mutex());
  Slot* s = find_slot(reinterpret_cast<std::uintptr_t>(p));
  if (!s) return;
  std::size_t n = std::min(label.size(), kLabelBytes - 1);
  std::memcpy(s->label, label.data(), n);
  s->label[n] = '\0';
}

std::string check_canaries(const void* p) {
  std::lock_guard lock(registry_mutex());
  const Slot* s = find_slot(reinterpret_cast<std::uintptr_t>(p));
  if (!s) return {};
  const std::size_t page = page_size();
  const auto* front_begin = reinterpret_cast<const unsigned char*>(s->map_begin + page);
  const auto* user = reinterpret_cast<const unsigned char*>(s->user.load(std::memory_order_relaxed));
  const auto* back_begin = reinterpret_cast<const unsigned char*>(s->user_end);
  const auto* back_end = reinterpret_cast<const unsigned char*>(s->map_end - page);
  std::string label = s->label[0] ? s->label : "a buffer";
  // The farthest overwritten canary byte tells how far the overrun went.
  for (const unsigned char* q = back_end; q-- > back_begin;)
    if (*q != kCanary)
      return fmt::format("an out-of-bounds write reached {} bytes past the end of {} ({} bytes)",
                         q - back_begin + 1, label, s->bytes);
  for (const unsigned char* q = front_begin; q < user; ++q)
    if (*q != kCanary)
      return fmt::format("an out-of-bounds write reached {} bytes before the start of {} ({} bytes)",
                         user - q, label, s->bytes);
  return {};
}

// ---------------------------------------------------------------------------
// Crash reporter: everything below runs in a signal handler, so it uses only
// async-signal-safe calls (write, sigaction, raise) and no allocation.

namespace {

struct LineBuffer {
  char data[512];
  std::size_t len = 0;
  void put(const char* s) {
    while (*s && len < sizeof data - 1) data[len++] = *s++;
  }
  void put_hex(std::uintptr_t v) {
    put("0x");
    char tmp[2 * sizeof v];
    int n = 0;
    do {
      tmp[n++] = "0123456789abcdef"[v & 0xF];
      v >>= 4;
    } while (v && n < static_cast<int>(sizeof tmp));
    while (n > 0 && len < sizeof data - 1) data[len++] = tmp[--n];
  }
  void put_dec(std::uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
      tmp[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    while (n > 0 && len < sizeof data - 1) data[len++] = tmp[--n];
  }
};

const char* signal_label(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV (segmentation fault)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGFPE: return "SIGFPE (arithmetic exception, e.g. integer division by zero)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGTRAP: return "SIGTRAP (trap)";
    case SIGABRT: return "SIGABRT (abort)";
  }
  return "fatal signal";
}

std::atomic<std::uint64_t> g_memory_limit{0};
std::atomic<bool> g_wait_when_out_of_memory{false};
std::atomic<CrashSink> g_crash_sink{nullptr};

void emit(const LineBuffer& line) {
  ssize_t r = ::write(2, line.data, line.len);
  (void)r;
  if (CrashSink sink = g_crash_sink.load()) sink(line.data, line.len);
}

// The peak address-space size from /proc/self/status, in bytes; 0 when it
// cannot be read. Only async-signal-safe calls: it runs in the crash handler.
std::uint64_t peak_address_space() {
  int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strstr(buf, "VmPeak:");
  if (!p) return 0;
  p += 7;
  while (*p == ' ' || *p == '\t') ++p;
  std::uint64_t kb = 0;
  while (*p >= '0' && *p <= '9') kb = kb * 10 + static_cast<std::uint64_t>(*p++ - '0');
  return kb * 1024;
}

void crash_handler(int sig, siginfo_t* info, void* context) {
  // A synchronous fault runs the handler on the faulting thread, so errno is
  // still what the candidate's last failed call left: ENOMEM after a malloc
  // that hit the limit and returned NULL. Or the address space came close to
  // the limit. Either way: the memory limit, not a crash.
  const int last_error = errno;
  if (const std::uint64_t limit = g_memory_limit.load(); limit > 0) {
    const std::uint64_t peak = peak_address_space();
    if (last_error == ENOMEM || peak >= limit / 10 * 9) {
      LineBuffer line;
      line.put("ksearch-worker: fatal: ");
      line.put(signal_label(sig));
      line.put(" after an allocation failed");
      if (peak > 0) {  // unknown where /proc is hidden
        line.put("; the address space reached ");
        line.put_dec(peak >> 20);
        line.put(" MiB of the memory limit of ");
        line.put_dec(limit >> 20);
        line.put(" MiB");
      }
      line.put("\n");
      emit(line);
      // A candidate's process waits to be seen: the evaluator reads its
      // memory and makes the verdict (CandidateProcess::died).
      if (g_wait_when_out_of_memory.load())
        for (;;) ::pause();
      ::_exit(kWorkerExitMemoryLimit);
    }
  }
  LineBuffer line;
  line.put("ksearch-worker: fatal: ");
  line.put(signal_label(sig));
  const bool has_addr = sig == SIGSEGV || sig == SIGBUS;
  if (has_addr && info) {
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    line.put(" at address ");
    line.put_hex(addr);
    bool is_write = false, known_rw = false;
#if defined(__x86_64__)
    if (context && sig == SIGSEGV) {
      const auto* uc = static_cast<const ucontext_t*>(context);
      is_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
      known_rw = true;
      // Where: the instruction, or for a jump to nowhere (a null function
      // pointer) the call's return address, as module+offset (dladdr is not
      // async-signal-safe; a process this far gone is past caring).
      auto code = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
      const char* what = " in ";
      if (code < 4096) {
        // Read without faulting again (a bad stack pointer), by a system
        // call on this process; refused in a candidate's process (seccomp).
        std::uintptr_t ret = 0;
        iovec local{&ret, sizeof ret};
        iovec remote{reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RSP]), sizeof ret};
        code = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == sizeof ret ? ret : 0;
        what = " called from ";
      }
      Dl_info dl{};
      if (::dladdr(reinterpret_cast<void*>(code), &dl) && dl.dli_fname) {
        line.put(what);
        const char* base = std::strrchr(dl.dli_fname, '/');
        line.put(base ? base + 1 : dl.dli_fname);
        line.put("+");
        line.put_hex(code - reinterpret_cast<std::uintptr_t>(dl.dli_fbase));
      }
    }
#else
    (void)context;
#endif
    const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    for (const auto& s : slots()) {
      const std::uintptr_t user = s.user.load(std::memory_order_acquire);
      if (!user || addr < s.map_begin || addr >= s.map_end) continue;
      // The offset from the start of the block says how far out the access was.
      line.put(known_rw ? (is_write ? ": out-of-bounds write" : ": out-of-bounds read") : ": out-of-bounds access");
      line.put(" at byte offset ");
      if (addr < user) {
        line.put("-");
        line.put_dec(user - addr);
      } else {
        line.put_dec(addr - user);
      }
      line.put(addr >= s.map_end - page ? " (past the end) of " : " (before the start) of ");
      line.put(s.label[0] ? s.label : "a tensor buffer");
      line.put(", which has ");
      line.put_dec(s.bytes);
      line.put(" bytes");
      break;
    }
  }
  line.put("\n");
  emit(line);
  // The first process of a PID namespace (a candidate's process) cannot die
  // of a signal it sends itself: it exits with 128 + the signal, which its
  // parent reads together with the line above.
  if (::getpid() == 1) ::_exit(128 + sig);
  // Die of the same signal so the parent sees what happened: with the default
  // action restored, a synchronous fault repeats on return; others are re-raised.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  if (sig == SIGABRT || sig == SIGTRAP || !info || info->si_code <= 0) {
    // Unblocked first: raised inside its own handler, it would wait for the
    // handler to return, and abort() would then end the process otherwise.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
  }
}

}  // namespace

void set_memory_limit(std::uint64_t bytes, bool wait_when_out_of_memory) {
  g_memory_limit = bytes;
  g_wait_when_out_of_memory = wait_when_out_of_memory;
}

void install_crash_reporter(CrashSink sink) {
  g_crash_sink = sink;
  // An alternate stack, so a stack overflow can still be reported.
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = crash_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) ::sigaction(sig, &sa, nullptr);
}

}  // namespace ks::eval::host
