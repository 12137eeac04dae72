#include "eval/digest.hpp"

#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "eval/backend.hpp"

namespace ks::eval {

std::uint64_t digest_sum(const void* data, std::size_t bytes, std::uint64_t key, std::uint64_t first_word) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t sum = 0, i = first_word;
  std::size_t at = 0;
  for (; at + 8 <= bytes; at += 8, ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + at, 8);
    sum += digest_term(key, i, w);
  }
  if (at < bytes) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + at, bytes - at);
    sum += digest_term(key, i, w);
  }
  return sum;
}

std::uint64_t new_digest_key() {
  std::uint64_t k = 0;
  if (::getrandom(&k, sizeof k, 0) != static_cast<ssize_t>(sizeof k))
    // No entropy source (never on Linux >= 3.17): still a key that differs
    // per process and per moment, which is all a kernel must not know.
    k = ks_mix64(static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                   reinterpret_cast<std::uintptr_t>(&k));
  return k;
}

std::uint64_t Device::digest(Buffer b, std::size_t bytes) {
  bytes = std::min(bytes, b.bytes);
  constexpr std::size_t kChunk = 64u << 20;  // a multiple of 8: chunks start on whole words
  std::vector<unsigned char> chunk(std::min(bytes, kChunk));
  std::uint64_t sum = 0;
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(kChunk, bytes - done);
    download(chunk.data(), Buffer{b.addr + done, n}, n);
    sum += digest_sum(chunk.data(), n, digest_key_, done / 8);
    done += n;
  }
  return digest_finish(sum, digest_key_, bytes);
}

}  // namespace ks::eval
