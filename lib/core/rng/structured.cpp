#include "core/rng/structured.hpp"

#include <math.h>  // ks_rng.h calls math functions unqualified

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <unordered_map>

#include "core/rng/ks_rng.h"
#include "ksearch/error.hpp"

namespace ks::core {
namespace {

// A uniform integer in [0, n), from draw `index` of the stream.
std::int64_t uniform_below(std::int64_t n, std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const auto v = static_cast<std::int64_t>(std::floor(ks_rng_uniform(seed, stream, index) * static_cast<double>(n)));
  return std::min(v, n - 1);
}

}  // namespace

std::vector<std::int64_t> generate_indptr(std::size_t count, std::int64_t total, std::int64_t min_length,
                                          std::uint64_t seed, std::uint64_t stream) {
  if (std::string why = structured_problem(Distribution::Kind::indptr, count, static_cast<double>(total),
                                           static_cast<double>(min_length));
      !why.empty())
    throw Error(Status::invalid_argument, why);
  const std::int64_t segments = static_cast<std::int64_t>(count) - 1;
  std::vector<std::int64_t> out(count, 0);
  if (segments == 0) return out;
  // The slack beyond the minimum lengths is cut at segments-1 uniform points;
  // sorted, consecutive cuts give each segment its share.
  const std::int64_t slack = total - segments * min_length;
  std::vector<std::int64_t> cuts(static_cast<std::size_t>(segments - 1));
  for (std::size_t i = 0; i < cuts.size(); ++i) cuts[i] = uniform_below(slack + 1, seed, stream, i);
  std::sort(cuts.begin(), cuts.end());
  std::int64_t prev_cut = 0;
  for (std::int64_t s = 0; s < segments; ++s) {
    const std::int64_t cut = s + 1 < segments ? cuts[static_cast<std::size_t>(s)] : slack;
    out[static_cast<std::size_t>(s) + 1] = out[static_cast<std::size_t>(s)] + min_length + (cut - prev_cut);
    prev_cut = cut;
  }
  return out;
}

std::vector<std::int64_t> generate_permutation(std::size_t count, std::int64_t range, std::uint64_t seed,
                                               std::uint64_t stream) {
  if (std::string why = structured_problem(Distribution::Kind::permutation, count, static_cast<double>(range), 0);
      !why.empty())
    throw Error(Status::invalid_argument, why);
  // The first `count` steps of a Fisher-Yates shuffle of [0, range), with
  // the displaced entries in a map: O(count) memory whatever the range.
  std::unordered_map<std::int64_t, std::int64_t> moved;
  moved.reserve(count * 2);
  auto at = [&](std::int64_t i) {
    auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<std::int64_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto k = static_cast<std::int64_t>(i);
    const std::int64_t j = k + uniform_below(range - k, seed, stream, i);
    const std::int64_t vj = at(j);
    moved[j] = at(k);
    out[i] = vj;
  }
  // Pages in order would let a kernel that ignores the page table pass.
  bool identity = count >= 2;
  for (std::size_t i = 0; identity && i < count; ++i) identity = out[i] == static_cast<std::int64_t>(i);
  if (identity) std::reverse(out.begin(), out.end());
  return out;
}

std::string structured_problem(Distribution::Kind kind, std::size_t count, double p0, double p1) {
  if (kind == Distribution::Kind::indptr) {
    if (count == 0) return "an indptr tensor needs at least one element (the leading 0)";
    if (p0 != std::floor(p0) || p1 != std::floor(p1) || p0 < 0 || p1 < 0)
      return fmt::format("indptr total ({}) and min_length ({}) must be non-negative integers", p0, p1);
    const double need = static_cast<double>(count - 1) * p1;
    if (count == 1 && p0 != 0)
      return fmt::format("an indptr of one element (no segments) cannot end at {}", p0);
    if (p0 < need)
      return fmt::format("an indptr of {} segments of at least {} each cannot end at {} (needs at least {})",
                         count - 1, p1, p0, need);
    return "";
  }
  if (kind == Distribution::Kind::permutation) {
    if (p0 != std::floor(p0) || p0 < 0) return fmt::format("a permutation's range ({}) must be a non-negative integer", p0);
    if (static_cast<double>(count) > p0)
      return fmt::format("a permutation cannot draw {} distinct values from [0, {})", count, p0);
    return "";
  }
  return "";
}

std::vector<std::int64_t> generate_structured(Distribution::Kind kind, std::size_t count, double p0, double p1,
                                              std::uint64_t seed, std::uint64_t stream) {
  if (kind == Distribution::Kind::indptr)
    return generate_indptr(count, static_cast<std::int64_t>(p0), static_cast<std::int64_t>(p1), seed, stream);
  if (kind == Distribution::Kind::permutation)
    return generate_permutation(count, static_cast<std::int64_t>(p0), seed, stream);
  throw Error(Status::internal, fmt::format("generate_structured: \"{}\" is not a structured kind", to_string(kind)));
}

}  // namespace ks::core
