// The wrappers a run puts around its evaluator and LLM policy: checks
// against the host's cancel token, and an evaluator made on first use.
#pragma once

#include <functional>
#include <memory>

#include "ksearch/cancel.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/llm.hpp"

namespace ks::engine {

// With a cancel token, every LLM call and evaluation is checked against it
// before and after: one that was cut short (or returned after the cancel)
// throws Status::cancelled, so the session journals nothing of it.
std::shared_ptr<LlmPolicy> cancellable_llm(std::shared_ptr<LlmPolicy> inner, std::shared_ptr<CancelToken> token);
std::shared_ptr<Evaluator> cancellable_evaluator(std::shared_ptr<Evaluator> inner, std::shared_ptr<CancelToken> token);

// The evaluator of a reproduction: made by `make` on first use, so replaying
// recorded evaluations needs no GPU (and starts no worker). Until then it
// reports the `recorded` device, which the recorded prompts named.
std::shared_ptr<Evaluator> lazy_evaluator(std::function<std::shared_ptr<Evaluator>()> make, DeviceInfo recorded);

}  // namespace ks::engine
