// JSON conversions and helpers for the core value types.
#include "ksearch/types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/entry_point.hpp"
#include "core/enum_names.hpp"
#include "ksearch/error.hpp"
#include "util/json_fields.hpp"
#include "util/sha256.hpp"

KS_NAMESPACE_BEGIN

// ---------------------------------------------------------------------------
// Enumerations

const char* to_string(Language lang) {
  switch (lang) {
    case Language::cuda: return "cuda";
    case Language::cpp: return "cpp";
    case Language::triton: return "triton";
    case Language::python: return "python";
  }
  return "?";
}

std::optional<Language> language_from_string(std::string_view s) {
  if (s == "cuda") return Language::cuda;
  if (s == "cpp" || s == "host" || s == "c++") return Language::cpp;
  if (s == "triton") return Language::triton;
  if (s == "python" || s == "pytorch") return Language::python;
  return std::nullopt;
}

namespace {
constexpr auto kDTypeNames = core::enum_names<DType::boolean>(
    {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "f8e4m3", "f8e5m2", "i8", "i16", "bool"});
constexpr auto kDistributionNames = core::enum_names<Distribution::Kind::permutation>(
    {"normal", "uniform", "cauchy", "int_range", "constant", "clamped_normal", "indptr", "permutation"});
constexpr auto kScoreModeNames = core::enum_names<ScoreMode::vs_baseline>({"latency", "vs_baseline"});
constexpr auto kEvalStatusNames = core::enum_names<EvalStatus::memory_limit>(
    {"passed", "compile_error", "runtime_error", "incorrect", "timeout", "crashed", "invalid", "generation_failed",
     "memory_limit"});
constexpr auto kStopReasonNames = core::enum_names<StopReason::recording_ended>(
    {"max_rounds", "strategy_done", "cancelled", "interrupted", "max_cost", "max_wall_time", "llm_exhausted",
     "replay_diverged", "recording_ended"});
constexpr auto kToleranceRuleNames =
    core::enum_names<Tolerance::Rule::abs_or_rel>({"ref_relative", "out_relative", "abs_or_rel"});
}  // namespace

const char* to_string(DType t) { return core::enum_name(kDTypeNames, t); }

std::optional<DType> dtype_from_string(std::string_view s) {
  if (s == "f32" || s == "float32") return DType::f32;
  if (s == "f64" || s == "float64") return DType::f64;
  if (s == "f16" || s == "float16") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "i32" || s == "int32") return DType::i32;
  if (s == "i64" || s == "int64") return DType::i64;
  if (s == "u8" || s == "uint8") return DType::u8;
  if (s == "f8e4m3" || s == "float8_e4m3fn" || s == "f8e4m3fn") return DType::f8e4m3;
  if (s == "f8e5m2" || s == "float8_e5m2") return DType::f8e5m2;
  if (s == "i8" || s == "int8") return DType::i8;
  if (s == "i16" || s == "int16") return DType::i16;
  if (s == "bool" || s == "boolean") return DType::boolean;
  return std::nullopt;
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::f32: case DType::f64: case DType::f16: case DType::bf16: case DType::f8e4m3: case DType::f8e5m2:
      return true;
    default: return false;
  }
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::f8e4m3: return 1;
    case DType::f8e5m2: return 1;
    case DType::i8: return 1;
    case DType::i16: return 2;
    case DType::boolean: return 1;
  }
  return 0;
}

const char* dtype_c_type(DType t, Language lang) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16: return lang == Language::cuda ? "__half" : "uint16_t";
    case DType::bf16: return lang == Language::cuda ? "__nv_bfloat16" : "uint16_t";
    case DType::i32: return lang == Language::cuda ? "int" : "int32_t";
    case DType::i64: return lang == Language::cuda ? "long long" : "int64_t";
    case DType::u8: return lang == Language::cuda ? "unsigned char" : "uint8_t";
    // cuda_fp8.h's types; the host sees the raw byte.
    case DType::f8e4m3: return lang == Language::cuda ? "__nv_fp8_e4m3" : "uint8_t";
    case DType::f8e5m2: return lang == Language::cuda ? "__nv_fp8_e5m2" : "uint8_t";
    case DType::i8: return lang == Language::cuda ? "signed char" : "int8_t";
    case DType::i16: return lang == Language::cuda ? "short" : "int16_t";
    case DType::boolean: return "bool";
  }
  return "?";
}

const char* to_string(Distribution::Kind k) { return core::enum_name(kDistributionNames, k); }

const char* to_string(ScoreMode m) { return core::enum_name(kScoreModeNames, m); }

std::optional<ScoreMode> score_mode_from_string(std::string_view s) {
  return core::enum_value<ScoreMode>(kScoreModeNames, s);
}

const char* to_string(EvalStatus s) { return core::enum_name(kEvalStatusNames, s); }

std::optional<EvalStatus> eval_status_from_string(std::string_view s) {
  return core::enum_value<EvalStatus>(kEvalStatusNames, s);
}

const char* to_string(StopReason r) { return core::enum_name(kStopReasonNames, r); }

std::optional<StopReason> stop_reason_from_string(std::string_view s) {
  return core::enum_value<StopReason>(kStopReasonNames, s);
}

// ---------------------------------------------------------------------------
// Distribution, TensorSpec, WorkloadSpec, Tolerance

namespace {

// Accepts a number or an expression string for a distribution parameter.
std::string param_text(const Json& j, std::string_view field) {
  if (j.is_string()) return j.as_string();
  if (j.is_int()) return std::to_string(j.as_int());
  if (j.is_number()) return fmt::format("{}", j.as_number());
  throw Error(Status::invalid_argument,
              fmt::format("\"{}\" must be a number or an expression string", field));
}

}  // namespace

Json Distribution::to_json() const {
  Json j = Json::obj({{"kind", to_string(kind)}});
  switch (kind) {
    case Kind::normal: j["mean"] = p0; j["std"] = p1; break;
    case Kind::uniform: j["low"] = p0; j["high"] = p1; break;
    case Kind::cauchy: j["loc"] = p0; j["scale"] = p1; break;
    case Kind::int_range: j["low"] = p0; j["high"] = p1; break;
    case Kind::constant: j["value"] = p0; break;
    case Kind::clamped_normal: j["low"] = p0; j["high"] = p1; break;
    case Kind::indptr: j["total"] = p0; j["min_length"] = p1; break;
    case Kind::permutation: j["range"] = p0; break;
  }
  return j;
}

Distribution Distribution::from_json(const Json& j) {
  util::FieldReader r(j, "distribution");
  Distribution d;
  std::string kind = r.required_string("kind");
  auto param = [&](std::string_view name, std::string def) {
    const Json* v = j.find(name);
    return v && !v->is_null() ? param_text(*v, name) : def;
  };
  if (kind == "normal") {
    d.kind = Kind::normal;
    d.p0 = param("mean", "0");
    d.p1 = param("std", "1");
    r.allow({"kind", "mean", "std"});
  } else if (kind == "uniform") {
    d.kind = Kind::uniform;
    d.p0 = param("low", "0");
    d.p1 = param("high", "1");
    r.allow({"kind", "low", "high"});
  } else if (kind == "cauchy") {
    d.kind = Kind::cauchy;
    d.p0 = param("loc", "0");
    d.p1 = param("scale", "1");
    r.allow({"kind", "loc", "scale"});
  } else if (kind == "int_range") {
    d.kind = Kind::int_range;
    d.p0 = param("low", "0");
    d.p1 = param("high", "1");
    r.allow({"kind", "low", "high"});
  } else if (kind == "constant") {
    d.kind = Kind::constant;
    if (!j.contains("value"))
      throw Error(Status::invalid_argument, "distribution \"constant\" needs a \"value\"");
    d.p0 = param("value", "0");
    d.p1 = "0";
    r.allow({"kind", "value"});
  } else if (kind == "clamped_normal") {
    d.kind = Kind::clamped_normal;
    d.p0 = param("low", "-2");
    d.p1 = param("high", "2");
    r.allow({"kind", "low", "high"});
  } else if (kind == "indptr") {
    d.kind = Kind::indptr;
    if (!j.contains("total"))
      throw Error(Status::invalid_argument,
                  "distribution \"indptr\" needs a \"total\" (the last offset, e.g. \"num_kv_indices\")");
    d.p0 = param("total", "0");
    d.p1 = param("min_length", "1");
    r.allow({"kind", "total", "min_length"});
  } else if (kind == "permutation") {
    d.kind = Kind::permutation;
    if (!j.contains("range"))
      throw Error(Status::invalid_argument,
                  "distribution \"permutation\" needs a \"range\" (values are drawn from [0, range), e.g. "
                  "\"num_pages\")");
    d.p0 = param("range", "0");
    d.p1 = "0";
    r.allow({"kind", "range"});
  } else {
    throw Error(Status::invalid_argument,
                fmt::format("unknown distribution kind \"{}\" (expected normal, uniform, cauchy, "
                            "int_range, constant, clamped_normal, indptr or permutation)", kind));
  }
  return d;
}

Json TensorSpec::to_json() const {
  Json shape_j = Json::array();
  for (const auto& s : shape) shape_j.push_back(s);
  if (scalar) shape_j = Json();
  Json j = Json::obj({{"name", name}, {"dtype", to_string(dtype)}, {"shape", shape_j},
                      {"role", is_output ? "output" : "input"}});
  if (!is_output) j["dist"] = dist.to_json();
  return j;
}

TensorSpec TensorSpec::from_json(const Json& j) {
  util::FieldReader r(j, "tensor");
  TensorSpec t;
  t.name = r.required_string("name");
  r.set_context(fmt::format("tensor \"{}\"", t.name));
  std::string dt = r.required_string("dtype");
  auto d = dtype_from_string(dt);
  if (!d)
    throw Error(Status::invalid_argument,
                fmt::format("tensor \"{}\": unknown dtype \"{}\" (expected f32, f64, f16, bf16, f8e4m3, "
                            "f8e5m2, i8, i16, i32, i64, u8 or bool)", t.name, dt));
  t.dtype = *d;
  // "shape": null is a scalar input (FlashInfer-Bench's convention).
  const Json* shape_field = j.find("shape");
  t.scalar = shape_field && shape_field->is_null();
  for (const auto& s : t.scalar ? Json::Array{} : r.required_array("shape")) {
    if (s.is_string()) t.shape.push_back(s.as_string());
    else if (s.is_int()) t.shape.push_back(std::to_string(s.as_int()));
    else
      throw Error(Status::invalid_argument,
                  fmt::format("tensor \"{}\": shape entries must be dimension expressions or integers",
                              t.name));
  }
  std::string role = j.get_string("role", "input");
  if (role != "input" && role != "output")
    throw Error(Status::invalid_argument,
                fmt::format("tensor \"{}\": role must be \"input\" or \"output\", found \"{}\"", t.name,
                            role));
  t.is_output = role == "output";
  if (const Json* dj = j.find("dist"); dj && !dj->is_null()) {
    try {
      t.dist = Distribution::from_json(*dj);
    } catch (const Error& e) {
      throw Error(e.status(), fmt::format("tensor \"{}\": {}", t.name, e.what()));
    }
  }
  r.allow({"name", "dtype", "shape", "role", "dist"});
  return t;
}

Json InputData::to_json() const {
  if (from_file()) return Json::obj({{"safetensors", file}, {"key", key}});
  Json v = Json::array();
  for (double x : values) {
    if (std::nearbyint(x) == x && std::fabs(x) < 9e15) v.push_back(static_cast<std::int64_t>(x));
    else v.push_back(x);
  }
  return Json::obj({{"values", v}});
}

InputData InputData::from_json(const Json& j) {
  util::FieldReader r(j, "input data");
  InputData d;
  if (j.contains("safetensors")) {
    d.file = r.required_string("safetensors");
    d.key = r.required_string("key");
    if (d.file.empty()) throw Error(Status::invalid_argument, "input data: \"safetensors\" is an empty path");
    r.allow({"safetensors", "key"});
    return d;
  }
  if (!j.contains("values"))
    throw Error(Status::invalid_argument,
                "input data needs \"values\" (inline numbers) or \"safetensors\" and \"key\" (a tensor in a file)");
  const auto& vals = r.required_array("values");
  d.values.reserve(vals.size());
  for (std::size_t i = 0; i < vals.size(); ++i) {
    if (!vals[i].is_number())
      throw Error(Status::invalid_argument, fmt::format("input data: values[{}] is not a number", i));
    d.values.push_back(vals[i].as_number());
  }
  r.allow({"values"});
  return d;
}

Json WorkloadSpec::to_json() const {
  Json dj = Json::object();
  for (const auto& [k, v] : dims) dj[k] = v;
  Json j = Json::obj({{"name", name}, {"dims", dj}, {"seed", static_cast<std::int64_t>(seed)},
                      {"benchmark", benchmark}});
  if (!dist_overrides.empty()) {
    Json o = Json::object();
    for (const auto& [k, v] : dist_overrides) o[k] = v.to_json();
    j["dist"] = o;
  }
  if (!data.empty()) {
    Json o = Json::object();
    for (const auto& [k, v] : data) o[k] = v.to_json();
    j["data"] = o;
  }
  return j;
}

WorkloadSpec WorkloadSpec::from_json(const Json& j) {
  util::FieldReader r(j, "workload");
  WorkloadSpec w;
  w.name = r.required_string("name");
  r.set_context(fmt::format("workload \"{}\"", w.name));
  const Json& dims = r.required_object("dims");
  for (const auto& [k, v] : dims.as_object()) {
    if (!v.is_number())
      throw Error(Status::invalid_argument,
                  fmt::format("workload \"{}\": dimension \"{}\" must be an integer", w.name, k));
    try {
      w.dims[k] = v.as_int();
    } catch (const Error&) {
      throw Error(Status::invalid_argument,
                  fmt::format("workload \"{}\": dimension \"{}\" must be an integer, found {}", w.name,
                              k, v.as_number()));
    }
  }
  std::int64_t seed = r.optional_int("seed", 0);
  if (seed < 0)
    throw Error(Status::invalid_argument, fmt::format("workload \"{}\": seed must be >= 0", w.name));
  w.seed = static_cast<std::uint64_t>(seed);
  w.benchmark = j.get_bool("benchmark", false);
  if (const Json* o = j.find("dist"); o && !o->is_null()) {
    if (!o->is_object())
      throw Error(Status::invalid_argument,
                  fmt::format("workload \"{}\": \"dist\" must map tensor names to distributions",
                              w.name));
    for (const auto& [k, v] : o->as_object()) {
      try {
        w.dist_overrides[k] = Distribution::from_json(v);
      } catch (const Error& e) {
        throw Error(e.status(), fmt::format("workload \"{}\", tensor \"{}\": {}", w.name, k, e.what()));
      }
    }
  }
  if (const Json* o = j.find("data"); o && !o->is_null()) {
    if (!o->is_object())
      throw Error(Status::invalid_argument,
                  fmt::format("workload \"{}\": \"data\" must map tensor names to input data", w.name));
    for (const auto& [k, v] : o->as_object()) {
      try {
        w.data[k] = InputData::from_json(v);
      } catch (const Error& e) {
        throw Error(e.status(), fmt::format("workload \"{}\", tensor \"{}\": {}", w.name, k, e.what()));
      }
    }
  }
  r.allow({"name", "dims", "seed", "benchmark", "dist", "data"});
  return w;
}

const char* to_string(Tolerance::Rule r) { return core::enum_name(kToleranceRuleNames, r); }

Json Tolerance::to_json() const {
  return Json::obj({{"atol", atol},
                    {"rtol", rtol},
                    {"rule", to_string(rule)},
                    {"min_matched_ratio", min_matched_ratio},
                    {"nan_policy", nan_policy == NanPolicy::must_match ? "must_match" : "forbid"}});
}

Tolerance Tolerance::from_json(const Json& j) {
  util::FieldReader r(j, "tolerance");
  Tolerance t;
  t.atol = r.optional_number("atol", t.atol);
  t.rtol = r.optional_number("rtol", t.rtol);
  t.min_matched_ratio = r.optional_number("min_matched_ratio", t.min_matched_ratio);
  if (t.atol < 0 || t.rtol < 0)
    throw Error(Status::invalid_argument, "tolerance: atol and rtol must be >= 0");
  if (!(t.min_matched_ratio > 0 && t.min_matched_ratio <= 1))
    throw Error(Status::invalid_argument, "tolerance: min_matched_ratio must be in (0, 1]");
  std::string nan = j.get_string("nan_policy", "must_match");
  if (nan == "must_match") t.nan_policy = NanPolicy::must_match;
  else if (nan == "forbid") t.nan_policy = NanPolicy::forbid;
  else
    throw Error(Status::invalid_argument,
                fmt::format("tolerance: nan_policy must be \"must_match\" or \"forbid\", found \"{}\"",
                            nan));
  std::string rule = j.get_string("rule", "ref_relative");
  if (rule == "ref_relative") t.rule = Rule::ref_relative;
  else if (rule == "out_relative") t.rule = Rule::out_relative;
  else if (rule == "abs_or_rel") t.rule = Rule::abs_or_rel;
  else
    throw Error(Status::invalid_argument,
                fmt::format("tolerance: rule must be \"ref_relative\", \"out_relative\" or \"abs_or_rel\", "
                            "found \"{}\"",
                            rule));
  r.allow({"atol", "rtol", "rule", "min_matched_ratio", "nan_policy"});
  return t;
}

// ---------------------------------------------------------------------------
// Solution

std::string Solution::compute_id() const {
  // Length-prefixed fields so no two different solutions hash alike.
  util::Sha256 h;
  auto field = [&](std::string_view s) {
    std::string len = std::to_string(s.size()) + ":";
    h.update(len);
    h.update(s);
  };
  field(to_string(language));
  std::vector<const SourceFile*> files;
  for (const auto& f : sources) files.push_back(&f);
  std::sort(files.begin(), files.end(),
            [](const SourceFile* a, const SourceFile* b) { return a->path < b->path; });
  for (const auto* f : files) {
    field(f->path);
    field(f->content);
  }
  field(launch_plan.to_json().dump());
  field(params.to_json().dump());  // "null" without params
  // Only when set, so the ids of every solution without them stay as they were.
  if (!entry_point.empty()) field("entry_point=" + entry_point);
  if (destination_passing) field(*destination_passing ? "destination_passing=1" : "destination_passing=0");
  return h.hex_digest().substr(0, 16);
}

Solution& Solution::finalize() {
  id = compute_id();
  return *this;
}

Json Solution::to_json() const {
  Json files = Json::array();
  for (const auto& f : sources) files.push_back(Json::obj({{"path", f.path}, {"content", f.content}}));
  Json j = Json::obj({{"id", id.empty() ? compute_id() : id},
                      {"parent_id", parent_id},
                      {"name", name},
                      {"task", task},
                      {"language", to_string(language)},
                      {"sources", files},
                      {"launch_plan", launch_plan.to_json()}});
  if (Json p = params.to_json(); !p.is_null()) j["params"] = std::move(p);
  if (!description.empty()) j["description"] = description;
  if (!entry_point.empty()) j["entry_point"] = entry_point;
  if (destination_passing) j["destination_passing_style"] = *destination_passing;
  return j;
}

namespace {

// "FILE::FUNCTION", FlashInfer-Bench's form: one "::", a file the solution
// has, a Python identifier; for Python languages only.
void check_entry_point(const Solution& s) {
  const std::string& e = s.entry_point;
  auto bad = [&](const std::string& why) {
    throw Error(Status::invalid_argument, fmt::format("solution: entry point \"{}\" {}", e, why));
  };
  if (!language_is_python(s.language)) bad(fmt::format("is for triton and python solutions, not {}", to_string(s.language)));
  const auto parts = core::split_entry_point(e);
  if (!parts) bad("must be FILE::FUNCTION with exactly one \"::\", e.g. main.py::run");
  if (!core::is_identifier(parts->function)) bad("does not end in a Python function name");
  if (std::none_of(s.sources.begin(), s.sources.end(), [&](const SourceFile& f) { return f.path == parts->file; }))
    bad(fmt::format("names {}, which is not among the solution's sources", parts->file));
}

}  // namespace

Solution Solution::from_json(const Json& j) {
  util::FieldReader r(j, "solution");
  Solution s;
  s.name = j.get_string("name");
  s.parent_id = j.get_string("parent_id");
  s.task = j.get_string("task");
  s.description = j.get_string("description");
  std::string lang = r.required_string("language");
  auto l = language_from_string(lang);
  if (!l)
    throw Error(Status::invalid_argument,
                fmt::format("solution: unknown language \"{}\" (expected cuda, cpp, triton or python)", lang));
  s.language = *l;
  for (const auto& f : r.required_array("sources")) {
    util::FieldReader fr(f, "solution source");
    s.sources.push_back({fr.required_string("path"), fr.required_string("content")});
  }
  if (s.sources.empty()) throw Error(Status::invalid_argument, "solution: \"sources\" is empty");
  // A stored plan that does not follow the schema is kept as written (with
  // its id); evaluating it reports the problem. New plans are checked when
  // read (the candidate parser, task files).
  if (const Json* p = j.find("launch_plan")) s.launch_plan = LaunchPlan::as_written(*p, s.language);
  // Params likewise: unreadable ones fail the solution's evaluation, as they
  // did when params were read only there.
  if (const Json* p = j.find("params")) s.params = Params::as_written(*p);
  s.entry_point = j.get_string("entry_point");
  if (const Json* d = j.find("destination_passing_style")) {
    if (!d->is_bool()) throw Error(Status::invalid_argument, "solution: \"destination_passing_style\" must be true or false");
    s.destination_passing = d->as_bool();
  }
  if (!s.entry_point.empty()) check_entry_point(s);
  s.finalize();
  std::string stored = j.get_string("id");
  // A stored id that disagrees with the content means the file was edited;
  // the content wins, so the id always names what is there.
  (void)stored;
  r.allow({"id", "parent_id", "name", "task", "language", "sources", "launch_plan", "params",
           "description", "entry_point", "destination_passing_style"});
  return s;
}

// ---------------------------------------------------------------------------
// Timing and results

const char* to_string(LatencyStatistic s) {
  switch (s) {
    case LatencyStatistic::mean: return "mean";
    case LatencyStatistic::median: return "median";
    case LatencyStatistic::p10: return "p10";
    case LatencyStatistic::undisturbed_median: return "undisturbed_median";
  }
  return "mean";
}

std::optional<LatencyStatistic> latency_statistic_from_string(std::string_view s) {
  for (auto v : {LatencyStatistic::mean, LatencyStatistic::median, LatencyStatistic::p10,
                 LatencyStatistic::undisturbed_median})
    if (s == to_string(v)) return v;
  return std::nullopt;
}

double TimingStats::rel_half_width() const {
  const double l = latency();
  if (l <= 0) return 0;
  if (ci_hi_ms > 0 && ci_lo_ms > 0) return 0.5 * (ci_hi_ms - ci_lo_ms) / l;
  return 1.96 * rel_stderr;  // written before intervals existed: the mean's
}

Json TimingStats::to_json() const {
  Json j = Json::obj({{"mean_ms", mean_ms},
                      {"median_ms", median_ms},
                      {"min_ms", min_ms},
                      {"max_ms", max_ms},
                      {"stddev_ms", stddev_ms},
                      {"rel_stderr", rel_stderr},
                      {"count", count}});
  if (latency_ms > 0) {
    j["statistic"] = to_string(statistic);
    if (disturbed > 0) j["disturbed"] = disturbed;
    j["latency_ms"] = latency_ms;
    j["ci_lo_ms"] = ci_lo_ms;
    j["ci_hi_ms"] = ci_hi_ms;
  }
  return j;
}

TimingStats TimingStats::from_json(const Json& j) {
  TimingStats t;
  t.mean_ms = j.get_number("mean_ms");
  t.median_ms = j.get_number("median_ms");
  t.min_ms = j.get_number("min_ms");
  t.max_ms = j.get_number("max_ms");
  t.stddev_ms = j.get_number("stddev_ms");
  t.rel_stderr = j.get_number("rel_stderr");
  t.count = static_cast<int>(j.get_int("count"));
  if (j.find("statistic")) {
    auto s = latency_statistic_from_string(j.get_string("statistic"));
    if (!s) throw Error(Status::invalid_argument, "timing: unknown statistic \"" + j.get_string("statistic") + "\"");
    t.statistic = *s;
  }
  t.disturbed = static_cast<int>(j.get_int("disturbed"));
  t.latency_ms = j.get_number("latency_ms");
  t.ci_lo_ms = j.get_number("ci_lo_ms");
  t.ci_hi_ms = j.get_number("ci_hi_ms");
  return t;
}

Json WorkloadResult::to_json() const {
  Json j = Json::obj({{"name", name}, {"benchmark", benchmark}, {"status", to_string(status)}});
  if (timing.count > 0) j["timing"] = timing.to_json();
  if (reference_ms > 0) j["reference_ms"] = reference_ms;
  if (paired) {
    j["paired"] = true;
    j["reference_timing"] = reference_timing.to_json();
  }
  if (baseline_ms > 0) j["baseline_ms"] = baseline_ms;
  j["max_abs_error"] = max_abs_error;
  j["max_rel_error"] = max_rel_error;
  j["matched_ratio"] = matched_ratio;
  if (!message.empty()) j["message"] = message;
  return j;
}

WorkloadResult WorkloadResult::from_json(const Json& j) {
  WorkloadResult w;
  w.name = j.get_string("name");
  w.benchmark = j.get_bool("benchmark");
  auto st = eval_status_from_string(j.get_string("status", "passed"));
  if (!st) throw Error(Status::invalid_argument, "workload result: unknown status");
  w.status = *st;
  if (const Json* t = j.find("timing")) w.timing = TimingStats::from_json(*t);
  w.reference_ms = j.get_number("reference_ms");
  w.paired = j.get_bool("paired");
  if (const Json* t = j.find("reference_timing")) w.reference_timing = TimingStats::from_json(*t);
  w.baseline_ms = j.get_number("baseline_ms");
  w.max_abs_error = j.get_number("max_abs_error");
  w.max_rel_error = j.get_number("max_rel_error");
  w.matched_ratio = j.get_number("matched_ratio", 1.0);
  w.message = j.get_string("message");
  return w;
}

double WorkloadResult::speedup() const {
  const double l = timing.latency();
  return l > 0 && reference_ms > 0 ? reference_ms / l : 0;
}

void EvalResult::compute_summary() {
  latency_ms = 0;
  latency_lo_ms = 0;
  latency_hi_ms = 0;
  reference_latency_ms = 0;
  speedup = 0;
  vs_baseline = 0;
  score = 0;
  if (status != EvalStatus::passed) return;
  // Geometric means, in log space. The interval's half-width in log space is
  // that of a mean of independent terms: sqrt(sum of squares) / n.
  double log_sum = 0, speedup_log_sum = 0, ratio_sum = 0, half_sq = 0;
  int n = 0, n_ref = 0, n_base = 0;
  bool intervals = true;
  for (const auto& w : workloads) {
    const double l = w.timing.latency();
    if (!w.benchmark || w.timing.count == 0 || l <= 0) continue;
    log_sum += std::log(l);
    ++n;
    if (w.timing.ci_lo_ms > 0 && w.timing.ci_hi_ms >= w.timing.ci_lo_ms) {
      const double h = 0.5 * std::log(w.timing.ci_hi_ms / w.timing.ci_lo_ms);
      half_sq += h * h;
    } else {
      intervals = false;
    }
    if (const double sp = w.speedup(); sp > 0) {
      speedup_log_sum += std::log(sp);
      ++n_ref;
    }
    if (w.baseline_ms > 0) {
      ratio_sum += w.baseline_ms / l;
      ++n_base;
    }
  }
  if (n == 0) return;
  latency_ms = std::exp(log_sum / n);
  if (intervals) {
    const double h = std::sqrt(half_sq) / n;
    latency_lo_ms = latency_ms * std::exp(-h);
    latency_hi_ms = latency_ms * std::exp(h);
  }
  score = 1.0 / latency_ms;
  if (n_ref == n) {
    speedup = std::exp(speedup_log_sum / n_ref);
    reference_latency_ms = latency_ms * speedup;
  }
  if (n_base == n) {
    vs_baseline = ratio_sum / n_base;
    if (score_mode == ScoreMode::vs_baseline) score = vs_baseline;
  }
}

std::string EvalResult::failure_reason() const {
  if (status == EvalStatus::passed) return {};
  std::string first;
  for (const auto& w : workloads) {
    if (w.status != EvalStatus::passed && !w.message.empty()) {
      first = w.name + ": " + w.message;
      break;
    }
  }
  if (first.empty() && !log.empty()) first = log;
  first = first.substr(0, first.find('\n'));
  if (first.size() > 160) {
    std::size_t n = 157;
    while (n > 0 && (static_cast<unsigned char>(first[n]) & 0xC0) == 0x80) --n;  // whole UTF-8 characters
    first = first.substr(0, n) + "...";
  }
  return first;
}

std::string EvalResult::summary() const {
  if (status != EvalStatus::passed) {
    std::string first = failure_reason();
    return first.empty() ? std::string(to_string(status))
                         : fmt::format("{} ({})", to_string(status), first);
  }
  if (latency_ms <= 0) return "passed";
  std::string rel;
  if (speedup > 0) rel = fmt::format("{:.2f}x vs reference", speedup);
  if (vs_baseline > 0) rel += fmt::format("{}{:.2f}x vs baseline", rel.empty() ? "" : ", ", vs_baseline);
  // The interval when known: "passed 0.4012 ms +-2.1% (3.10x vs reference)".
  std::string pm;
  if (latency_lo_ms > 0 && latency_hi_ms > latency_lo_ms)
    pm = fmt::format(" +-{:.1f}%", 50.0 * (latency_hi_ms - latency_lo_ms) / latency_ms);
  if (!rel.empty()) return fmt::format("passed {:.4f} ms{} ({})", latency_ms, pm, rel);
  return fmt::format("passed {:.4f} ms{}", latency_ms, pm);
}

Json EvalResult::to_json() const {
  Json ws = Json::array();
  for (const auto& w : workloads) ws.push_back(w.to_json());
  Json j = Json::obj({{"status", to_string(status)},
                      {"solution_id", solution_id},
                      {"latency_ms", latency_ms},
                      {"reference_latency_ms", reference_latency_ms},
                      {"speedup", speedup},
                      {"vs_baseline", vs_baseline},
                      {"score_mode", to_string(score_mode)},
                      {"score", score},
                      {"workloads", ws},
                      {"metrics", metrics},
                      {"device", device}});
  if (latency_lo_ms > 0) {
    j["latency_lo_ms"] = latency_lo_ms;
    j["latency_hi_ms"] = latency_hi_ms;
  }
  if (!log.empty()) j["log"] = log;
  return j;
}

EvalResult EvalResult::from_json(const Json& j) {
  EvalResult r;
  auto st = eval_status_from_string(j.get_string("status", "passed"));
  if (!st)
    throw Error(Status::invalid_argument,
                fmt::format("evaluation result: unknown status \"{}\"", j.get_string("status")));
  r.status = *st;
  r.solution_id = j.get_string("solution_id");
  r.latency_ms = j.get_number("latency_ms");
  r.latency_lo_ms = j.get_number("latency_lo_ms");
  r.latency_hi_ms = j.get_number("latency_hi_ms");
  r.reference_latency_ms = j.get_number("reference_latency_ms");
  r.speedup = j.get_number("speedup");
  r.vs_baseline = j.get_number("vs_baseline");
  r.score_mode = score_mode_from_string(j.get_string("score_mode", "latency")).value_or(ScoreMode::latency);
  r.score = j.get_number("score");
  if (const Json* ws = j.find("workloads"); ws && ws->is_array())
    for (const auto& w : ws->as_array()) r.workloads.push_back(WorkloadResult::from_json(w));
  if (const Json* m = j.find("metrics"); m && m->is_object()) r.metrics = *m;
  r.device = j.get_string("device");
  r.log = j.get_string("log");
  return r;
}

KS_NAMESPACE_END
