// The params codec: the one reader of a solution's "params" schema
// (docs/tuning.md). It checks shapes and names; whether values are allowed
// for a workload is checked where they are resolved (core/param_space.hpp).
#include "ksearch/params.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/entry_point.hpp"
#include "ksearch/error.hpp"
#include "util/expr.hpp"
#include "util/json_fields.hpp"

KS_NAMESPACE_BEGIN

// The JSON the params were read from, and the fields as read: while the
// fields are unchanged, to_json gives back that JSON byte for byte.
struct Params::Written {
  Json json;
  Params fields;
  std::string problem;  // as_written: why the JSON does not follow the schema
};

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(Status::invalid_argument, "params: " + what); }

Params::Decl read_decl(const std::string& name, const Json& j) {
  if (!core::is_identifier(name))
    invalid(fmt::format("\"{}\" is not a valid parameter name (use a C identifier)", name));
  util::FieldReader r(j, fmt::format("params: parameter \"{}\"", name));
  Params::Decl d;
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

// "values" or one workload's entry of "per_workload"; `where` names it as
// the messages did when values were read at evaluation.
Params::Values read_values(const Params& p, const Json& j, const std::string& where) {
  Params::Values out;
  if (j.is_null()) return out;
  if (!j.is_object()) invalid(fmt::format("{} must map parameter names to integers", where));
  for (const auto& [k, v] : j.as_object()) {
    if (!p.find(k)) invalid(fmt::format("{} sets undeclared parameter \"{}\"", where, k));
    if (!v.is_number()) invalid(fmt::format("{}: \"{}\" must be an integer", where, k));
    try {
      out[k] = v.as_int();
    } catch (const Error&) {
      invalid(fmt::format("{}: \"{}\" must be an integer", where, k));
    }
  }
  return out;
}

// Values in declaration order, as the tuner has always written them.
Json values_json(const Params& p, const Params::Values& v) {
  Json j = Json::object();
  for (const auto& d : p.space)
    if (auto it = v.find(d.name); it != v.end()) j[d.name] = it->second;
  for (const auto& [k, x] : v)
    if (!p.find(k)) j[k] = x;  // undeclared: written so the mistake stays visible
  return j;
}

}  // namespace

bool Params::empty() const {
  return space.empty() && constraints.empty() && values.empty() && per_workload.empty() && readable();
}

Params Params::from_json(const Json& j) {
  Params p;
  if (j.is_null()) return p;
  util::FieldReader r(j, "params");
  r.allow({"space", "constraints", "values", "per_workload"});
  if (const Json* space = j.find("space"); space && !space->is_null()) {
    if (!space->is_object()) invalid("\"space\" must map parameter names to declarations");
    for (const auto& [name, decl] : space->as_object()) {
      if (p.find(name)) invalid(fmt::format("parameter \"{}\" is declared twice", name));
      p.space.push_back(read_decl(name, decl));
    }
  }
  if (const Json* cs = j.find("constraints"); cs && !cs->is_null()) {
    if (!cs->is_array()) invalid("\"constraints\" must be an array of expressions");
    for (const auto& c : cs->as_array()) {
      if (!c.is_string()) invalid("each constraint must be an expression string");
      try {
        (void)util::Expr::parse(c.as_string());  // kept as text: checked here, evaluated per workload
      } catch (const Error& e) {
        invalid(fmt::format("constraint: {}", e.what()));
      }
      p.constraints.push_back(c.as_string());
    }
  }
  if (const Json* v = j.find("values")) p.values = read_values(p, *v, "\"values\"");
  if (const Json* pw = j.find("per_workload"); pw && !pw->is_null()) {
    if (!pw->is_object()) invalid("\"per_workload\" must map workload names to parameter values");
    for (const auto& [w, v] : pw->as_object())
      p.per_workload[w] = read_values(p, v, fmt::format("\"per_workload\".\"{}\"", w));
  }
  p.written_ = std::make_shared<const Written>(Written{j, p, {}});
  return p;
}

Params Params::as_written(const Json& j) {
  try {
    return from_json(j);
  } catch (const Error& e) {
    Params p;
    p.written_ = std::make_shared<const Written>(Written{j, {}, e.what()});
    return p;
  }
}

const std::string& Params::problem() const {
  static const std::string none;
  return written_ ? written_->problem : none;
}

const Params::Decl* Params::find(std::string_view name) const {
  for (const auto& d : space)
    if (d.name == name) return &d;
  return nullptr;
}

bool Params::operator==(const Params& o) const {
  return space == o.space && constraints == o.constraints && values == o.values && per_workload == o.per_workload &&
         problem() == o.problem();
}

Json Params::to_json() const {
  if (written_ && (!written_->problem.empty() || *this == written_->fields)) return written_->json;
  if (empty()) return Json();
  Json j = Json::object();
  if (!space.empty()) {
    Json s = Json::object();
    for (const auto& d : space) {
      Json vs = Json::array();
      for (std::int64_t v : d.values) vs.push_back(v);
      Json dj = Json::obj({{"values", std::move(vs)}});
      if (d.values.empty() || d.default_value != d.values.front()) dj["default"] = d.default_value;
      if (d.plan_only) dj["plan_only"] = true;
      s[d.name] = std::move(dj);
    }
    j["space"] = std::move(s);
  }
  if (!constraints.empty()) {
    Json cs = Json::array();
    for (const auto& c : constraints) cs.push_back(c);
    j["constraints"] = std::move(cs);
  }
  if (!values.empty()) j["values"] = values_json(*this, values);
  if (!per_workload.empty()) {
    Json pw = Json::object();
    for (const auto& [w, v] : per_workload) pw[w] = values_json(*this, v);
    j["per_workload"] = std::move(pw);
  }
  return j;
}

KS_NAMESPACE_END
