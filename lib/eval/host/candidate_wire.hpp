// The wire between the run worker and a candidate's process (and the
// Python zygote): one SOCK_SEQPACKET message per request or answer, a
// header of magic, op and token, then the op's fields (little-endian
// integers and length-prefixed strings). Spoken by candidate_process.cpp
// (the worker's side), zygote.cpp, candidate_main.cpp (a host candidate's
// process) and candidate_runner.py (a Python candidate's).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ks::eval::host::wire {

inline constexpr std::uint32_t kMagic = 0x3143534bu;  // "KSC1"
inline constexpr std::size_t kHeaderBytes = 16;
inline constexpr std::size_t kMaxPacket = 128 * 1024;

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

std::string make_packet(std::uint32_t op, std::uint64_t token, std::string_view payload);
// A random token, never 0 (the token of unasked messages: hello, crash).
std::uint64_t fresh_token();
// Receives one message and the descriptors that came with it. Returns the
// byte count, 0 at a hang-up, -1 on an error (errno set; EMSGSIZE for an
// oversized message).
ssize_t receive(int sock, std::string& buf, std::vector<int>& fds);
// receive() once `sock` has a message within `ms`; -1 (ETIMEDOUT) otherwise.
ssize_t receive_within(int sock, int ms, std::string& buf, std::vector<int>& fds);
bool send_with_fds(int sock, std::string_view packet, const std::vector<int>& fds);

}  // namespace ks::eval::host::wire
