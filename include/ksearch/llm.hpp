// The LLM policy: something that answers prompts. Implementations: openai
// (HTTP), command (external program), replay (recorded transcript), offline
// (no model; used by the tune strategy), and a C callback through the C ABI.
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

class KS_API LlmPolicy {
 public:
  virtual ~LlmPolicy() = default;

  // Answers one prompt. A failed generation (outage, malformed or truncated
  // answer) is returned as ok == false; it throws ks::Error only for
  // configuration errors or when the policy can never answer again (e.g. a
  // replay transcript that ran out).
  virtual LlmResponse complete(const LlmRequest& request) = 0;

  // Answers several prompts, concurrently where the policy can. Responses are
  // in request order. The default answers them one by one.
  virtual std::vector<LlmResponse> complete_batch(const std::vector<LlmRequest>& requests);

  // A short description for logs and the manifest, e.g. "openai:gpt-5.2".
  virtual std::string describe() const = 0;

  // True once a cost budget stops new requests; the search then ends cleanly.
  virtual bool exhausted() const { return false; }

  // Total usage so far.
  virtual LlmUsage total_usage() const { return {}; }

  // Called from another thread when the run is cancelled: a call in flight
  // should end promptly (abort the transfer, kill the process) and this or
  // any later call may throw ks::Error(Status::cancelled). Must be
  // thread-safe. The default does nothing; the engine then drops the
  // answer of the call in flight when it returns.
  virtual void cancel() {}

  // Called once before the first prompt of a run, so a run that cannot be
  // answered fails before it spends anything: throws ks::Error naming the
  // problem (an endpoint that cannot be reached or refuses the key, a program
  // that does not exist). Returns a warning for a check that could not be
  // made (e.g. a server without the route asked), or "" when all is well.
  // The default checks nothing.
  virtual std::string check_ready() { return {}; }
};

KS_NAMESPACE_END
