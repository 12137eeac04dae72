// Prompts, answers and usage. The LLM policy, what answers prompts, is an
// extension interface: ksearch/sys/llm_policy.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"

KS_NAMESPACE_BEGIN

// Why a prompt is sent. Replay checks that recorded and requested kinds match.
enum class PromptKind {
  wm_init,      // build the world model from the task specification
  wm_propose,   // add executable actions to the frontier
  wm_refine,    // update the tree with the evidence of a finished cycle
  wm_too_hard,  // downgrade an action whose cycle produced no passing kernel
  generate,     // write a kernel (first attempt of a cycle, or greedy step)
  debug,        // fix a failing kernel
  improve,      // make a passing kernel faster
};

KS_API const char* to_string(PromptKind k);
KS_API std::optional<PromptKind> prompt_kind_from_string(std::string_view s);

struct KS_API LlmRequest {
  PromptKind kind = PromptKind::generate;
  std::string system;  // optional system message
  std::string prompt;  // the user message
};

struct KS_API LlmUsage {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::int64_t reasoning_tokens = 0;
  double wall_s = 0;
  double cost_usd = 0;
  int attempts = 0;  // HTTP attempts including retries

  LlmUsage& operator+=(const LlmUsage& o);
  Json to_json() const;
  static LlmUsage from_json(const Json& j);
};

struct KS_API LlmResponse {
  bool ok = false;
  std::string text;           // the model's answer when ok
  std::string error;          // why it failed, when !ok (never contains credentials)
  std::string finish_reason;  // "stop", "length", "content_filter", ...
  std::string model;
  LlmUsage usage;

  Json to_json() const;
  static LlmResponse from_json(const Json& j);
};

// The extension interface the policies implement: ksearch/sys/llm_policy.hpp.
class LlmPolicy;

KS_NAMESPACE_END
