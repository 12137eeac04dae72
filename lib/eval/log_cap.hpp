// Compiler logs a model reads: a runaway log (thousands of repeated errors
// or warnings) is cut in the middle, keeping its start (the first error
// matters most) and its end (the summary, the last error).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string>

namespace ks::eval {

inline constexpr std::size_t kMaxCompilerLogBytes = 32u << 10;

// `log` when it fits in `max_bytes`; else its first and last halves of
// `max_bytes`, cut at line ends where possible, with a marker saying how
// much was left out.
inline std::string cap_log(std::string log, std::size_t max_bytes = kMaxCompilerLogBytes) {
  if (log.size() <= max_bytes) return log;
  const std::size_t half = max_bytes / 2;
  std::size_t head = log.rfind('\n', half);
  head = head == std::string::npos || head < half / 2 ? half : head + 1;
  std::size_t tail = log.find('\n', log.size() - half);
  tail = tail == std::string::npos || tail > log.size() - half / 2 ? log.size() - half : tail + 1;
  return log.substr(0, head) + fmt::format("[... {} bytes of compiler output left out ...]\n", tail - head) +
         log.substr(tail);
}

}  // namespace ks::eval
