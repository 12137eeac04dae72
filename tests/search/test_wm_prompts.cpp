// What the world-model strategy's prompts carry (issue 43): every prompt
// kind names the device, the workloads' shapes and the rounds left, on a
// CPU and on a GPU; a regression is never called the best; and the loop
// around them: lineage, the attach when the run stops mid-cycle, the
// fallback's reason.
#include <doctest/doctest.h>

#include <map>
#include <regex>
#include <set>

#include "core/response/parse.hpp"
#include "search/session.hpp"
#include "search/fakes.hpp"
#include "support/test_util.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/world_model.hpp"

using namespace ks;
using ks::core::Session;

namespace {

DeviceInfo fake_cpu() {
  DeviceInfo d;
  d.backend = "host";
  d.name = "Fake Xeon Platinum 8480+";
  d.arch = "x86-64";
  d.count = 1;
  d.compute_units = 56;
  d.clock_ghz = 3.8;
  d.features = "AVX2 FMA AVX-512F";
  d.caches = "L1d 48 KiB, L2 2 MiB, L3 105 MiB";
  d.timing = "a steady clock around each call, with a round trip of roughly 30-100 us";
  return d;
}

DeviceInfo fake_gpu() {
  DeviceInfo d;
  d.backend = "cuda";
  d.name = "Fake H200 141GB";
  d.arch = "sm_90a";
  d.count = 1;
  d.compute_units = 132;
  d.caches = "L2 50 MiB";
  d.memory_bytes = std::int64_t{141} << 30;
  d.timing = "CUDA events around your plan's launches";
  return d;
}

class DeviceEvaluator : public test::MarkerEvaluator {
 public:
  explicit DeviceEvaluator(DeviceInfo d) : device_(std::move(d)) {}
  DeviceInfo device() const override { return device_; }

 private:
  DeviceInfo device_;
};

// A kernel in the language's answer format whose marker the evaluator reads.
std::string kernel_answer(Language lang, const std::string& marker, const std::string& tag) {
  if (lang == Language::cuda)
    return fmt::format(
        "```cuda kernel.cu\n// {}\n// RESULT: {}\nextern \"C\" __global__ void f(const float* x, float* y, long n) "
        "{{}}\n```\n\n```json launch_plan\n{{\"kernels\": [{{\"name\": \"f\", \"grid\": [\"cdiv(N, 256)\"], "
        "\"block\": [256], \"args\": [\"x\", \"y\", \"N\"]}}]}}\n```\n",
        tag, marker);
  return test::answer(marker, tag);
}

// The task: tiny_task_spec in `lang`, with a starting point that passes in
// 1.0 ms (the base kernel of the first cycle).
TaskSpec task_in(Language lang) {
  TaskSpec t = test::tiny_task_spec();
  t.languages = {lang};
  t.prompts[lang] = "Copy x into y.";
  Solution sp = core::parse_candidate(kernel_answer(lang, "passed 1.0", "starting point"), lang);
  sp.name = "starting point";
  sp.finalize();
  t.starting_points = {sp};
  if (lang == Language::cuda) t.references[Language::cuda] = sp;
  return t;
}

std::string node(const std::string& id, const std::string& parent, double score) {
  return fmt::format(
      R"({{"node_id": "{}", "parent_id": "{}", "node_type": "decision", "decision": "approach", "choice": "{}",
          "overall_rating_0_to_10": 6, "confidence_0_to_1": 0.5, "notes": "SELF_CHECK: its own approach",
          "action": {{"title": "Action {}", "description": "do {}", "difficulty_1_to_5": 2, "score_0_to_1": {},
                      "expected_vs_baseline_factor": 1.5, "rationale": "fewer passes"}}}})",
      id, parent, id, id, id, score);
}

// Answers by kind like a model that follows the rules; a code answer's
// marker comes from `schedule` by (cycle, attempt), read from the prompt, so
// a fresh instance answers a resumed run's prompts as the first did.
class Responder : public LlmPolicy {
 public:
  Responder(Language lang, std::map<std::pair<int, int>, std::string> schedule)
      : lang_(lang), schedule_(std::move(schedule)) {}

  LlmResponse complete(const LlmRequest& req) override {
    requests.push_back(req);
    LlmResponse r;
    r.ok = true;
    std::smatch m;
    if (code_only) {
      r.text = kernel_answer(lang_, "passed 1.0", "only code");
      return r;
    }
    switch (req.kind) {
      case PromptKind::wm_init:
        r.text = R"({"kernel_summary": "copy", "open_questions": ["a?", "b?", "c?"], "decision_tree": {"root_id":
            "root", "active_leaf_id": "root", "nodes": [{"node_id": "root", "parent_id": null, "node_type": "root",
            "decision": null, "choice": null, "notes": "1 2 3 4 5 6 7"}, )" +
                 node("a1", "root", 0.9) + ", " + node("a2", "root", 0.8) + ", " + node("a3", "root", 0.7) + "]}}";
        break;
      case PromptKind::wm_propose:
        r.text = R"({"ops": [{"op": "insert_node", "parent_id": "root", "node": )" +
                 node(fmt::format("p{}", ++proposals), "root", 0.65) + "}]}";
        break;
      case PromptKind::wm_refine: {
        REQUIRE(std::regex_search(req.prompt, m, std::regex("The action \"([^\"]+)\" just produced")));
        const std::string id = m[1];
        r.text = R"({"ops": [{"op": "update_node", "node_id": ")" + id +
                 R"(", "patch": {"notes": "CURRENT: x\nFOLLOW_THROUGH: aligned_with_intent=yes\nUPDATE_BELIEF: y",
                 "action": {"score_0_to_1": 0.3}}}, {"op": "insert_node", "parent_id": ")" + id + R"(", "node": )" +
                 node(id + "_next", id, 0.85) + "}]}";
        break;
      }
      case PromptKind::wm_too_hard:
        REQUIRE(std::regex_search(req.prompt, m, std::regex("The action \"([^\"]+)\" produced no passing kernel")));
        r.text = R"({"ops": [{"op": "update_node", "node_id": ")" + std::string(m[1]) +
                 R"(", "patch": {"action": {"score_0_to_1": 0.05}}}]})";
        break;
      default: {
        REQUIRE(std::regex_search(req.prompt, m, std::regex("Cycle (\\d+) works on .*this is its attempt (\\d+)")));
        const std::pair<int, int> key{std::stoi(m[1]), std::stoi(m[2])};
        auto it = schedule_.find(key);
        std::string marker = it == schedule_.end() ? "compile_error" : it->second;
        if (marker == "base") r.text = kernel_answer(lang_, "passed 1.0", "starting point");  // the base, unchanged
        else r.text = kernel_answer(lang_, marker, fmt::format("cycle {} attempt {}", key.first, key.second));
      }
    }
    return r;
  }
  std::string describe() const override { return "responder"; }

  std::vector<LlmRequest> requests;
  int proposals = 0;
  bool code_only = false;  // a model that writes code whatever it is asked

 private:
  Language lang_;
  std::map<std::pair<int, int>, std::string> schedule_;
};

SearchConfig config(Language lang, int rounds) {
  SearchConfig c = test::search_config("world_model", lang, rounds);
  c.world_model.stagnation_window = 2;
  return c;
}

// Cycle 1: a regression, then a failure (refine); cycle 2: two failures
// (too hard); cycle 3 after a proposal. Every prompt kind is asked.
const std::map<std::pair<int, int>, std::string> kAllKinds = {{{1, 1}, "passed 2.5"}, {{3, 1}, "passed 0.5"}};

struct RunResult {
  std::vector<LlmRequest> requests;
  std::vector<AttemptRecord> attempts;
  std::vector<Json> events;
  std::optional<Json> tree;
  StopReason stop = StopReason::strategy_done;
};

RunResult run(const std::filesystem::path& dir, Language lang, const DeviceInfo& device, int rounds,
              const std::map<std::pair<int, int>, std::string>& schedule, bool resume = false, bool code_only = false,
              std::optional<SearchConfig> given = std::nullopt) {
  SpecTask task(task_in(lang));
  DeviceEvaluator evaluator(device);
  Responder llm(lang, schedule);
  llm.code_only = code_only;
  auto wm = make_tree_world_model();
  RunStore store = resume ? RunStore::open(dir) : RunStore::create(dir, Json::object());
  Session s(task, evaluator, llm, *wm, store, given ? *given : config(lang, rounds));
  auto strategy = make_strategy(StrategyKind::world_model);
  RunResult out;
  out.stop = s.run(*strategy);
  out.requests = llm.requests;
  out.attempts = store.attempts();
  out.events = store.events();
  out.tree = store.latest_world_model();
  return out;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

void check_every_kind(const RunResult& r, const DeviceInfo& d, bool gpu) {
  std::set<PromptKind> kinds;
  for (const auto& req : r.requests) {
    kinds.insert(req.kind);
    const std::string& p = req.prompt;
    CAPTURE(to_string(req.kind));
    CHECK(!req.system.empty());
    CHECK(has(p, d.name));                                  // the device
    CHECK(has(p, gpu ? "132 streaming multiprocessors" : "AVX-512F"));
    CHECK(has(p, d.timing));                                // what a timed call includes
    CHECK(has(p, "| big | yes | 65536 |"));                 // the shapes, timed or not
    CHECK(has(p, "| small | no: correctness only | 16 |"));
    CHECK(has(p, "Score: the geometric mean"));             // how the score is made
    CHECK(std::regex_search(p, std::regex("of 8\\b")));     // the budget
    CHECK(has(p, "left"));                                  // and what is left of it
    if (req.kind == PromptKind::generate || req.kind == PromptKind::debug || req.kind == PromptKind::improve)
      CHECK(has(p, "The cycle ends when 2 attempts in a row"));  // the cycle's state, with its real window
    else
      CHECK(has(req.system, gpu ? "GPU" : "CPU"));
    if (!gpu) {
      CHECK(!has(p, "shared memory"));  // no GPU words on a CPU task
      CHECK(!has(p, "thread block"));
      CHECK(!has(p, "json launch_plan"));  // one spelling of the plan block, in the request and in echoed kernels
    }
  }
  for (PromptKind k : {PromptKind::wm_init, PromptKind::wm_propose, PromptKind::wm_refine, PromptKind::wm_too_hard,
                       PromptKind::generate, PromptKind::debug, PromptKind::improve})
    CHECK_MESSAGE(kinds.count(k) == 1, to_string(k) << " was never asked");
}

const LlmRequest& first_of(const RunResult& r, PromptKind kind) {
  for (const auto& req : r.requests)
    if (req.kind == kind) return req;
  FAIL("no request of kind " << to_string(kind));
  return r.requests.front();
}

}  // namespace

TEST_CASE("wm prompts: every kind carries the device, the shapes and the rounds left, on a CPU") {
  auto r = run(test::scratch_dir("wm_prompts_cpu"), Language::cpp, fake_cpu(), 8, kAllKinds);
  check_every_kind(r, fake_cpu(), false);
  CHECK(has(first_of(r, PromptKind::generate).prompt, "json call_plan"));
  // The world model plans for a CPU: cores and caches, not thread blocks.
  CHECK(has(first_of(r, PromptKind::wm_init).prompt, "cores and threads"));
}

TEST_CASE("wm prompts: every kind carries the device, the shapes and the rounds left, on a GPU") {
  auto r = run(test::scratch_dir("wm_prompts_gpu"), Language::cuda, fake_gpu(), 8, kAllKinds);
  check_every_kind(r, fake_gpu(), true);
  CHECK(has(first_of(r, PromptKind::wm_init).prompt, "shared memory"));
  CHECK(has(first_of(r, PromptKind::wm_init).prompt, "Language: cuda"));
}

TEST_CASE("wm prompts: an attempt slower than its base is a regression, never the best") {
  auto r = run(test::scratch_dir("wm_prompts_regression"), Language::cpp, fake_cpu(), 8, kAllKinds);
  // Cycle 1's first kernel (2.5 ms) is slower than its base, the starting point (1.0 ms).
  const std::string& improve = first_of(r, PromptKind::improve).prompt;
  CHECK(has(improve, "Your last attempt passes but is slower than the base kernel: 0.40x the base's speed: a "
                     "regression (2.50x slower than the base)"));
  CHECK(has(improve, "make it faster than the base kernel (1.0000 ms)"));
  CHECK(has(improve, "## Base kernel (node root's kernel: the action starts from it)"));
  CHECK(has(improve, "// starting point"));  // the base is shown, with its code
  CHECK(has(improve, "// cycle 1 attempt 1"));
  for (const char* wrong : {"best passing so far", "is the best of this cycle", "the reference to beat"})
    CHECK_MESSAGE(!has(improve, wrong), wrong);
  // Refine names it too, and lists every attempt of the cycle.
  const std::string& refine = first_of(r, PromptKind::wm_refine).prompt;
  CHECK(has(refine, "a regression, the cycle's best kernel is 2.50x slower than its base"));
  CHECK(has(refine, "[CYCLE_ATTEMPTS]"));
  CHECK(has(refine, "0.40x the base's speed: a regression"));
  CHECK(has(refine, "compile_error"));
  // A too-hard prompt lists its failed attempts.
  CHECK(has(first_of(r, PromptKind::wm_too_hard).prompt, "[CYCLE_ATTEMPTS]"));
}

TEST_CASE("wm loop: a kernel's parent is the attempt it continued from, and never itself") {
  auto r = run(test::scratch_dir("wm_lineage"), Language::cpp, fake_cpu(), 8, kAllKinds);
  // attempts: the starting point, cycle 1's generate (2.5 ms) and improve (compile error), ...
  REQUIRE(r.attempts.size() >= 3);
  const auto& sp = r.attempts[0].solution;
  CHECK(r.attempts[1].solution.parent_id == sp.id);                    // generate: from the base
  CHECK(r.attempts[2].solution.parent_id == r.attempts[1].solution.id);  // improve: from the last attempt

  // The base sent back unchanged is not its own parent, and not a new kernel for the action.
  auto again = run(test::scratch_dir("wm_lineage_again"), Language::cpp, fake_cpu(), 4, {{{1, 1}, "base"}});
  REQUIRE(again.attempts.size() >= 2);
  CHECK(again.attempts[1].solution.id == again.attempts[0].solution.id);
  CHECK(again.attempts[1].solution.parent_id != again.attempts[1].solution.id);
  // Nothing new passed in cycle 1: it is too hard, not refined with its parent's kernel.
  std::set<PromptKind> kinds;
  for (const auto& req : again.requests) kinds.insert(req.kind);
  CHECK(kinds.count(PromptKind::wm_refine) == 0);
  CHECK(kinds.count(PromptKind::wm_too_hard) == 1);
  // And the next request after it was an improve that says so.
  bool said = false;
  for (const auto& req : again.requests)
    said = said || (req.kind == PromptKind::improve && has(req.prompt, "returned this kernel unchanged"));
  CHECK(said);
}

TEST_CASE("wm loop: a run that stops mid-cycle attaches the cycle's best; a resume goes on as if it had not") {
  const std::map<std::pair<int, int>, std::string> schedule = {
      {{1, 1}, "passed 0.5"}, {{1, 2}, "passed 0.4"}, {{1, 3}, "passed 0.45"}, {{1, 4}, "passed 0.3"}};
  auto dir = test::scratch_dir("wm_final_attach");
  auto cut = run(dir, Language::cpp, fake_cpu(), 3, schedule);  // the starting point and two attempts of cycle 1
  CHECK(cut.stop == StopReason::max_rounds);
  REQUIRE(cut.attempts.size() == 3);
  const std::string best = cut.attempts[2].solution.id;  // 0.4 ms
  REQUIRE(cut.tree);
  bool attached = false;
  for (const auto& n : (*cut.tree)["decision_tree"]["nodes"].as_array())
    attached = attached || (n.get_string("node_id") == "a1" && n["solution_ref"].get_string("solution_id") == best);
  CHECK(attached);
  const Json* ev = nullptr;
  for (const auto& e : cut.events)
    if (e.get_string("type") == "world_model_attached_at_stop") ev = &e;
  REQUIRE(ev);
  CHECK(!ev->contains("journal_seq"));  // outside the journal a resume replays
  CHECK(has(ev->get_string("why"), "max_rounds"));

  // Resumed with a larger budget, the cycle goes on: the same as an uninterrupted run.
  auto resumed = run(dir, Language::cpp, fake_cpu(), 6, schedule, true);
  auto whole = run(test::scratch_dir("wm_final_attach_whole"), Language::cpp, fake_cpu(), 6, schedule);
  REQUIRE(resumed.attempts.size() == whole.attempts.size());
  for (std::size_t i = 0; i < whole.attempts.size(); ++i) {
    CHECK(resumed.attempts[i].solution.id == whole.attempts[i].solution.id);
    CHECK(resumed.attempts[i].solution.parent_id == whole.attempts[i].solution.parent_id);
  }
  REQUIRE(resumed.tree);
  REQUIRE(whole.tree);
  CHECK_MESSAGE((*resumed.tree)["decision_tree"] == (*whole.tree)["decision_tree"],
                (*resumed.tree)["decision_tree"].dump(1) << "\n---\n" << (*whole.tree)["decision_tree"].dump(1));
}

TEST_CASE("wm loop: a default run proposes after its first cycle") {
  auto r = run(test::scratch_dir("wm_propose_trigger"), Language::cpp, fake_cpu(), 8, kAllKinds);
  std::vector<PromptKind> kinds;
  for (const auto& req : r.requests) kinds.push_back(req.kind);
  // wm_init, then cycle 1 (no proposal: the frontier is fresh), its refine, then a proposal.
  auto refine = std::find(kinds.begin(), kinds.end(), PromptKind::wm_refine);
  REQUIRE(refine != kinds.end());
  CHECK(std::find(kinds.begin(), refine, PromptKind::wm_propose) == refine);
  CHECK(std::find(refine, kinds.end(), PromptKind::wm_propose) != kinds.end());
  const std::string& propose = first_of(r, PromptKind::wm_propose).prompt;
  CHECK(has(propose, "You MUST update existing nodes"));
  CHECK(has(propose, "never a baseline and an optimized variant"));
}

TEST_CASE("wm loop: a model that only writes code makes a fallback that says why") {
  auto r = run(test::scratch_dir("wm_fallback_why"), Language::cpp, fake_cpu(), 2, {}, false, true);
  const Json* fb = nullptr;
  for (const auto& e : r.events)
    if (e.get_string("type") == "world_model_fallback") fb = &e;
  REQUIRE(fb);
  CHECK(fb->get_string("kind") == "wm_init");
  const std::string why = fb->get_string("why");
  CHECK(has(why, "all 3 answers to wm_init were rejected"));
  CHECK(has(why, "(the last: the world model: "));  // the JSON plan block of its kernel was read, and rejected
  CHECK(has(why, "does not answer world-model prompts"));
  CHECK(has(why, "--strategy greedy"));
}

TEST_CASE("wm loop: a manifest written before these rules keeps the loop it was made with") {
  Json j = config(Language::cpp, 8).to_json();
  CHECK(SearchConfig::from_json(j).world_model.loop_rules == 2);
  CHECK(SearchConfig::from_json(j).world_model.propose_every == 1);
  j.erase("wm_loop_rules");
  j.erase("wm_propose_every");
  const SearchConfig old = SearchConfig::from_json(j);
  CHECK(old.world_model.loop_rules == 1);
  CHECK(old.world_model.propose_every == 0);
  // No review on a schedule: the frontier is never thin here, so no proposal at all.
  auto r = run(test::scratch_dir("wm_loop_rules_1"), Language::cpp, fake_cpu(), 8, kAllKinds, false, false, old);
  for (const auto& req : r.requests) CHECK(req.kind != PromptKind::wm_propose);
  // The base sent back unchanged counted as the cycle's best, as it did: the cycle is refined.
  SearchConfig four = old;
  four.max_rounds = 4;
  auto again = run(test::scratch_dir("wm_loop_rules_1_again"), Language::cpp, fake_cpu(), 4, {{{1, 1}, "base"}}, false,
                   false, four);
  std::set<PromptKind> kinds;
  for (const auto& req : again.requests) kinds.insert(req.kind);
  CHECK(kinds.count(PromptKind::wm_refine) == 1);
  CHECK(kinds.count(PromptKind::wm_too_hard) == 0);
}
