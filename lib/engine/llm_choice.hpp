// The LLM side of a run: making the policy a LlmChoice names (LlmChoice's
// own codec and make_llm_policy are declared in ksearch/search.hpp), and
// what run, resume and replay do to a choice before they make its policy.
#pragma once

#include <cstddef>

#include "ksearch/search.hpp"

namespace ks::engine {

// The transports must carry an answer of max_answer_bytes (JSON escaping can
// double it); the session then refuses anything longer, whoever sent it.
LlmChoice with_transport_caps(LlmChoice c, std::size_t max_answer_bytes);

// Before the first LLM call: the policy must be able to answer (the endpoint
// is up and takes the key, the program exists). A check that could not be
// made is a warning on stderr.
void check_llm(LlmPolicy& llm);

}  // namespace ks::engine
