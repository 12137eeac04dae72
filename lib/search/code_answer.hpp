// The one failed-round path of the strategies: an answer to a code request
// becomes a candidate, or a failed round the session records (the request
// failed, or the answer does not read as a candidate).
#pragma once

#include <optional>
#include <string>

#include "ksearch/strategy.hpp"
#include "ksearch/sys/search_strategy.hpp"

namespace ks::core {

struct CodeAnswer {
  std::optional<Solution> candidate;  // to evaluate; set when the answer read as one
  // Without a candidate, the failed round's result when an answer came that
  // did not read as a candidate: evidence for the next fix prompt (with the
  // answer's text). None after an outage (the request failed), which says
  // nothing about the code: the strategy keeps the evidence it had.
  std::optional<EvalResult> unreadable;
  // Without a candidate, the failed round's result either way (an outage's
  // too): what a searcher is handed back (ksearch/sys/searcher.hpp).
  std::optional<EvalResult> failed;
  bool outage() const { return !candidate && !unreadable; }
};

// Reads `response` as a candidate in the run's language; a failed request or
// an unreadable answer is recorded as a failed round named `label`.
CodeAnswer read_code_answer(SearchContext& ctx, const std::string& label, const LlmResponse& response);

}  // namespace ks::core
