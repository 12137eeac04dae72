#include "search/tune/space.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ksearch/error.hpp"

namespace ks::core {

std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n) {
  if (n <= 1) return 0;
  // Reject the top partial block so every residue is equally likely.
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t limit = max - (max % n + 1) % n;
  std::uint64_t x;
  do {
    x = rng();
  } while (x > limit);
  return x % n;
}

double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

TuneSpace::TuneSpace(ParamSpace space, std::vector<util::Vars> workload_dims) : space_(std::move(space)) {
  // Workloads often share dimensions (several seeds of one shape); check each set once.
  std::set<util::Vars> seen;
  for (auto& d : workload_dims)
    if (seen.insert(d).second) workload_dims_.push_back(std::move(d));

  for (const auto& p : space_.params()) {
    std::vector<std::int64_t> v = p.values;
    std::sort(v.begin(), v.end());
    const double lo = static_cast<double>(v.front()), hi = static_cast<double>(v.back());
    const bool log_scale = v.front() > 0 && hi / lo >= 4.0;
    auto scale = [&](double x) { return log_scale ? std::log2(x) : x; };
    const double a = scale(lo), b = scale(hi);
    std::vector<double> c;
    for (std::int64_t x : v) c.push_back(b > a ? (scale(static_cast<double>(x)) - a) / (b - a) : 0.0);
    sorted_.push_back(std::move(v));
    coords_.push_back(std::move(c));
  }
}

util::Vars TuneSpace::to_vars(const GridPoint& p) const {
  util::Vars v;
  for (std::size_t j = 0; j < sorted_.size(); ++j) v[name(j)] = sorted_[j][static_cast<std::size_t>(p[j])];
  return v;
}

GridPoint TuneSpace::to_point(const util::Vars& values) const {
  for (const auto& [k, v] : values)
    if (!space_.find(k))
      throw Error(Status::invalid_argument, fmt::format("tune: \"{}\" is not a declared parameter", k));
  GridPoint p(sorted_.size());
  for (std::size_t j = 0; j < sorted_.size(); ++j) {
    auto it = values.find(name(j));
    if (it == values.end())
      throw Error(Status::invalid_argument, fmt::format("tune: parameter \"{}\" has no value", name(j)));
    auto pos = std::lower_bound(sorted_[j].begin(), sorted_[j].end(), it->second);
    if (pos == sorted_[j].end() || *pos != it->second)
      throw Error(Status::invalid_argument,
                  fmt::format("tune: parameter \"{}\" = {} is not one of its allowed values", name(j), it->second));
    p[j] = static_cast<int>(pos - sorted_[j].begin());
  }
  return p;
}

bool TuneSpace::admissible(const GridPoint& p, std::string* why) const {
  const util::Vars values = to_vars(p);
  try {
    if (workload_dims_.empty()) return space_.admissible(values, {}, why);
    for (const auto& dims : workload_dims_) {
      std::string reason;
      if (!space_.admissible(values, dims, &reason)) {
        if (why) {
          std::string shape;
          for (const auto& [k, v] : dims) shape += fmt::format("{}{}={}", shape.empty() ? "" : " ", k, v);
          *why = fmt::format("{} (workload {})", reason, shape);
        }
        return false;
      }
    }
    return true;
  } catch (const Error& e) {
    // A constraint that cannot be evaluated here (e.g. "N % VEC" with VEC = 0) rules the point out.
    if (why) *why = e.what();
    return false;
  }
}

void TuneSpace::features(const GridPoint& p, double* out) const {
  for (std::size_t j = 0; j < coords_.size(); ++j) out[j] = coords_[j][static_cast<std::size_t>(p[j])];
}

std::vector<double> TuneSpace::features(const GridPoint& p) const {
  std::vector<double> f(coords_.size());
  features(p, f.data());
  return f;
}

double TuneSpace::feature_distance2(const GridPoint& a, const GridPoint& b) const {
  double d2 = 0;
  for (std::size_t j = 0; j < coords_.size(); ++j) {
    const double d = coords_[j][static_cast<std::size_t>(a[j])] - coords_[j][static_cast<std::size_t>(b[j])];
    d2 += d * d;
  }
  return d2;
}

std::optional<std::vector<GridPoint>> TuneSpace::enumerate_admissible(std::uint64_t limit) const {
  if (grid_size() > limit) return std::nullopt;
  std::vector<GridPoint> out;
  if (sorted_.empty()) return out;
  GridPoint p(sorted_.size(), 0);
  for (;;) {
    if (admissible(p)) out.push_back(p);
    // Odometer increment, last parameter fastest.
    std::size_t j = sorted_.size();
    while (j > 0) {
      --j;
      if (++p[j] < levels(j)) break;
      p[j] = 0;
      if (j == 0) return out;
    }
  }
}

std::optional<GridPoint> TuneSpace::sample_admissible(std::mt19937_64& rng, int max_tries) const {
  if (sorted_.empty()) return std::nullopt;
  GridPoint p(sorted_.size());
  for (int t = 0; t < max_tries; ++t) {
    for (std::size_t j = 0; j < sorted_.size(); ++j)
      p[j] = static_cast<int>(uniform_below(rng, static_cast<std::uint64_t>(levels(j))));
    if (admissible(p)) return p;
  }
  return std::nullopt;
}

std::vector<GridPoint> TuneSpace::neighbours(const GridPoint& p, int radius) const {
  std::vector<GridPoint> out;
  auto consider = [&](GridPoint q) {
    if (q != p && admissible(q)) out.push_back(std::move(q));
  };
  const std::size_t d = sorted_.size();
  for (std::size_t j = 0; j < d; ++j)
    for (int s = -radius; s <= radius; ++s) {
      const int v = p[j] + s;
      if (s == 0 || v < 0 || v >= levels(j)) continue;
      GridPoint q = p;
      q[j] = v;
      consider(std::move(q));
    }
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = i + 1; j < d; ++j)
      for (int si : {-1, 1})
        for (int sj : {-1, 1}) {
          const int vi = p[i] + si, vj = p[j] + sj;
          if (vi < 0 || vi >= levels(i) || vj < 0 || vj >= levels(j)) continue;
          GridPoint q = p;
          q[i] = vi;
          q[j] = vj;
          consider(std::move(q));
        }
  return out;
}

}  // namespace ks::core
