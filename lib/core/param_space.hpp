// Tunable parameters declared by a solution (see docs/tuning.md):
//
//   "params": {
//     "space": {"BLOCK": {"values": [64, 128, 256]},
//               "VEC":   {"min": 1, "max": 4, "step": 1, "default": 4}},
//     "constraints": ["BLOCK % 32 == 0", "C % VEC == 0"],
//     "values": {"BLOCK": 128, "VEC": 4},
//     "per_workload": {"bench_3": {"BLOCK": 256, "VEC": 2}}
//   }
//
// A parameter's value reaches the device code as a macro (-DBLOCK=128) and
// the plan's expressions as a variable. Constraints may also name workload
// dimensions; those are checked per workload.
// The declarations are read once, by ks::Params (ksearch/params.hpp); this
// is what the tuner and the evaluator do with them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/json.hpp"
#include "ksearch/params.hpp"
#include "util/expr.hpp"

namespace ks::core {

using ParamDecl = Params::Decl;

class ParamSpace {
 public:
  ParamSpace() = default;
  // The space `params` declares, its constraints parsed. Throws
  // ks::Error(Status::invalid_argument) with the problem of unreadable
  // params (Params::as_written) or naming a constraint that does not parse.
  explicit ParamSpace(const Params& params);
  // Reads a "params" object (Params::from_json) and gives its space.
  static ParamSpace from_json(const Json& params);

  const std::vector<ParamDecl>& params() const { return params_; }
  const std::vector<util::Expr>& constraints() const { return constraints_; }
  bool empty() const { return params_.empty(); }
  // Number of points in the full grid (saturates at UINT64_MAX).
  std::uint64_t grid_size() const;
  util::Vars defaults() const;
  const ParamDecl* find(std::string_view name) const;

  // Checks that `values` names every parameter with an allowed value and
  // satisfies the constraints. Constraints that name a dimension are only
  // checked when `dims` is non-empty. Returns false and sets *why otherwise.
  bool admissible(const util::Vars& values, const util::Vars& dims, std::string* why = nullptr) const;

  // The values `params` (whose space this is) uses for one workload:
  // per_workload[workload], else "values", else the defaults; each missing
  // parameter takes its default. Throws when the result is not admissible
  // for `dims`.
  util::Vars resolve(const Params& params, std::string_view workload, const util::Vars& dims) const;

 private:
  std::vector<ParamDecl> params_;
  std::vector<util::Expr> constraints_;
};

// ParamSpace(params).resolve(params, workload, dims), for a single workload.
util::Vars resolve_param_values(const Params& params, std::string_view workload, const util::Vars& dims);

// The values that reach the code as macros: all but the plan-only ones
// ("plan_only": true in their declaration), which the plan alone reads (a
// GEMM step's algorithm, a step's "when"); changing those compiles nothing.
util::Vars compiled_values(const Params& params, const util::Vars& values);

// {"-DBLOCK=128", "-DVEC=4"}: how values reach device and host code.
std::vector<std::string> param_defines(const util::Vars& values);

}  // namespace ks::core
