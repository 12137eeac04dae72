#include "eval/protocol.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/process.hpp"
#include "ksearch/error.hpp"

namespace ks::eval {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Checks a header and returns the payload length.
std::size_t payload_length(const char* header) {
  if (std::string_view(header, 4) != kFrameMagic) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      unsigned char c = static_cast<unsigned char>(header[i]);
      shown += (c >= 32 && c < 127) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
    }
    throw Error(Status::subprocess,
                fmt::format("worker protocol: bad frame magic \"{}\" (expected \"KSW1\"); the stream "
                            "is corrupt",
                            shown));
  }
  std::size_t n = get_u32(header + 4);
  if (n > kMaxFrameBytes)
    throw Error(Status::subprocess,
                fmt::format("worker protocol: frame of {} bytes exceeds the limit of {}", n, kMaxFrameBytes));
  return n;
}

Json parse_payload(std::string_view payload) {
  std::string err;
  auto j = Json::try_parse(payload, &err);
  if (!j) throw Error(Status::subprocess, "worker protocol: frame payload is not JSON: " + err);
  return std::move(*j);
}

}  // namespace

std::string encode_frame(const Json& message) {
  std::string payload = message.dump();
  if (payload.size() > kMaxFrameBytes)
    throw Error(Status::internal,
                fmt::format("worker protocol: message of {} bytes is too large", payload.size()));
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  out.append(kFrameMagic);
  put_u32(out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

void FrameDecoder::feed(std::string_view bytes) {
  // Drop consumed bytes before growing, so the buffer stays small.
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (1u << 20)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

std::optional<Json> FrameDecoder::next() {
  if (pending() < kFrameHeaderBytes) return std::nullopt;
  std::size_t n = payload_length(buf_.data() + pos_);
  if (pending() < kFrameHeaderBytes + n) return std::nullopt;
  Json j = parse_payload(std::string_view(buf_).substr(pos_ + kFrameHeaderBytes, n));
  pos_ += kFrameHeaderBytes + n;
  return j;
}

bool write_frame(int fd, const Json& message) {
  std::string frame = encode_frame(message);
  return util::write_all_fd(fd, frame.data(), frame.size());
}

namespace {

// Reads exactly `size` bytes; returns the count read before end of stream.
std::size_t read_exact(int fd, char* dst, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, dst + got, size - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(Status::subprocess, fmt::format("worker protocol: read failed: {}", std::strerror(errno)));
    }
    got += static_cast<std::size_t>(n);
  }
  return got;
}

}  // namespace

std::optional<Json> read_frame(int fd) {
  char header[kFrameHeaderBytes];
  std::size_t got = read_exact(fd, header, sizeof header);
  if (got == 0) return std::nullopt;
  if (got < sizeof header)
    throw Error(Status::subprocess, "worker protocol: stream ended inside a frame header");
  std::size_t n = payload_length(header);
  std::string payload(n, '\0');
  if (read_exact(fd, payload.data(), n) < n)
    throw Error(Status::subprocess, "worker protocol: stream ended inside a frame");
  return parse_payload(payload);
}

}  // namespace ks::eval
