#include <doctest/doctest.h>

#include "search/prompts.hpp"
#include "search/fakes.hpp"
#include "ksearch/sys/world_model.hpp"

using namespace ks;
using namespace ks::core;

namespace {

EvalResult failing_result(std::size_t log_size) {
  EvalResult r;
  r.status = EvalStatus::compile_error;
  r.log = "error: start\n" + std::string(log_size, 'x') + "\nerror: the real cause at the end";
  return r;
}

}  // namespace

TEST_CASE("prompts: clip keeps both ends and respects the budget") {
  std::string s(10000, 'a');
  s += "TAIL";
  std::string c = clip(s, 500);
  CHECK(c.size() <= 500);
  CHECK(c.find("TAIL") != std::string::npos);
  CHECK(c.find("[... cut ...]") != std::string::npos);
  CHECK(clip("short", 500) == "short");
  // A cut never splits a UTF-8 character (compiler logs quote with curly quotes).
  std::string quotes;
  for (int i = 0; i < 2000; ++i) quotes += "\xE2\x80\x98x\xE2\x80\x99";
  for (std::size_t budget : {50u, 301u, 302u, 303u, 1000u}) {
    std::string c2 = clip(quotes, budget);
    CHECK(c2.size() <= budget);
    CHECK(ks::Json::try_parse(ks::Json(c2).dump()).has_value());
    CHECK(ks::Json::parse(ks::Json(c2).dump()).as_string() == c2);  // nothing was replaced: still valid UTF-8
  }
}

TEST_CASE("prompts: evaluation feedback lists per-workload latencies and bounds the log") {
  EvalResult r;
  r.status = EvalStatus::passed;
  for (int i = 0; i < 3; ++i) {
    WorkloadResult w;
    w.name = "bench_" + std::to_string(i);
    w.benchmark = true;
    w.timing.mean_ms = 1.0 + i;
    w.timing.median_ms = 1.0 + i;
    w.timing.min_ms = 0.9 + i;
    w.timing.count = 20;
    w.reference_ms = 4.0;
    r.workloads.push_back(w);
  }
  r.compute_summary();
  std::string t = eval_feedback_text(r, PromptBudgets{});
  CHECK(t.find("bench_0") != std::string::npos);
  CHECK(t.find("bench_2") != std::string::npos);
  CHECK(t.find("3.0000") != std::string::npos);  // the slow workload's own mean, not only the average
  CHECK(t.find("4.000x") != std::string::npos);  // per-workload speedup vs the reference

  PromptBudgets b;
  b.log = 300;
  std::string f = eval_feedback_text(failing_result(100000), b);
  CHECK(f.size() < 600);
  CHECK(f.find("the real cause at the end") != std::string::npos);
}

TEST_CASE("prompts: debug and improve requests carry the right evidence") {
  SpecTask task(test::tiny_task_spec());
  Solution base;
  base.language = Language::cpp;
  base.sources = {{"kernel.cpp", "// BASE KERNEL"}};
  base.launch_plan = LaunchPlan::from_json(Json::parse(R"({"calls": [{"fn": "f", "args": []}]})"));
  base.finalize();
  EvalResult base_eval;
  base_eval.status = EvalStatus::passed;
  Solution last = base;
  last.sources[0].content = "// LAST ATTEMPT";
  last.finalize();
  EvalResult last_eval = failing_result(10);

  CodegenInputs in;
  in.task = &task;
  in.language = Language::cpp;
  in.device = "Test CPU";
  in.base = {&base, &base_eval, ""};
  in.last = {&last, &last_eval, ""};
  in.attempt = 3;
  in.world_model = std::string(100000, 'w');
  in.budgets.world_model = 1000;
  ActionInfo a;
  a.node_id = "n1";
  a.title = "Vectorise the copy";
  in.action = a;

  LlmRequest d = build_debug_request(in);
  CHECK(d.kind == PromptKind::debug);
  CHECK(d.prompt.find("// BASE KERNEL") != std::string::npos);
  CHECK(d.prompt.find("// LAST ATTEMPT") != std::string::npos);
  CHECK(d.prompt.find("the real cause at the end") != std::string::npos);
  CHECK(d.prompt.find("Vectorise the copy") != std::string::npos);
  CHECK(d.prompt.find("## Debug\nThe last attempt did not pass") != std::string::npos);
  CHECK(d.prompt.find("round 2/5") == std::string::npos);  // no label that ignores the stagnation window
  CHECK(d.prompt.find("Implement ONLY the chosen action") != std::string::npos);
  CHECK(d.prompt.find("Copy x into y.") != std::string::npos);
  CHECK(d.prompt.size() < 20000);  // the 100k world model was cut to its budget

  LlmRequest i = build_improve_request(in);
  CHECK(i.kind == PromptKind::improve);
  CHECK(i.prompt.find("// BASE KERNEL") != std::string::npos);
  // The original continues from the last attempt, the cycle's best as the reference.
  CHECK(i.prompt.find("Continue from your last attempt") != std::string::npos);
  CHECK(i.prompt.find("## Last attempt (continue from this one)") != std::string::npos);
  CHECK(i.prompt.find("// LAST ATTEMPT") != std::string::npos);
  CHECK(i.prompt.find("## Base kernel") < i.prompt.find("// LAST ATTEMPT"));
  CHECK(i.prompt.find("Implement ONLY the chosen action") != std::string::npos);

  in.base = {};
  in.last = {};
  LlmRequest g = build_generate_request(in);
  CHECK(g.kind == PromptKind::generate);
  CHECK(g.prompt.find("Answer format") != std::string::npos);
  CHECK(g.prompt.find("BASE KERNEL") == std::string::npos);
}

TEST_CASE("prompts: the workloads' shapes, the check and the score's definition") {
  TaskSpec spec = test::tiny_task_spec();
  spec.flops = "N";
  std::string t = workloads_text(spec);
  CHECK(t.find("| workload | timed | N |") != std::string::npos);
  CHECK(t.find("| small | no: correctness only | 16 |") != std::string::npos);
  CHECK(t.find("| big | yes | 65536 |") != std::string::npos);
  CHECK(t.find("Work per call: N floating-point operations") != std::string::npos);
  CHECK(t.find("atol 0.001 and rtol 0.001") != std::string::npos);
  CHECK(t.find("Score: the geometric mean over the timed workloads") != std::string::npos);
  spec.score = ScoreMode::vs_baseline;
  CHECK(workloads_text(spec).find("(baseline latency / your latency), higher is better") != std::string::npos);
  // A feedback subset: only the workloads each round evaluates.
  spec.feedback_workloads = {"big"};
  t = workloads_text(spec);
  CHECK(t.find("these 1 of the task's 2 workloads") != std::string::npos);
  CHECK(t.find("| small |") == std::string::npos);
}

TEST_CASE("prompts: attempts against their base, a regression named as one") {
  CHECK(versus_base(0.5, 1.0) == "2.00x faster than the base");
  CHECK(versus_base(2.5, 1.0) == "0.40x the base's speed: a regression (2.50x slower than the base)");
  CHECK(versus_base(1.001, 1.0) == "as fast as the base (1.00x)");
  CHECK(versus_base(1.0, 0).empty());
  std::vector<AttemptBrief> a(4);
  a[0] = {1, 7, PromptKind::generate, "aaaaaaaaaaaa", EvalStatus::passed, 2.5, "threads"};
  a[1] = {2, 8, PromptKind::improve, "", EvalStatus::generation_failed, 0, "the answer held no source block"};
  a[2] = {3, 9, PromptKind::improve, "bbbbbbbbbbbb", EvalStatus::passed, 1.0, ""};
  a[3] = {4, 10, PromptKind::improve, "aaaaaaaaaaaa", EvalStatus::passed, 2.5, ""};
  std::string t = attempts_text(a, "bbbbbbbbbbbb", 1.0);
  CHECK(t.find("| 1 | 7 | generate | aaaaaaaa | passed | 2.5000 | 0.40x the base's speed: a regression") !=
        std::string::npos);
  CHECK(t.find("| 2 | 8 | improve | (none) | generation_failed | - | - | the answer held no source block |") !=
        std::string::npos);
  CHECK(t.find("the base kernel itself, resubmitted unchanged") != std::string::npos);
  CHECK(t.find("the same code as attempt 1") != std::string::npos);
}
