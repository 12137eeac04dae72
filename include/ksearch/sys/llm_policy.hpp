// Extension interface (less stable: it may change in a minor release; see
// docs/api.md). The LLM policy: something that answers
// prompts. Implementations: openai (HTTP), command (external program),
// replay (recorded transcript), offline (no model; used by the tune
// strategy), C callbacks through the C ABI, and a host's own.
#pragma once

#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/llm.hpp"

KS_NAMESPACE_BEGIN

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
