// Keyed digests of buffers (Device::digest): whether an input changed between
// its draw and the end of a kernel's call, without keeping a copy of it or
// drawing it again. The sum of one term per 8-byte word (the last one padded
// with zeros), each term the word mixed with the key and its index, plus a
// term for the length. The key is random per device object and never leaves
// it: a kernel cannot choose a change whose terms cancel without reading the
// key from its process's memory. Digests compare only within one device
// object. lib/eval/cuda/kernels/runtime.cu computes the same terms.
#pragma once

#include <math.h>  // ks_rng.h calls math functions unqualified

#include <cstddef>
#include <cstdint>

#include "core/rng/ks_rng.h"  // ks_mix64, which the GPU's ks_digest uses too

namespace ks::eval {

inline constexpr std::uint64_t kDigestStep = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio

inline std::uint64_t digest_term(std::uint64_t key, std::uint64_t index, std::uint64_t word) {
  return ks_mix64(word ^ (key + index * kDigestStep));
}

// The sum of the terms of `bytes` bytes at `data`, whose first word has
// index `first_word` (for a buffer digested in pieces of whole words).
std::uint64_t digest_sum(const void* data, std::size_t bytes, std::uint64_t key, std::uint64_t first_word);

// The digest of a buffer of `bytes` bytes whose terms sum to `sum`.
inline std::uint64_t digest_finish(std::uint64_t sum, std::uint64_t key, std::uint64_t bytes) {
  return sum + ks_mix64(~key ^ (bytes * kDigestStep));
}

// A fresh random key (getrandom).
std::uint64_t new_digest_key();

}  // namespace ks::eval
