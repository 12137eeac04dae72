#include "tasks/flashinfer/suite_common.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ks::tasks::flashinfer {

Distribution random_rule(DType t) {
  Distribution d;
  switch (t) {
    case DType::f8e4m3:
    case DType::f8e5m2: d.kind = Distribution::Kind::clamped_normal, d.p0 = "-2", d.p1 = "2"; break;
    case DType::boolean: d.kind = Distribution::Kind::int_range, d.p0 = "0", d.p1 = "1"; break;
    case DType::i8: d.kind = Distribution::Kind::int_range, d.p0 = "-128", d.p1 = "127"; break;
    case DType::i16:
    case DType::i32:
    case DType::i64:
    case DType::u8: d.kind = Distribution::Kind::int_range, d.p0 = "-1024", d.p1 = "1023"; break;
    default: d.kind = Distribution::Kind::normal, d.p0 = "0", d.p1 = "1"; break;
  }
  if (t == DType::u8) d.p0 = "0", d.p1 = "255";
  return d;
}

Distribution constant(std::string value) {
  Distribution d;
  d.kind = Distribution::Kind::constant;
  d.p0 = std::move(value);
  d.p1 = "0";
  return d;
}

TensorSpec input(std::string name, DType t, std::vector<std::string> shape) {
  return input(std::move(name), t, std::move(shape), random_rule(t));
}

TensorSpec input(std::string name, DType t, std::vector<std::string> shape, Distribution d) {
  TensorSpec s;
  s.name = std::move(name);
  s.dtype = t;
  s.shape = std::move(shape);
  s.dist = std::move(d);
  return s;
}

TensorSpec scalar(std::string name, DType t, Distribution d) {
  TensorSpec s = input(std::move(name), t, {}, std::move(d));
  s.scalar = true;
  return s;
}

TensorSpec output(std::string name, DType t, std::vector<std::string> shape) {
  TensorSpec s;
  s.name = std::move(name);
  s.dtype = t;
  s.shape = std::move(shape);
  s.is_output = true;
  return s;
}

Tolerance flashinfer_tolerance(double matched) {
  Tolerance t;
  t.atol = 1e-2;
  t.rtol = 1e-2;
  t.rule = Tolerance::Rule::abs_or_rel;
  t.min_matched_ratio = matched;
  t.nan_policy = Tolerance::NanPolicy::forbid;
  return t;
}

Solution cuda_solution(std::string name, std::string_view task, std::string file, std::string_view source,
                       std::string_view plan_json, std::string description) {
  Solution s;
  s.name = std::move(name);
  s.task = std::string(task);
  s.language = Language::cuda;
  s.sources.push_back({std::move(file), std::string(source)});
  s.launch_plan = LaunchPlan::from_json(Json::parse(plan_json), s.language);
  s.description = std::move(description);
  return s.finalize();
}

void add_python_languages(TaskSpec& spec) {
  // Triton needs the GPU, so a cuda reference; python runs against either.
  const bool cuda = spec.references.count(Language::cuda) > 0;
  if (!cuda && !spec.references.count(Language::cpp)) return;
  for (Language l : {Language::triton, Language::python})
    if ((cuda || l == Language::python) &&
        std::find(spec.languages.begin(), spec.languages.end(), l) == spec.languages.end())
      spec.languages.push_back(l);
  std::string in, out;
  for (const auto& t : spec.tensors) (t.is_output ? out : in) += std::string((t.is_output ? out : in).empty() ? "" : ", ") + t.name;
  spec.python = Json::obj(
      {{"function", "run"},
       {"module", "main.py"},
       {"signature", fmt::format("run({}, {}) filling the outputs it is given (destination-passing style, "
                                 "FlashInfer-Bench's default), or run({}) returning ({})",
                                 in, out, in, out)}});
}

WorkloadSpec paged_workload(const PagedCase& c, const std::map<std::string, std::int64_t>& constants) {
  WorkloadSpec w;
  w.name = c.name;
  w.seed = c.seed;
  w.benchmark = c.benchmark;
  for (const auto& [k, v] : constants) w.dims[k] = v;
  const std::int64_t entries = c.batch * c.mean_len;
  w.dims["batch_size"] = c.batch;
  w.dims["len_indptr"] = c.batch + 1;
  w.dims["num_kv_indices"] = entries;
  w.dims["num_pages"] = std::max<std::int64_t>(entries * c.pool_factor, 16384);
  if (c.sm_scale > 0) w.dist_overrides["sm_scale"] = constant(fmt::format("{:.17g}", c.sm_scale));
  return w;
}

}  // namespace ks::tasks::flashinfer
