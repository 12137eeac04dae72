// make_searcher_strategy: runs a Searcher (ksearch/sys/searcher.hpp) as a
// SearchStrategy over the SearchContext, the loop a searcher leaves to us.
#include "ksearch/sys/searcher.hpp"

#include <fmt/format.h>

#include "ksearch/error.hpp"
#include "search/code_answer.hpp"

KS_NAMESPACE_BEGIN

Proposal Proposal::candidate(Solution s, std::string action) {
  Proposal p;
  p.action = std::move(action);
  p.solution = std::move(s);
  return p;
}

Proposal Proposal::prompt(LlmRequest r, std::string action, std::string parent_id) {
  Proposal p;
  p.action = std::move(action);
  p.request = std::move(r);
  p.parent_id = std::move(parent_id);
  return p;
}

namespace {

// The read-only part of the context; the searcher never reaches the rest.
class ContextView final : public SearcherView {
 public:
  explicit ContextView(SearchContext& ctx) : ctx_(ctx) {}
  const Task& task() const override { return ctx_.task(); }
  const SearchConfig& config() const override { return ctx_.config(); }
  std::string device_description() const override { return ctx_.device_description(); }
  std::mt19937_64& rng() override { return ctx_.rng(); }
  const std::optional<BestSolution>& best() const override { return ctx_.best(); }
  int rounds_used() const override { return ctx_.rounds_used(); }
  int rounds_left() const override { return ctx_.rounds_left(); }

 private:
  SearchContext& ctx_;
};

class SearcherStrategy final : public SearchStrategy {
 public:
  explicit SearcherStrategy(std::shared_ptr<Searcher> searcher) : searcher_(std::move(searcher)) {}

  std::string name() const override { return searcher_->name(); }

  void run(SearchContext& ctx) override {
    ContextView view(ctx);
    searcher_->initialize(view);
    const std::string name = searcher_->name();
    std::vector<ProposalResult> last;
    while (!ctx.should_stop()) {
      SearcherStep step = searcher_->next(last);
      last.clear();
      if (step.proposals.empty()) {
        ctx.event("search_exhausted", Json::obj({{"reason", fmt::format("{} proposed nothing more", name)}}));
        return;
      }
      for (std::size_t i = 0; i < step.proposals.size(); ++i) {
        const Proposal& p = step.proposals[i];
        if (p.solution.has_value() == p.request.has_value())
          throw Error(Status::invalid_argument,
                      fmt::format("searcher {}: proposal {} (\"{}\") must hold either a solution or a request", name,
                                  i + 1, p.action));
      }
      // Never past the budget: the first proposals run, so a longer budget
      // runs the same ones first and a stopped run's journal stays a prefix.
      const auto room = static_cast<std::size_t>(std::max(0, ctx.rounds_left()));
      if (room == 0) return;
      if (step.proposals.size() > room) step.proposals.resize(room);
      if (!step.decision.is_null()) ctx.event("decision", step.decision);
      last = run_step(ctx, name, std::move(step.proposals));
      if (!step.state.is_null()) ctx.set_state(step.state);
    }
  }

 private:
  // One step: prompts asked together, answers read in proposal order (a
  // failed round recorded for each without a candidate), then every
  // candidate evaluated together, as the built-in greedy strategy does.
  static std::vector<ProposalResult> run_step(SearchContext& ctx, const std::string& name,
                                              std::vector<Proposal> proposals) {
    std::vector<ProposalResult> out(proposals.size());
    std::vector<LlmRequest> requests;
    for (auto& p : proposals)
      if (p.request) requests.push_back(*p.request);
    std::vector<LlmResponse> answers;
    if (!requests.empty()) answers = ctx.llm_batch(requests);
    std::vector<Solution> candidates;
    std::vector<std::string> actions;
    std::vector<std::size_t> owner;  // candidate -> proposal
    std::size_t next_answer = 0;
    for (std::size_t i = 0; i < proposals.size(); ++i) {
      ProposalResult& r = out[i];
      r.proposal = std::move(proposals[i]);
      const Proposal& p = r.proposal;
      if (p.solution) {
        candidates.push_back(*p.solution);
      } else {
        r.answer = answers.at(next_answer++);
        core::CodeAnswer answer = core::read_code_answer(ctx, p.action, *r.answer);
        if (!answer.candidate) {
          r.eval = std::move(*answer.failed);
          continue;
        }
        Solution cand = std::move(*answer.candidate);
        cand.parent_id = p.parent_id;
        // Named as greedy has always named its candidates (the rounds used
        // so far plus those before it in the step), so its run folders keep
        // their bytes now that it is a searcher.
        cand.name = fmt::format("r{}-{}", ctx.rounds_used() + static_cast<int>(candidates.size()) + 1, name);
        candidates.push_back(std::move(cand));
      }
      actions.push_back(p.action);
      owner.push_back(i);
    }
    if (!candidates.empty()) {
      std::vector<EvalResult> results = ctx.evaluate_batch(candidates, actions);
      for (std::size_t j = 0; j < candidates.size(); ++j) {
        out[owner[j]].candidate = std::move(candidates[j]);
        out[owner[j]].eval = std::move(results.at(j));
      }
    }
    return out;
  }

  std::shared_ptr<Searcher> searcher_;
};

}  // namespace

std::unique_ptr<SearchStrategy> make_searcher_strategy(std::shared_ptr<Searcher> searcher) {
  if (!searcher) throw Error(Status::invalid_argument, "make_searcher_strategy: the searcher is null");
  return std::make_unique<SearcherStrategy>(std::move(searcher));
}

KS_NAMESPACE_END
