#include "core/param_space.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include "ksearch/error.hpp"
#include "util/json_fields.hpp"

namespace ks::core {

ParamSpace::ParamSpace(const Params& params) {
  if (!params.readable()) throw Error(Status::invalid_argument, params.problem());
  params_ = params.space;
  for (const auto& c : params.constraints) {
    try {
      constraints_.push_back(util::Expr::parse(c));
    } catch (const Error& e) {
      throw Error(Status::invalid_argument, fmt::format("params: constraint: {}", e.what()));
    }
  }
}

ParamSpace ParamSpace::from_json(const Json& params) { return ParamSpace(Params::from_json(params)); }

std::uint64_t ParamSpace::grid_size() const {
  std::uint64_t n = 1;
  for (const auto& p : params_) {
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(p.values.size()), &n))
      return std::numeric_limits<std::uint64_t>::max();
  }
  return n;
}

util::Vars ParamSpace::defaults() const {
  util::Vars v;
  for (const auto& p : params_) v[p.name] = p.default_value;
  return v;
}

const ParamDecl* ParamSpace::find(std::string_view name) const {
  for (const auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

bool ParamSpace::admissible(const util::Vars& values, const util::Vars& dims, std::string* why) const {
  auto fail = [&](std::string msg) {
    if (why) *why = std::move(msg);
    return false;
  };
  for (const auto& p : params_) {
    auto it = values.find(p.name);
    if (it == values.end()) return fail(fmt::format("parameter \"{}\" has no value", p.name));
    if (std::find(p.values.begin(), p.values.end(), it->second) == p.values.end())
      return fail(fmt::format("parameter \"{}\" = {} is not one of its allowed values", p.name, it->second));
  }
  for (const auto& [k, v] : values)
    if (!find(k)) return fail(fmt::format("\"{}\" is not a declared parameter", k));
  util::Vars all = values;
  for (const auto& [k, v] : dims) {
    if (all.count(k)) return fail(fmt::format("parameter \"{}\" has the name of a dimension", k));
    all[k] = v;
  }
  for (const auto& c : constraints_) {
    bool needs_missing = false;
    for (const auto& name : c.variables()) needs_missing = needs_missing || !all.count(name);
    if (needs_missing) {
      if (dims.empty()) continue;  // names a dimension: checked per workload
      for (const auto& name : c.variables())
        if (!all.count(name))
          return fail(fmt::format("constraint \"{}\" names \"{}\", which is neither a parameter nor a dimension",
                                  c.text(), name));
    }
    bool holds = false;
    try {
      holds = c.eval_bool(all);
    } catch (const Error& e) {
      // E.g. "N % VEC" with VEC = 0: such values cannot be used, which is not a broken declaration.
      return fail(fmt::format("constraint \"{}\" cannot be evaluated: {}", c.text(), e.what()));
    }
    if (!holds) return fail(fmt::format("constraint \"{}\" does not hold", c.text()));
  }
  return true;
}

util::Vars ParamSpace::resolve(const Params& params, std::string_view workload, const util::Vars& dims) const {
  util::Vars values = defaults();
  for (const auto& [k, v] : params.values) values[k] = v;
  if (auto pw = params.per_workload.find(workload); pw != params.per_workload.end())
    for (const auto& [k, v] : pw->second) values[k] = v;
  std::string why;
  if (!admissible(values, dims, &why))
    throw Error(Status::invalid_argument,
                "params: " + (workload.empty() ? why : fmt::format("workload \"{}\": {}", workload, why)));
  return values;
}

util::Vars resolve_param_values(const Params& params, std::string_view workload, const util::Vars& dims) {
  return ParamSpace(params).resolve(params, workload, dims);
}

std::vector<std::string> param_defines(const util::Vars& values) {
  std::vector<std::string> out;
  for (const auto& [k, v] : values) out.push_back(fmt::format("-D{}={}", k, v));
  return out;
}

util::Vars compiled_values(const Params& params, const util::Vars& values) {
  util::Vars out;
  for (const auto& [name, v] : values)
    if (const ParamDecl* d = params.find(name); !(d && d->plan_only)) out[name] = v;
  return out;
}

}  // namespace ks::core
