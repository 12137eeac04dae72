// A host C++ candidate's own process (ksearch-worker --role candidate): the
// only place its code runs. It serves one CandidateProcess on descriptor 3
// (candidate_wire.hpp): load (dlopen), map blocks, bind the calls, run them.
// Its words are data to the worker (docs/security.md, "Who says what").
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "eval/host/candidate_process.hpp"
#include "eval/host/candidate_wire.hpp"
#include "eval/host/guarded_memory.hpp"
#include "eval/isolation/seccomp.hpp"

namespace ks::eval::host {
namespace {

using namespace wire;

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
  const bool filtered = isolation::install_candidate_filter();
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
