// Greedy iterative refinement: every step asks for improvements of the best
// kernel so far (or a fix of the last failure while nothing passes),
// `parallel` candidates at a time. The baseline K-Search is compared with.
#include <fmt/format.h>

#include "search/code_answer.hpp"
#include "search/prompts.hpp"
#include "search/strategies.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/search_strategy.hpp"

namespace ks::core {
namespace {

class GreedyStrategy final : public SearchStrategy {
 public:
  std::string name() const override { return "greedy"; }

  void run(SearchContext& ctx) override {
    const SearchConfig& cfg = ctx.config();
    std::optional<Solution> last;
    std::optional<EvalResult> last_eval;
    std::string last_raw;
    int step = 0;
    while (!ctx.should_stop()) {
      ++step;
      int k = std::max(1, std::min(cfg.parallel, ctx.rounds_left()));
      const auto& best = ctx.best();
      CodegenInputs in;
      in.task = &ctx.task();
      in.language = cfg.language;
      in.device = ctx.device_description();
      in.attempt = step;
      in.debug_rounds_label = cfg.debug_rounds_label;
      if (best) in.base = {&best->solution, &best->eval, ""};
      in.last = {last ? &*last : nullptr, last_eval ? &*last_eval : nullptr, last_raw};
      // Which request this step makes rests on what passed so far: a replay
      // compares it with the recording's (docs/search.md, "Replay").
      std::string next = best ? "improve" : last_eval ? "debug" : "generate";
      std::string because =
          best        ? fmt::format("step {}: improve the best kernel so far, {} ({:.4f} ms)", step,
                                    best->solution.id.substr(0, 8), best->eval.latency_ms)
          : last_eval ? fmt::format("step {}: nothing has passed yet; fix the last attempt ({})", step,
                                    to_string(last_eval->status))
                      : fmt::format("step {}: nothing attempted yet", step);
      ctx.event("decision", Json::obj({{"decision", "step"}, {"next", next}, {"step", step}, {"parallel", k},
                                       {"why", because}}));
      std::vector<LlmRequest> reqs;
      for (int i = 0; i < k; ++i) {
        if (k > 1)
          in.variant_hint = fmt::format("This is sample {} of {} answered in parallel: take a different "
                                        "approach from the obvious one so the samples explore different designs.",
                                        i + 1, k);
        if (best) reqs.push_back(build_improve_request(in));
        else if (last_eval) reqs.push_back(build_debug_request(in));
        else reqs.push_back(build_generate_request(in));
      }
      std::vector<LlmResponse> resps = ctx.llm_batch(reqs);
      std::vector<Solution> cands;
      std::vector<std::string> actions;
      bool any_answer = false;
      for (const auto& r : resps) any_answer = any_answer || r.ok;
      if (any_answer) {
        last.reset();
        last_eval.reset();
        last_raw.clear();
      }
      for (int i = 0; i < k; ++i) {
        std::string label = fmt::format("{} step {}{}", to_string(reqs[static_cast<std::size_t>(i)].kind), step,
                                        k > 1 ? fmt::format(" sample {}", i + 1) : "");
        const LlmResponse& r = resps[static_cast<std::size_t>(i)];
        CodeAnswer answer = read_code_answer(ctx, label, r);
        if (!answer.candidate) {
          // An outage keeps the evidence of the last real attempt.
          if (answer.unreadable) {
            last_eval = std::move(answer.unreadable);
            last_raw = r.text;
          }
          continue;
        }
        Solution cand = std::move(*answer.candidate);
        cand.parent_id = best ? best->solution.id : "";
        cand.name = fmt::format("r{}-greedy", ctx.rounds_used() + static_cast<int>(cands.size()) + 1);
        cands.push_back(std::move(cand));
        actions.push_back(label);
      }
      if (!cands.empty()) {
        std::vector<EvalResult> results = ctx.evaluate_batch(cands, actions);
        // The next debug prompt shows the last candidate of the batch.
        last = cands.back();
        last_eval = results.back();
        last_raw.clear();
      }
      ctx.set_state(Json::obj({{"strategy", "greedy"}, {"step", step}, {"parallel", k}}));
    }
  }
};

}  // namespace

std::unique_ptr<SearchStrategy> make_greedy_strategy() { return std::make_unique<GreedyStrategy>(); }

}  // namespace ks::core
