// The two OpenAI wire formats: building request bodies and reading answers
// and error bodies. Pure functions, so the rules are testable without a server.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/json.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/llm_policies.hpp"

namespace ks::llm {

// The endpoint URL for `config.api`: base_url (trailing '/' dropped) +
// "/chat/completions" or "/responses".
std::string endpoint_url(const OpenAiConfig& config);

// The JSON body of one request. Optional settings are sent only when set,
// and extra_body's members are merged last (they win).
Json request_body(const OpenAiConfig& config, const LlmRequest& request);

// What a 200 response said.
struct WireAnswer {
  bool ok = false;
  std::string text;           // the answer (also kept when truncated, for the record)
  std::string finish_reason;  // "stop", "length", "content_filter", "refusal", ...
  std::string model;
  std::string error;          // why it is not usable, when !ok
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::int64_t reasoning_tokens = 0;
  std::int64_t cached_tokens = 0;
};

// Reads a 200 response body of `api`. Never throws: a malformed, empty,
// truncated, filtered or refused answer comes back with ok == false and an
// error that says which, in words a user can act on.
WireAnswer parse_answer(OpenAiApi api, std::string_view body, std::int64_t max_output_tokens);

// The provider's message from an error body: {"error": {"message": ...}},
// a list of those (Gemini), {"message": ...}, {"detail": ...} or a plain text
// excerpt. `code` receives error.code or error.type when present.
std::string provider_error(std::string_view body, std::string* code = nullptr);

// A leading <think>...</think> section (local reasoning models put their
// reasoning in the content) is removed; the answer proper is what follows.
std::string strip_think(std::string text);

}  // namespace ks::llm
