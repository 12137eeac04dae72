// Default behaviour of the abstract interfaces and the LLM value types.
#include <fmt/format.h>

#include "core/enum_names.hpp"
#include "ksearch/error.hpp"
#include "ksearch/evaluator.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "util/json_fields.hpp"
#include "util/secrets.hpp"
#include "util/text.hpp"

KS_NAMESPACE_BEGIN

// ---------------------------------------------------------------------------
// Evaluator

std::vector<EvalResult> Evaluator::evaluate_batch(const Task& task,
                                                  const std::vector<Solution>& solutions) {
  std::vector<EvalResult> out;
  out.reserve(solutions.size());
  for (const auto& s : solutions) out.push_back(evaluate(task, s));
  return out;
}

Json EvalOptions::to_json() const {
  Json j = Json::obj({{"run_tests", run_tests},
                    {"run_benchmarks", run_benchmarks},
                    {"only_workloads", util::string_array(only_workloads)},
                    {"seeds_per_workload", seeds_per_workload},
                    {"recheck_after_timing", recheck_after_timing},
                    {"compile_timeout_s", compile_timeout_s},
                    {"run_timeout_s", run_timeout_s},
                    {"min_time_per_workload_s", min_time_per_workload_s},
                    {"max_time_per_workload_s", max_time_per_workload_s},
                    {"min_reps", min_reps},
                    {"max_reps", max_reps},
                    {"target_rel_stderr", target_rel_stderr},
                    {"flush_l2", flush_l2},
                    {"timing", timing},
                    {"time_reference", time_reference},
                    {"extra_compile_flags", util::string_array(extra_compile_flags)}});
  if (!baseline_latencies.is_null()) j["baseline_latencies"] = baseline_latencies;
  return j;
}

EvalOptions EvalOptions::from_json(const Json& j) {
  EvalOptions o;
  if (!j.is_object()) throw Error(Status::invalid_argument, "evaluation options must be a JSON object");
  o.run_tests = j.get_bool("run_tests", o.run_tests);
  o.run_benchmarks = j.get_bool("run_benchmarks", o.run_benchmarks);
  o.only_workloads = util::string_list(j.find("only_workloads"), "evaluation options: \"only_workloads\"");
  o.seeds_per_workload = static_cast<int>(j.get_int("seeds_per_workload", o.seeds_per_workload));
  o.recheck_after_timing = j.get_bool("recheck_after_timing", o.recheck_after_timing);
  o.compile_timeout_s = j.get_number("compile_timeout_s", o.compile_timeout_s);
  o.run_timeout_s = j.get_number("run_timeout_s", o.run_timeout_s);
  o.min_time_per_workload_s = j.get_number("min_time_per_workload_s", o.min_time_per_workload_s);
  o.max_time_per_workload_s = j.get_number("max_time_per_workload_s", o.max_time_per_workload_s);
  o.min_reps = static_cast<int>(j.get_int("min_reps", o.min_reps));
  o.max_reps = static_cast<int>(j.get_int("max_reps", o.max_reps));
  o.target_rel_stderr = j.get_number("target_rel_stderr", o.target_rel_stderr);
  o.flush_l2 = j.get_bool("flush_l2", o.flush_l2);
  o.timing = j.get_string("timing", o.timing);
  o.time_reference = j.get_bool("time_reference", o.time_reference);
  o.extra_compile_flags = util::string_list(j.find("extra_compile_flags"), "evaluation options: \"extra_compile_flags\"");
  if (const Json* b = j.find("baseline_latencies"); b && !b->is_null()) o.baseline_latencies = *b;
  return o;
}

Json DeviceInfo::to_json() const {
  return Json::obj({{"backend", backend},
                    {"name", name},
                    {"arch", arch},
                    {"count", count},
                    {"peak_flops", peak_flops},
                    {"peak_bytes_per_s", peak_bytes_per_s},
                    {"l2_bytes", l2_bytes},
                    {"memory_bytes", memory_bytes}});
}

DeviceInfo DeviceInfo::from_json(const Json& j) {
  DeviceInfo d;
  if (!j.is_object()) return d;
  d.backend = j.get_string("backend");
  d.name = j.get_string("name");
  d.arch = j.get_string("arch");
  d.count = static_cast<int>(j.get_int("count"));
  d.peak_flops = j.get_number("peak_flops");
  d.peak_bytes_per_s = j.get_number("peak_bytes_per_s");
  d.l2_bytes = j.get_int("l2_bytes");
  d.memory_bytes = j.get_int("memory_bytes");
  return d;
}

// ---------------------------------------------------------------------------
// LLM types

namespace {
constexpr auto kPromptKindNames = core::enum_names<PromptKind::improve>(
    {"wm_init", "wm_propose", "wm_refine", "wm_too_hard", "generate", "debug", "improve"});
}  // namespace

const char* to_string(PromptKind k) { return core::enum_name(kPromptKindNames, k); }

std::optional<PromptKind> prompt_kind_from_string(std::string_view s) {
  return core::enum_value<PromptKind>(kPromptKindNames, s);
}

LlmUsage& LlmUsage::operator+=(const LlmUsage& o) {
  input_tokens += o.input_tokens;
  output_tokens += o.output_tokens;
  reasoning_tokens += o.reasoning_tokens;
  wall_s += o.wall_s;
  cost_usd += o.cost_usd;
  attempts += o.attempts;
  return *this;
}

Json LlmUsage::to_json() const {
  return Json::obj({{"input_tokens", input_tokens},
                    {"output_tokens", output_tokens},
                    {"reasoning_tokens", reasoning_tokens},
                    {"wall_s", wall_s},
                    {"cost_usd", cost_usd},
                    {"attempts", attempts}});
}

LlmUsage LlmUsage::from_json(const Json& j) {
  LlmUsage u;
  if (!j.is_object()) return u;
  u.input_tokens = j.get_int("input_tokens");
  u.output_tokens = j.get_int("output_tokens");
  u.reasoning_tokens = j.get_int("reasoning_tokens");
  u.wall_s = j.get_number("wall_s");
  u.cost_usd = j.get_number("cost_usd");
  u.attempts = static_cast<int>(j.get_int("attempts"));
  return u;
}

Json LlmResponse::to_json() const {
  Json j = Json::obj({{"ok", ok}, {"text", text}});
  // JSON strings are UTF-8: an answer that is not keeps its exact bytes here
  // ("text" shows it with U+FFFD), so a resume or replay parses the same code
  // the run evaluated. Redacted first, as everything the run folder receives.
  if (!util::is_valid_utf8(text)) j["text_base64"] = util::base64_encode(util::redact(text));
  if (!error.empty()) j["error"] = error;
  if (!finish_reason.empty()) j["finish_reason"] = finish_reason;
  if (!model.empty()) j["model"] = model;
  j["usage"] = usage.to_json();
  return j;
}

LlmResponse LlmResponse::from_json(const Json& j) {
  LlmResponse r;
  r.ok = j.get_bool("ok", true);
  r.text = j.get_string("text");
  if (const Json* b = j.find("text_base64"); b && b->is_string() && !util::base64_decode(b->as_string(), r.text))
    throw Error(Status::parse, "response: \"text_base64\" is not base64");
  r.error = j.get_string("error");
  r.finish_reason = j.get_string("finish_reason");
  r.model = j.get_string("model");
  if (const Json* u = j.find("usage")) r.usage = LlmUsage::from_json(*u);
  return r;
}

std::vector<LlmResponse> LlmPolicy::complete_batch(const std::vector<LlmRequest>& requests) {
  std::vector<LlmResponse> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(complete(r));
  return out;
}

KS_NAMESPACE_END
