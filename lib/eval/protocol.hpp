// The framed protocol between the evaluator and its ksearch-worker processes.
//
// A frame is the magic "KSW1", the payload length as a 32-bit little-endian
// integer, and the payload: one compact JSON message. The magic makes a
// corrupted stream (a candidate writing to the wrong descriptor) fail loudly
// at the next frame instead of being misread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "ksearch/json.hpp"

namespace ks::eval {

inline constexpr std::string_view kFrameMagic = "KSW1";
inline constexpr std::size_t kFrameHeaderBytes = 8;
// Results and requests are small; a larger length means a corrupt stream.
inline constexpr std::size_t kMaxFrameBytes = 256u << 20;

// The exit code of a worker that reached its memory limit (RLIMIT_AS): an
// allocation failed, or a fault followed one. The parent reports the
// candidate as `memory_limit`, not as a crash.
inline constexpr int kWorkerExitMemoryLimit = 86;

std::string encode_frame(const Json& message);

// Reassembles frames from bytes that arrive in arbitrary pieces.
class FrameDecoder {
 public:
  void feed(std::string_view bytes);
  // The next complete message, or nullopt when more bytes are needed.
  // Throws ks::Error(Status::subprocess) on a bad magic, an oversized length
  // or a payload that is not JSON.
  std::optional<Json> next();
  // Bytes received but not yet returned as a message.
  std::size_t pending() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  std::size_t pos_ = 0;
};

// Writes one frame; false when the reader has gone.
bool write_frame(int fd, const Json& message);

// Blocking read of one frame (the worker's side). nullopt on a clean end of
// stream; throws ks::Error(Status::subprocess) on a torn or corrupt frame.
std::optional<Json> read_frame(int fd);

}  // namespace ks::eval
