#include "eval/messages.hpp"

#include <fmt/format.h>

#include "ksearch/error.hpp"
#include "util/json_fields.hpp"

namespace ks::eval {

Json vars_to_json(const util::Vars& v) {
  Json j = Json::object();
  for (const auto& [k, x] : v) j[k] = x;
  return j;
}

util::Vars vars_from_json(const Json& j) {
  util::Vars v;
  if (j.is_object())
    for (const auto& [k, x] : j.as_object()) v[k] = x.as_int();
  return v;
}

const PreparedSolution::Build* PreparedSolution::build_for(const std::string& workload) const {
  auto it = workload_build.find(workload);
  if (it == workload_build.end() || it->second < 0 || it->second >= static_cast<int>(builds.size()))
    return nullptr;
  return &builds[static_cast<std::size_t>(it->second)];
}

Json PreparedSolution::to_json() const {
  Json bs = Json::array();
  for (const auto& b : builds)
    bs.push_back(Json::obj({{"params", vars_to_json(b.params)}, {"artifact", artifact_to_json(b.artifact)}}));
  Json wb = Json::object();
  for (const auto& [w, i] : workload_build) wb[w] = i;
  return Json::obj(
      {{"solution", solution.to_json()}, {"flags", util::string_array(flags)}, {"builds", bs}, {"workload_build", wb}});
}

PreparedSolution PreparedSolution::from_json(const Json& j) {
  PreparedSolution p;
  p.solution = Solution::from_json(j.at("solution"));
  p.flags = util::string_list(j.find("flags"), "\"flags\"");
  for (const auto& b : j.at("builds").as_array())
    p.builds.push_back({vars_from_json(b.at("params")), artifact_from_json(b.at("artifact"))});
  for (const auto& [w, i] : j.at("workload_build").as_object()) p.workload_build[w] = static_cast<int>(i.as_int());
  return p;
}

constexpr int kMaxSeedsPerWorkload = 64;

void validate_options(const EvalOptions& o) {
  auto bad = [](const std::string& what) { throw Error(Status::invalid_argument, "evaluation options: " + what); };
  if (!o.run_tests && !o.run_benchmarks) bad("run_tests and run_benchmarks are both off: nothing to evaluate");
  // Two seeds at least (architecture decision 4): one input set can be
  // matched by accident or by a kernel that special-cases it.
  if (o.seeds_per_workload < 2) bad(fmt::format("seeds_per_workload must be >= 2, is {}", o.seeds_per_workload));
  // Each seed is a full checked run per workload; beyond this an
  // evaluation takes hours without checking anything new.
  if (o.seeds_per_workload > kMaxSeedsPerWorkload)
    bad(fmt::format("seeds_per_workload must be <= {}, is {}", kMaxSeedsPerWorkload, o.seeds_per_workload));
  if (!(o.compile_timeout_s > 0)) bad("compile_timeout_s must be positive");
  if (!(o.run_timeout_s > 0)) bad("run_timeout_s must be positive");
  if (o.min_reps < 1) bad(fmt::format("min_reps must be >= 1, is {}", o.min_reps));
  if (o.max_reps < o.min_reps) bad(fmt::format("max_reps ({}) is below min_reps ({})", o.max_reps, o.min_reps));
  if (o.min_time_per_workload_s < 0) bad("min_time_per_workload_s must be >= 0");
  if (!(o.max_time_per_workload_s > 0)) bad("max_time_per_workload_s must be positive");
  if (o.max_time_per_workload_s < o.min_time_per_workload_s)
    bad("max_time_per_workload_s is below min_time_per_workload_s");
  if (!(o.target_rel_stderr > 0)) bad("target_rel_stderr must be positive");
  const Json& b = o.baseline_latencies;
  if (!b.is_null()) {
    if (!b.is_object()) bad("baseline_latencies must map device names to {workload: ms} objects");
    for (const auto& [device, per] : b.as_object()) {
      if (!per.is_object()) bad(fmt::format("baseline_latencies[\"{}\"] must map workload names to milliseconds", device));
      for (const auto& [w, ms] : per.as_object())
        if (!ms.is_number() || !(ms.as_number() > 0))
          bad(fmt::format("baseline_latencies[\"{}\"][\"{}\"] must be a positive number of milliseconds", device, w));
    }
  }
  if (o.timing != TimingMode::standard && o.timing != TimingMode::upstream)
    bad(fmt::format("timing {} is not one of default, upstream", static_cast<int>(o.timing)));
}

Json artifact_to_json(const Artifact& a) {
  Json lowered = Json::object();
  for (const auto& [k, v] : a.lowered_names) lowered[k] = v;
  return Json::obj({{"language", to_string(a.language)},
                    {"path", a.path},
                    {"kernels", util::string_array(a.kernels)},
                    {"lowered_names", lowered},
                    {"log", a.log},
                    {"compile_s", a.compile_s},
                    {"cache_hit", a.cache_hit},
                    {"pch", a.pch},
                    {"builds_at_load", a.builds_at_load}});
}

Artifact artifact_from_json(const Json& j) {
  Artifact a;
  auto lang = language_from_string(j.get_string("language", "cuda"));
  if (!lang) throw Error(Status::invalid_argument, "artifact: unknown language");
  a.language = *lang;
  a.path = j.get_string("path");
  a.kernels = util::string_list(j.find("kernels"), "artifact: \"kernels\"");
  if (const Json* l = j.find("lowered_names"); l && l->is_object())
    for (const auto& [k, v] : l->as_object()) a.lowered_names[k] = v.as_string();
  a.log = j.get_string("log");
  a.compile_s = j.get_number("compile_s");
  a.cache_hit = j.get_bool("cache_hit");
  a.pch = j.get_string("pch");
  a.builds_at_load = j.get_bool("builds_at_load");
  return a;
}

Json compile_request_to_json(const CompileRequest& r) {
  Json tensors = Json::array();
  for (const auto& t : r.tensors) tensors.push_back(t.to_json());
  Json params = Json::object();
  for (const auto& [k, v] : r.params) params[k] = v;
  return Json::obj({{"solution", r.solution.to_json()},
                    {"arch", r.arch},
                    {"flags", util::string_array(r.flags)},
                    {"params", params},
                    {"cache_dir", r.cache_dir},
                    {"tensors", tensors},
                    {"timeout_s", r.timeout_s}});
}

CompileRequest compile_request_from_json(const Json& j) {
  CompileRequest r;
  r.solution = Solution::from_json(j.at("solution"));
  r.arch = j.get_string("arch");
  r.flags = util::string_list(j.find("flags"), "\"flags\"");
  if (const Json* p = j.find("params"); p && p->is_object())
    for (const auto& [k, v] : p->as_object()) r.params[k] = v.as_int();
  r.cache_dir = j.get_string("cache_dir");
  if (const Json* t = j.find("tensors"); t && t->is_array())
    for (const auto& x : t->as_array()) r.tensors.push_back(TensorSpec::from_json(x));
  r.timeout_s = j.get_number("timeout_s");
  return r;
}

}  // namespace ks::eval
