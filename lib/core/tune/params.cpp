#include "core/tune/params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include "ksearch/error.hpp"
#include "util/json_fields.hpp"

namespace ks::core {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(Status::invalid_argument, "params: " + what);
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

ParamDecl parse_decl(const std::string& name, const Json& j) {
  if (!is_identifier(name)) invalid(fmt::format("\"{}\" is not a valid parameter name (use a C identifier)", name));
  util::FieldReader r(j, fmt::format("params: parameter \"{}\"", name));
  ParamDecl d;
  d.name = name;
  if (const Json* v = j.find("values")) {
    if (!v->is_array() || v->empty())
      invalid(fmt::format("parameter \"{}\": \"values\" must be a non-empty array of integers", name));
    for (const auto& x : v->as_array()) {
      if (!x.is_number()) invalid(fmt::format("parameter \"{}\": values must be integers", name));
      try {
        d.values.push_back(x.as_int());
      } catch (const Error&) {
        invalid(fmt::format("parameter \"{}\": value {} is not an integer", name, x.as_number()));
      }
    }
    std::vector<std::int64_t> sorted = d.values;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      invalid(fmt::format("parameter \"{}\": values repeat", name));
    r.allow({"values", "default", "plan_only"});
  } else if (j.contains("min") || j.contains("max")) {
    std::int64_t lo = r.required_int("min"), hi = r.required_int("max");
    std::int64_t step = r.optional_int("step", 1);
    if (step <= 0) invalid(fmt::format("parameter \"{}\": step must be positive", name));
    if (hi < lo) invalid(fmt::format("parameter \"{}\": max ({}) is below min ({})", name, hi, lo));
    std::int64_t span = 0;
    if (__builtin_sub_overflow(hi, lo, &span) || span / step >= 100000)
      invalid(fmt::format("parameter \"{}\": range has more than 100000 values", name));
    // Counting steps rather than adding to the value keeps a range that ends
    // near INT64_MAX from overflowing.
    for (std::int64_t i = 0; i <= span / step; ++i) d.values.push_back(lo + i * step);
    r.allow({"min", "max", "step", "default", "plan_only"});
  } else {
    invalid(fmt::format("parameter \"{}\" needs \"values\": [...] or \"min\"/\"max\"[/\"step\"]", name));
  }
  d.default_value = d.values.front();
  if (const Json* def = j.find("default"); def && !def->is_null()) {
    std::int64_t v = r.required_int("default");
    if (std::find(d.values.begin(), d.values.end(), v) == d.values.end())
      invalid(fmt::format("parameter \"{}\": default {} is not one of its values", name, v));
    d.default_value = v;
  }
  if (const Json* po = j.find("plan_only"); po && !po->is_null()) {
    if (!po->is_bool()) invalid(fmt::format("parameter \"{}\": \"plan_only\" must be true or false", name));
    d.plan_only = po->as_bool();
  }
  return d;
}

}  // namespace

ParamSpace ParamSpace::from_json(const Json& params) {
  ParamSpace s;
  if (params.is_null()) return s;
  util::FieldReader r(params, "params");
  r.allow({"space", "constraints", "values", "per_workload"});
  if (const Json* space = params.find("space"); space && !space->is_null()) {
    if (!space->is_object()) invalid("\"space\" must map parameter names to declarations");
    for (const auto& [name, decl] : space->as_object()) {
      if (s.find(name)) invalid(fmt::format("parameter \"{}\" is declared twice", name));
      s.params_.push_back(parse_decl(name, decl));
    }
  }
  if (const Json* cs = params.find("constraints"); cs && !cs->is_null()) {
    if (!cs->is_array()) invalid("\"constraints\" must be an array of expressions");
    for (const auto& c : cs->as_array()) {
      if (!c.is_string()) invalid("each constraint must be an expression string");
      try {
        s.constraints_.push_back(util::Expr::parse(c.as_string()));
      } catch (const Error& e) {
        invalid(fmt::format("constraint: {}", e.what()));
      }
    }
  }
  return s;
}

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

util::Vars resolve_param_values(const Json& params, std::string_view workload, const util::Vars& dims) {
  ParamSpace space = ParamSpace::from_json(params);
  util::Vars values = space.defaults();
  auto apply = [&](const Json* j, const std::string& where) {
    if (!j || j->is_null()) return;
    if (!j->is_object()) invalid(fmt::format("{} must map parameter names to integers", where));
    for (const auto& [k, v] : j->as_object()) {
      if (!space.find(k)) invalid(fmt::format("{} sets undeclared parameter \"{}\"", where, k));
      if (!v.is_number()) invalid(fmt::format("{}: \"{}\" must be an integer", where, k));
      try {
        values[k] = v.as_int();
      } catch (const Error&) {
        invalid(fmt::format("{}: \"{}\" must be an integer", where, k));
      }
    }
  };
  if (params.is_object()) {
    apply(params.find("values"), "\"values\"");
    if (const Json* pw = params.find("per_workload"); pw && !pw->is_null()) {
      if (!pw->is_object()) invalid("\"per_workload\" must map workload names to parameter values");
      apply(pw->find(workload), fmt::format("\"per_workload\".\"{}\"", workload));
    }
  }
  std::string why;
  if (!space.admissible(values, dims, &why))
    invalid(workload.empty() ? why : fmt::format("workload \"{}\": {}", workload, why));
  return values;
}

std::vector<std::string> param_defines(const util::Vars& values) {
  std::vector<std::string> out;
  for (const auto& [k, v] : values) out.push_back(fmt::format("-D{}={}", k, v));
  return out;
}

util::Vars compiled_values(const Json& params, const util::Vars& values) {
  const ParamSpace space = ParamSpace::from_json(params);
  util::Vars out;
  for (const auto& [name, v] : values)
    if (const ParamDecl* d = space.find(name); !(d && d->plan_only)) out[name] = v;
  return out;
}

}  // namespace ks::core
