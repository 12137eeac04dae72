// A SearchContext test double for strategy tests: evaluations come from a
// function, rounds and the best solution are tracked like the engine does,
// and everything the strategy did is recorded for inspection.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ksearch/strategy.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::test {

class FakeContext final : public SearchContext {
 public:
  using EvalFn = std::function<EvalResult(const Task&, const Solution&)>;

  FakeContext(TaskSpec spec, SearchConfig config, EvalFn eval)
      : task_(std::move(spec)), config_(std::move(config)), eval_(std::move(eval)), rng_(config_.seed) {}

  struct Attempt {
    Solution solution;
    std::string action;
    EvalResult result;
    bool counted = true;
  };
  struct Event {
    std::string type;
    Json data;
  };

  const Task& task() const override { return task_; }
  const SearchConfig& config() const override { return config_; }
  WorldModel& world_model() override { throw std::logic_error("fake context: no world model"); }
  std::mt19937_64& rng() override { return rng_; }
  std::string device_description() const override { return "fake device"; }

  LlmResponse llm(const LlmRequest&) override { throw std::logic_error("fake context: no LLM"); }
  std::vector<LlmResponse> llm_batch(const std::vector<LlmRequest>&) override {
    throw std::logic_error("fake context: no LLM");
  }

  EvalResult evaluate(Solution& candidate, const std::string& action) override {
    if (rounds_used_ >= config_.max_rounds) throw std::logic_error("fake context: evaluate past the round budget");
    ++rounds_used_;
    return run(candidate, action, true);
  }
  std::vector<EvalResult> evaluate_batch(std::vector<Solution>& candidates,
                                         const std::vector<std::string>& actions) override {
    if (static_cast<int>(candidates.size()) > rounds_left())
      throw std::logic_error("fake context: a batch past the round budget");
    batch_sizes.push_back(candidates.size());
    std::vector<EvalResult> out;
    for (std::size_t i = 0; i < candidates.size(); ++i) out.push_back(evaluate(candidates[i], actions.at(i)));
    return out;
  }
  EvalResult record_failed_round(const std::string& action, const std::string& why, const std::string&) override {
    ++rounds_used_;
    EvalResult r;
    r.status = EvalStatus::generation_failed;
    r.log = why;
    attempts.push_back({Solution{}, action, r, true});
    return r;
  }
  EvalResult evaluate_uncounted(Solution& solution, const std::string& purpose) override {
    return run(solution, purpose, false);
  }
  EvalResult adopt_recorded(Solution& solution, EvalResult recorded, const std::string& source) override {
    solution.finalize();
    recorded.solution_id = solution.id;
    recorded.metrics["recorded_from"] = source;
    attempts.push_back({solution, "recorded evaluation (" + source + ")", recorded, false});
    if (recorded.passed() && (!best_ || recorded.latency_ms < best_->eval.latency_ms))
      best_ = BestSolution{solution, recorded, 0};
    return recorded;
  }
  void add_solution(const Solution& solution) override {
    Solution s = solution;
    known.push_back(s.finalize());
  }

  int rounds_used() const override { return rounds_used_; }
  int rounds_left() const override { return config_.max_rounds - rounds_used_; }
  bool should_stop() const override { return rounds_left() <= 0; }
  std::optional<StopReason> stop_reason() const override {
    return should_stop() ? std::optional<StopReason>(StopReason::max_rounds) : std::nullopt;
  }

  const std::optional<BestSolution>& best() const override { return best_; }
  std::optional<Solution> find_solution(const std::string& id) const override {
    for (const auto& a : attempts)
      if (a.solution.id == id) return a.solution;
    for (const auto& k : known)
      if (k.id == id) return k;
    return std::nullopt;
  }
  std::optional<EvalResult> find_eval(const std::string& id) const override {
    for (const auto& a : attempts)
      if (a.solution.id == id) return a.result;
    return std::nullopt;
  }

  void event(const std::string& type, Json data) override { events.push_back({type, std::move(data)}); }
  void snapshot_world_model() override {}
  void set_state(Json s) override { state = std::move(s); }

  // Seeds the run with a passing solution, as an earlier LLM phase would.
  void set_best(Solution s) {
    s.finalize();
    EvalResult r = eval_(task_, s);
    r.solution_id = s.id;
    best_ = BestSolution{s, r, 0};
  }

  const Event* find_event(const std::string& type) const {
    for (const auto& e : events)
      if (e.type == type) return &e;
    return nullptr;
  }

  std::vector<Attempt> attempts;
  std::vector<Solution> known;  // add_solution's
  std::vector<Event> events;
  Json state;
  std::vector<std::size_t> batch_sizes;  // of each evaluate_batch call

 private:
  EvalResult run(Solution& s, const std::string& action, bool counted) {
    s.finalize();
    EvalResult r = eval_(task_, s);
    r.solution_id = s.id;
    attempts.push_back({s, action, r, counted});
    if (r.passed() && (!best_ || r.latency_ms < best_->eval.latency_ms))
      best_ = BestSolution{s, r, rounds_used_};
    return r;
  }

  SpecTask task_;
  SearchConfig config_;
  EvalFn eval_;
  std::mt19937_64 rng_;
  int rounds_used_ = 0;
  std::optional<BestSolution> best_;
};

}  // namespace ks::test
