// The LLM value types (ksearch/llm.hpp), and the default behaviour of the
// LlmPolicy interface (ksearch/sys/llm_policy.hpp).
#include "core/enum_names.hpp"
#include "ksearch/error.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "util/secrets.hpp"
#include "util/text.hpp"

KS_NAMESPACE_BEGIN

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
