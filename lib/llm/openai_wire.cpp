#include "llm/openai_wire.hpp"

#include <fmt/format.h>

namespace ks::llm {
namespace {

std::int64_t int_at(const Json* obj, std::string_view key) {
  if (!obj || !obj->is_object()) return 0;
  const Json* v = obj->find(key);
  return v && v->is_number() ? static_cast<std::int64_t>(v->as_number()) : 0;
}

std::string string_at(const Json& obj, std::string_view key) {
  const Json* v = obj.find(key);
  return v && v->is_string() ? v->as_string() : std::string();
}

std::string excerpt(std::string_view s, std::size_t max = 200) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  std::string out(s.substr(0, max));
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > max) out += " ...";
  return out;
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// Chat content is a string, or (some servers) a list of {"type": "text", "text": ...} parts.
std::string content_text(const Json* content) {
  if (!content) return {};
  if (content->is_string()) return content->as_string();
  std::string out;
  if (content->is_array())
    for (const auto& part : content->as_array())
      if (part.is_object()) out += string_at(part, "text");
  return out;
}

void read_chat(const Json& j, WireAnswer& a) {
  const Json* u = j.find("usage");
  a.input_tokens = int_at(u, "prompt_tokens");
  a.output_tokens = int_at(u, "completion_tokens");
  a.reasoning_tokens = int_at(u && u->is_object() ? u->find("completion_tokens_details") : nullptr, "reasoning_tokens");
  a.cached_tokens = int_at(u && u->is_object() ? u->find("prompt_tokens_details") : nullptr, "cached_tokens");
  const Json* choices = j.find("choices");
  if (!choices || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) {
    a.error = "the server's answer has no choices";
    return;
  }
  const Json& c = (*choices)[0];
  a.finish_reason = string_at(c, "finish_reason");
  const Json* msg = c.find("message");
  if (msg && msg->is_object()) {
    a.text = content_text(msg->find("content"));
    std::string refusal = string_at(*msg, "refusal");
    if (!refusal.empty() && blank(a.text)) {
      a.finish_reason = "refusal";
      a.error = fmt::format("the model refused: {}", excerpt(refusal));
    }
  }
}

void read_responses(const Json& j, WireAnswer& a) {
  const Json* u = j.find("usage");
  a.input_tokens = int_at(u, "input_tokens");
  a.output_tokens = int_at(u, "output_tokens");
  a.reasoning_tokens = int_at(u && u->is_object() ? u->find("output_tokens_details") : nullptr, "reasoning_tokens");
  a.cached_tokens = int_at(u && u->is_object() ? u->find("input_tokens_details") : nullptr, "cached_tokens");
  std::string refusal;
  if (const Json* out = j.find("output"); out && out->is_array()) {
    for (const auto& item : out->as_array()) {
      if (!item.is_object() || string_at(item, "type") != "message") continue;
      const Json* parts = item.find("content");
      if (!parts || !parts->is_array()) continue;
      for (const auto& p : parts->as_array()) {
        if (!p.is_object()) continue;
        std::string type = string_at(p, "type");
        if (type == "output_text") a.text += string_at(p, "text");
        else if (type == "refusal") refusal += string_at(p, "refusal");
      }
    }
  }
  std::string status = string_at(j, "status");
  std::string reason;
  if (const Json* d = j.find("incomplete_details"); d && d->is_object()) reason = string_at(*d, "reason");
  if (status == "incomplete") {
    a.finish_reason = reason == "max_output_tokens" ? "length" : reason.empty() ? "incomplete" : reason;
  } else if (status == "failed") {
    a.finish_reason = "failed";
    std::string msg;
    if (const Json* e = j.find("error"); e && e->is_object()) msg = string_at(*e, "message");
    a.error = fmt::format("the server reports the response failed: {}", msg.empty() ? "(no message)" : msg);
  } else if (status == "completed" || status.empty()) {
    a.finish_reason = "stop";
  } else {
    a.finish_reason = status;
    a.error = fmt::format("the response is not finished (status \"{}\")", status);
  }
  if (!refusal.empty() && blank(a.text)) {
    a.finish_reason = "refusal";
    a.error = fmt::format("the model refused: {}", excerpt(refusal));
  }
}

}  // namespace

std::string endpoint_url(const OpenAiConfig& config) {
  std::string base = config.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + (config.api == OpenAiApi::chat ? "/chat/completions" : "/responses");
}

Json request_body(const OpenAiConfig& config, const LlmRequest& request) {
  Json body = Json::obj({{"model", config.model}});
  if (config.api == OpenAiApi::chat) {
    Json messages = Json::array();
    if (!request.system.empty())
      messages.push_back(Json::obj({{"role", "system"}, {"content", request.system}}));
    messages.push_back(Json::obj({{"role", "user"}, {"content", request.prompt}}));
    body["messages"] = std::move(messages);
    if (config.max_output_tokens > 0) body["max_completion_tokens"] = config.max_output_tokens;
    if (!config.reasoning_effort.empty()) body["reasoning_effort"] = config.reasoning_effort;
  } else {
    if (!request.system.empty()) body["instructions"] = request.system;
    body["input"] = request.prompt;
    if (config.max_output_tokens > 0) body["max_output_tokens"] = config.max_output_tokens;
    if (!config.reasoning_effort.empty()) body["reasoning"] = Json::obj({{"effort", config.reasoning_effort}});
    // The transcript is our record; nothing needs to stay on the provider's side.
    body["store"] = false;
  }
  if (config.temperature) body["temperature"] = *config.temperature;
  if (config.extra_body.is_object())
    for (const auto& [k, v] : config.extra_body.as_object()) body[k] = v;
  return body;
}

WireAnswer parse_answer(OpenAiApi api, std::string_view body, std::int64_t max_output_tokens) {
  WireAnswer a;
  std::string err;
  auto j = Json::try_parse(body, &err);
  if (!j || !j->is_object()) {
    a.error = blank(body) ? "the server sent an empty response body"
                          : fmt::format("the server's answer is not valid JSON ({}): {}",
                                        j ? "not an object" : err, excerpt(body));
    return a;
  }
  // Some proxies answer 200 with an error object.
  if (const Json* e = j->find("error"); e && !e->is_null() && !j->contains("choices") && !j->contains("output")) {
    a.error = fmt::format("the server answered with an error: {}", provider_error(body));
    return a;
  }
  a.model = string_at(*j, "model");
  if (api == OpenAiApi::chat) read_chat(*j, a);
  else read_responses(*j, a);
  if (!a.error.empty()) return a;
  a.text = strip_think(std::move(a.text));
  if (a.finish_reason == "length") {
    a.error = max_output_tokens > 0
                  ? fmt::format("the answer was cut off at the output limit (max_output_tokens = {}, "
                                "finish_reason \"length\"); raise the limit",
                                max_output_tokens)
                  : "the answer was cut off at the server's output limit (finish_reason \"length\"); "
                    "set max_output_tokens higher";
  } else if (a.finish_reason == "content_filter") {
    a.error = "the provider's content filter withheld the answer (finish_reason \"content_filter\")";
  } else if (a.finish_reason == "tool_calls" || a.finish_reason == "function_call") {
    a.error = fmt::format("the model asked to call a tool (finish_reason \"{}\") instead of answering",
                          a.finish_reason);
  } else if (blank(a.text)) {
    a.error = fmt::format("the model returned an empty answer (finish_reason \"{}\")",
                          a.finish_reason.empty() ? "none" : a.finish_reason);
  } else {
    a.ok = true;
  }
  return a;
}

std::string provider_error(std::string_view body, std::string* code) {
  auto j = Json::try_parse(body);
  if (j && j->is_array() && !j->empty()) j = (*j)[0];  // Gemini wraps errors in a list
  if (j && j->is_object()) {
    const Json* e = j->find("error");
    const Json& src = e && e->is_object() ? *e : *j;
    if (code) {
      *code = string_at(src, "code");
      if (code->empty()) *code = string_at(src, "type");
      if (code->empty()) *code = string_at(src, "status");
    }
    if (e && e->is_string()) return excerpt(e->as_string(), 500);
    for (std::string_view key : {"message", "detail", "error_description"}) {
      std::string m = string_at(src, key);
      if (!m.empty()) return excerpt(m, 500);
    }
  }
  if (blank(body)) return "(empty body)";
  return excerpt(body, 300);
}

std::string strip_think(std::string text) {
  constexpr std::string_view ws = " \t\r\n";
  std::size_t p = text.find_first_not_of(ws);
  if (p == std::string::npos || text.compare(p, 7, "<think>") != 0) return text;
  std::size_t e = text.find("</think>", p);
  if (e == std::string::npos) return text;  // unfinished reasoning: keep everything for the record
  std::size_t rest = text.find_first_not_of(ws, e + 8);
  return rest == std::string::npos ? std::string() : text.substr(rest);
}

}  // namespace ks::llm
