// Test doubles for search tests: a scripted LLM, an evaluator whose result is
// written into the candidate's source, and a tiny host task.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ksearch/error.hpp"
#include "ksearch/evaluator.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/task.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::test {

// Answers from a list, in order; records what it was asked.
class ScriptedLlm : public LlmPolicy {
 public:
  explicit ScriptedLlm(std::vector<std::string> answers) : answers_(std::move(answers)) {}
  LlmResponse complete(const LlmRequest& req) override {
    requests.push_back(req);
    LlmResponse r;
    if (next_ >= answers_.size()) throw Error(Status::llm, "scripted LLM ran out of answers");
    const std::string& a = answers_[next_++];
    if (a.rfind("!FAIL:", 0) == 0) {
      r.ok = false;
      r.error = a.substr(6);
    } else {
      r.ok = true;
      r.text = a;
    }
    r.usage.input_tokens = static_cast<std::int64_t>(req.prompt.size() / 4);
    r.usage.output_tokens = static_cast<std::int64_t>(a.size() / 4);
    r.usage.cost_usd = cost_per_call;
    return r;
  }
  std::string describe() const override { return "scripted"; }
  std::vector<LlmRequest> requests;
  double cost_per_call = 0.01;
  std::size_t used() const { return next_; }

 private:
  std::vector<std::string> answers_;
  std::size_t next_ = 0;
};

// What the evaluator doubles share: a fake device and options to hold.
class FakeDeviceEvaluator : public Evaluator {
 public:
  DeviceInfo device() const override {
    DeviceInfo d;
    d.backend = "fake";
    d.name = "Fake device";
    return d;
  }
  EvalOptions& options() override { return options_; }

 private:
  EvalOptions options_;
};

// Reads "// RESULT: passed 2.5" or "// RESULT: compile_error" from the first
// source file; counts evaluations.
class MarkerEvaluator : public FakeDeviceEvaluator {
 public:
  EvalResult evaluate(const Task& task, const Solution& s) override {
    ++evaluations;
    evaluated_ids.push_back(s.id);
    EvalResult r;
    r.solution_id = s.id;
    std::string src = s.sources.empty() ? "" : s.sources[0].content;
    auto pos = src.find("RESULT: ");
    std::string status = "passed";
    double latency = 1.0;
    if (pos != std::string::npos) {
      std::string rest = src.substr(pos + 8);
      auto sp = rest.find_first_of(" \n");
      status = rest.substr(0, sp);
      if (status == "passed" && sp != std::string::npos && rest[sp] == ' ') latency = std::stod(rest.substr(sp + 1));
    }
    auto st = eval_status_from_string(status);
    r.status = st ? *st : EvalStatus::runtime_error;
    for (const auto* w : task.spec().benchmark_workloads()) {
      WorkloadResult wr;
      wr.name = w->name;
      wr.benchmark = true;
      wr.status = r.status;
      if (r.passed()) {
        wr.timing.mean_ms = wr.timing.median_ms = wr.timing.min_ms = latency;
        wr.timing.count = 10;
        wr.reference_ms = 10.0;
      } else {
        wr.message = "marker says " + status;
      }
      r.workloads.push_back(wr);
    }
    if (!r.passed()) r.log = "error: marker says " + status;
    r.compute_summary();
    return r;
  }
  int evaluations = 0;
  std::vector<std::string> evaluated_ids;
};

// A run's configuration with the fields every search test sets.
inline SearchConfig search_config(const std::string& strategy, Language language, int rounds) {
  SearchConfig c;
  c.strategy = parse_strategy_kind(strategy);
  c.language = language;
  c.max_rounds = rounds;
  return c;
}

// A candidate answer in the format parse_candidate reads.
inline std::string answer(const std::string& marker, const std::string& tag = "") {
  return fmt::format(
      "Here is the kernel.\n\n```cpp kernel.cpp\n// {}\n// RESULT: {}\nvoid f(const float* x, float* y, long n) "
      "{{ for (long i = 0; i < n; ++i) y[i] = x[i]; }}\n```\n\n```json launch_plan\n{{\"calls\": [{{\"fn\": \"f\", "
      "\"args\": [\"x\", \"y\", \"N\"]}}]}}\n```\n",
      tag, marker);
}

inline TaskSpec tiny_task_spec() {
  TaskSpec t;
  t.name = "test/copy";
  t.description = "copy a vector";
  t.languages = {Language::cpp};
  t.dims = {"N"};
  TensorSpec x;
  x.name = "x";
  x.shape = {"N"};
  TensorSpec y;
  y.name = "y";
  y.shape = {"N"};
  y.is_output = true;
  t.tensors = {x, y};
  WorkloadSpec w1;
  w1.name = "small";
  w1.dims = {{"N", 16}};
  WorkloadSpec w2;
  w2.name = "big";
  w2.dims = {{"N", 1 << 16}};
  w2.benchmark = true;
  t.workloads = {w1, w2};
  Solution ref;
  ref.language = Language::cpp;
  ref.sources = {{"ref.cpp", "void f(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = x[i]; }"}};
  ref.launch_plan = LaunchPlan::from_json(Json::parse(R"({"calls": [{"fn": "f", "args": ["x", "y", "N"]}]})"));
  ref.finalize();
  t.references[Language::cpp] = ref;
  t.prompts[Language::cpp] = "Copy x into y.";
  return t;
}

// A world model that is never initialised: for strategies that do not use one.
class NoWorldModel : public WorldModel {
 public:
  bool initialized() const override { return false; }
  EditOutcome initialize(const std::string&, int) override { return {}; }
  void initialize_fallback(const std::string&, int) override {}
  EditOutcome apply_edits(const std::string&, const EditRules&) override { return {}; }
  void fallback_after_propose(int) override {}
  void fallback_after_refine(const std::string&, int) override {}
  void fallback_after_too_hard(const std::string&, int) override {}
  std::vector<std::string> frontier() const override { return {}; }
  std::optional<std::string> select_action(const SelectionPolicy&) const override { return std::nullopt; }
  bool needs_proposals() const override { return false; }
  ActionInfo action(const std::string&) const override { return {}; }
  void set_active(const std::string&) override {}
  void attach_solution(const std::string&, const SolutionRef&) override {}
  void set_computed_signals(const Json&) override {}
  std::string build_prompt(PromptKind, const WmPromptInputs&) const override { return ""; }
  std::string render_compact(std::size_t) const override { return ""; }
  std::string render_tree() const override { return ""; }
  Json to_json() const override { return Json::object(); }
  void load_json(const Json&) override {}
  std::uint64_t version() const override { return 0; }
};

}  // namespace ks::test
