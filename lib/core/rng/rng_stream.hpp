// The RNG stream of a tensor for the input generators of ks_rng.h: FNV-1a of
// its name, so reordering tensors in a task file does not change their
// values. Shared by the evaluation backends and by tasks that generate the
// same inputs on the host (CPU references).
#pragma once

#include <cstdint>
#include <string_view>

namespace ks::core {

inline std::uint64_t rng_stream_of(std::string_view tensor_name) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : tensor_name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace ks::core
