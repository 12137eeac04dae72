// Greedy iterative refinement: every step asks for improvements of the best
// kernel so far (or a fix of the last failure while nothing passes),
// `greedy_parallel` (else `parallel`) candidates at a time. The baseline
// K-Search is compared with.
// Written as a Searcher (ksearch/sys/searcher.hpp): it only proposes
// prompts; make_searcher_strategy runs them, as it runs a host's searcher.
#include <fmt/format.h>

#include "search/prompts.hpp"
#include "search/settings_rows.hpp"
#include "search/strategies.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/searcher.hpp"

namespace ks::core {
namespace {

class GreedySearcher final : public Searcher {
 public:
  std::string name() const override { return "greedy"; }

  void initialize(SearcherView& view) override {
    view_ = &view;
    last_.reset();
    last_eval_.reset();
    last_raw_.clear();
    step_ = 0;
  }

  SearcherStep next(const std::vector<ProposalResult>& done) override {
    take(done);
    const SearchConfig& cfg = view_->config();
    ++step_;
    const int width = cfg.greedy.parallel > 0 ? cfg.greedy.parallel : cfg.parallel;
    const int k = std::max(1, std::min(width, view_->rounds_left()));
    const auto& best = view_->best();
    CodegenInputs in;
    in.task = &view_->task();
    in.language = cfg.language;
    in.device = view_->device_description();
    in.attempt = step_;
    in.debug_rounds_label = cfg.debug_rounds_label;
    if (best) in.base = {&best->solution, &best->eval, ""};
    in.base_heading = "Best kernel so far";
    in.base_name = "the best kernel so far";
    in.last = {last_ ? &*last_ : nullptr, last_eval_ ? &*last_eval_ : nullptr, last_raw_};
    // Which request this step makes rests on what passed so far: a replay
    // compares it with the recording's (docs/search.md, "Replay").
    std::string next = best ? "improve" : last_eval_ ? "debug" : "generate";
    std::string because =
        best         ? fmt::format("step {}: improve the best kernel so far, {} ({:.4f} ms)", step_,
                                   best->solution.id.substr(0, 8), best->eval.latency_ms)
        : last_eval_ ? fmt::format("step {}: nothing has passed yet; fix the last attempt ({})", step_,
                                   to_string(last_eval_->status))
                     : fmt::format("step {}: nothing attempted yet", step_);
    SearcherStep out;
    out.decision = Json::obj({{"decision", "step"}, {"next", next}, {"step", step_}, {"parallel", k}, {"why", because}});
    const std::string parent = best ? best->solution.id : "";
    for (int i = 0; i < k; ++i) {
      if (k > 1)
        in.variant_hint = fmt::format("This is sample {} of {} answered in parallel: take a different "
                                      "approach from the obvious one so the samples explore different designs.",
                                      i + 1, k);
      LlmRequest req = best        ? build_improve_request(in)
                       : last_eval_ ? build_debug_request(in)
                                    : build_generate_request(in);
      std::string label = fmt::format("{} step {}{}", to_string(req.kind), step_,
                                      k > 1 ? fmt::format(" sample {}", i + 1) : "");
      out.proposals.push_back(Proposal::prompt(std::move(req), std::move(label), parent));
    }
    out.state = Json::obj({{"strategy", "greedy"}, {"step", step_}, {"parallel", k}});
    return out;
  }

 private:
  // What the next debug prompt shows, from the last step's results.
  void take(const std::vector<ProposalResult>& done) {
    bool any_answer = false;
    for (const auto& r : done) any_answer = any_answer || (r.answer && r.answer->ok);
    if (any_answer) {
      last_.reset();
      last_eval_.reset();
      last_raw_.clear();
    }
    const ProposalResult* last_evaluated = nullptr;
    for (const auto& r : done) {
      if (r.evaluated()) {
        last_evaluated = &r;
      } else if (!r.outage()) {
        // An answer without a usable candidate; an outage keeps the
        // evidence of the last real attempt.
        last_eval_ = r.eval;
        last_raw_ = r.answer->text;
      }
    }
    if (last_evaluated) {
      // The next debug prompt shows the last candidate of the batch.
      last_ = *last_evaluated->candidate;
      last_eval_ = last_evaluated->eval;
      last_raw_.clear();
    }
  }

  SearcherView* view_ = nullptr;
  std::optional<Solution> last_;
  std::optional<EvalResult> last_eval_;
  std::string last_raw_;
  int step_ = 0;
};

}  // namespace

std::unique_ptr<SearchStrategy> make_greedy_strategy() {
  return make_searcher_strategy(std::make_shared<GreedySearcher>());
}

// The greedy strategy's rows of the settings table (ksearch/search_settings.hpp).
std::vector<SettingSpec> greedy_setting_rows() {
  return {field_setting([](SearchConfig& c) -> int& { return c.greedy.parallel; },
                        {.key = "greedy_parallel", .component = "greedy", .min = 0, .max = 64,
                         .help = "greedy: candidates each step asks for and evaluates together, whatever --parallel "
                                 "gives the other strategies; 0: --parallel's.",
                         .flag = "greedy-parallel", .placeholder = "N", .default_text = "--parallel",
                         .replay = true})};
}

}  // namespace ks::core
