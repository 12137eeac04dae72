// The discrete grid a tuner walks: a ParamSpace seen as points of value
// indices, with admissibility against every workload, a feature map for
// surrogate models, enumeration, sampling and neighbourhoods.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/param_space.hpp"

namespace ks::core {

// One configuration as the index of each parameter's value, parameters in
// declaration order, values in ascending order (so index +-1 is a neighbour).
using GridPoint = std::vector<int>;

// Portable draws from a standard-specified engine: std::uniform_*_distribution
// differs between standard libraries, and a resumed run must make the same
// choices wherever it runs.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n);
double uniform01(std::mt19937_64& rng);

class TuneSpace {
 public:
  // `workload_dims`: the dimension values of every workload a configuration
  // runs on; constraints that name dimensions must hold for each of them.
  explicit TuneSpace(ParamSpace space, std::vector<util::Vars> workload_dims = {});

  const ParamSpace& params() const { return space_; }
  std::size_t dimensions() const { return sorted_.size(); }
  int levels(std::size_t param) const { return static_cast<int>(sorted_[param].size()); }
  std::uint64_t grid_size() const { return space_.grid_size(); }
  const std::string& name(std::size_t param) const { return space_.params()[param].name; }

  util::Vars to_vars(const GridPoint& p) const;
  // Throws ks::Error(Status::invalid_argument) when a parameter is missing,
  // undeclared or set to a value it does not allow.
  GridPoint to_point(const util::Vars& values) const;

  // Allowed values and every constraint hold for every workload. A constraint
  // that cannot be evaluated (division by zero, ...) makes the point
  // inadmissible; *why says which and why.
  bool admissible(const GridPoint& p, std::string* why = nullptr) const;

  // Coordinates in [0, 1] per parameter, written to out[0..dimensions()).
  // Parameters whose values are positive and span a factor of 4 or more are
  // placed on a log2 scale (tile sizes, vector widths), others linearly.
  void features(const GridPoint& p, double* out) const;
  std::vector<double> features(const GridPoint& p) const;
  double feature_distance2(const GridPoint& a, const GridPoint& b) const;

  // Every admissible point, in lexicographic index order, when the grid has
  // at most `limit` points; nullopt for larger grids.
  std::optional<std::vector<GridPoint>> enumerate_admissible(std::uint64_t limit) const;
  // A uniformly drawn grid point that is admissible, or nullopt when
  // `max_tries` draws found none.
  std::optional<GridPoint> sample_admissible(std::mt19937_64& rng, int max_tries) const;
  // Admissible points that differ from `p` by at most `radius` steps in one
  // parameter, or by one step in each of two parameters.
  std::vector<GridPoint> neighbours(const GridPoint& p, int radius) const;

 private:
  ParamSpace space_;
  std::vector<util::Vars> workload_dims_;        // distinct dimension sets
  std::vector<std::vector<std::int64_t>> sorted_;  // per parameter, ascending values
  std::vector<std::vector<double>> coords_;        // per parameter, feature of each value
};

}  // namespace ks::core
