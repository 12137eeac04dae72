#include "search/code_answer.hpp"

#include "core/response/parse.hpp"

namespace ks::core {

CodeAnswer read_code_answer(SearchContext& ctx, const std::string& label, const LlmResponse& response) {
  CodeAnswer out;
  if (!response.ok) {
    out.failed = ctx.record_failed_round(label, "the LLM request failed: " + response.error, response.text);
    return out;
  }
  std::string why;
  out.candidate = read_candidate(response.text, ctx.config().language, &why);
  if (!out.candidate) {
    out.unreadable = ctx.record_failed_round(label, why, response.text);
    out.failed = out.unreadable;
  }
  return out;
}

}  // namespace ks::core
