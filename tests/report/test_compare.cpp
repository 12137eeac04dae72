// ksearch compare's data, page and text on synthetic run folders whose
// numbers are chosen here (lib/report/compare.cpp).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <optional>

#include "ksearch/error.hpp"
#include "ksearch/report.hpp"
#include "ksearch/run_store.hpp"
#include "report/run_fixture.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::test;  // the synthetic run's pieces (report/run_fixture.hpp)
namespace fs = std::filesystem;

namespace {

struct Spec {
  std::string task = "tests/synthetic";
  std::string strategy = "world_model";
  int max_rounds = 6;
  bool wm_init = true;                        // a world-model call before round 1 (500 in, 50 out)
  int in_tokens = 1000, out_tokens = 200;     // per code call
  std::vector<std::optional<double>> rounds;  // a passing kernel's latency, or a compile error
};

// A run of `spec.rounds`: one generate call per round, each round one
// attempt, the best written as the session writes it.
fs::path make_run(const std::string& name, const Spec& spec) {
  auto dir = test::scratch_dir(name);
  RunStore s = RunStore::create(dir, Json::obj({{"task", Json::obj({{"name", spec.task}, {"fingerprint", "f00d"}})},
                                                {"config", Json::obj({{"strategy", spec.strategy},
                                                                      {"max_rounds", spec.max_rounds},
                                                                      {"model", "m-1"},
                                                                      {"seed", 7}})},
                                                {"device", Json::obj({{"name", "test device"}})},
                                                {"status", "finished"},
                                                {"stop_reason", "max_rounds"},
                                                {"totals", Json::obj({{"time", Json::obj({{"wall_s", 12.5}})}})}}));
  int seq = 0;
  if (spec.wm_init) llm_call(s, seq++, "wm_init", 500, 50, 0.01);
  double best = 0;
  for (std::size_t i = 0; i < spec.rounds.size(); ++i) {
    llm_call(s, seq++, "generate", spec.in_tokens, spec.out_tokens, 0.02);
    AttemptRecord a;
    a.seq = static_cast<int>(i);
    a.round = static_cast<int>(i) + 1;
    a.solution = sol(fmt::format("void k() {{ /* {} {} */ }}\n", name, i));
    a.eval = spec.rounds[i] ? passed(*spec.rounds[i], 3.0) : failed(EvalStatus::compile_error, "error: x");
    a.eval.solution_id = a.solution.id;
    s.record_attempt(a);
    if (spec.rounds[i] && (best == 0 || *spec.rounds[i] < best)) {
      best = *spec.rounds[i];
      s.write_best(BestSolution{a.solution, a.eval, a.round});
    }
  }
  return dir;
}

std::vector<std::optional<double>> curve(const Json& c) {
  std::vector<std::optional<double>> out;
  for (const auto& v : c.as_array()) out.push_back(v.is_null() ? std::nullopt : std::optional<double>(v.as_number()));
  return out;
}

void check_curve(const Json& got, const std::vector<std::optional<double>>& want) {
  auto g = curve(got);
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    REQUIRE(g[i].has_value() == want[i].has_value());
    if (want[i]) CHECK(*g[i] == doctest::Approx(*want[i]));
  }
}

const std::optional<double> none;

// Two world-model runs (one label) and a greedy one.
struct Three {
  fs::path a, b, c;
  Three() {
    a = make_run("cmp_a", Spec{.rounds = {8.0, none, 4.0, 5.0, 2.0, 2.1}});
    // 2.7 is within 90 % of the final 2.5 (2.5 / 0.9 = 2.78): reached at round 2.
    b = make_run("cmp_b", Spec{.max_rounds = 4, .rounds = {10.0, 2.7, 3.0, 2.5}});
    c = make_run("cmp_c", Spec{.strategy = "greedy", .wm_init = false, .in_tokens = 800, .out_tokens = 100,
                               .rounds = {none, none, 6.0, 6.0, 3.0, 3.0}});
  }
};

}  // namespace

TEST_CASE("compare: best so far per round, rounds to 90 %, LLM usage per run") {
  Three t;
  Json d = compare_runs_data({{t.a, ""}, {t.b, ""}, {t.c, ""}});
  CHECK(d["task"].as_string() == "tests/synthetic");
  CHECK(d["max_round"].as_int() == 6);
  CHECK_FALSE(d["score"].as_bool());
  const Json& runs = d["runs"];
  REQUIRE(runs.size() == 3);

  const Json& a = runs[0];
  CHECK(a["label"].as_string() == "world_model");
  CHECK(a["name"].as_string() == "cmp_a");
  CHECK(a["rounds"].as_int() == 6);
  check_curve(a["curve"]["best_latency_ms"], {8.0, 8.0, 4.0, 4.0, 2.0, 2.0});
  CHECK(a["curve"]["best_score"].is_null());
  CHECK(a["best_latency_ms"].as_number() == doctest::Approx(2.0));
  CHECK(a["best_round"].as_int() == 5);
  CHECK(a["rounds_to_90"].as_int() == 5);  // 2.0 <= 2.0 / 0.9; 4.0 is not
  CHECK(a["llm"]["calls"].as_int() == 7);
  CHECK(a["llm"]["code_calls"].as_int() == 6);
  CHECK(a["llm"]["world_model_calls"].as_int() == 1);
  CHECK(a["llm"]["input_tokens"].as_int() == 500 + 6 * 1000);
  CHECK(a["llm"]["output_tokens"].as_int() == 50 + 6 * 200);
  CHECK(a["llm"]["cost_usd"].as_number() == doctest::Approx(0.01 + 6 * 0.02));
  CHECK(a["llm"]["by_kind"]["wm_init"]["calls"].as_int() == 1);
  CHECK(a["wall_s"].as_number() == doctest::Approx(12.5));
  CHECK(a["workloads_at_least"].is_null());  // no baselines

  const Json& b = runs[1];
  check_curve(b["curve"]["best_latency_ms"], {10.0, 2.7, 2.7, 2.5});
  CHECK(b["rounds_to_90"].as_int() == 2);

  const Json& c = runs[2];
  CHECK(c["label"].as_string() == "greedy");
  check_curve(c["curve"]["best_latency_ms"], {none, none, 6.0, 6.0, 3.0, 3.0});
  CHECK(c["rounds_to_90"].as_int() == 5);
  CHECK(c["llm"]["calls"].as_int() == 6);
  CHECK(c["llm"]["world_model_calls"].as_int() == 0);
  CHECK(c["llm"]["input_tokens"].as_int() == 4800);
  CHECK(c["llm"]["output_tokens"].as_int() == 600);

  // b's budget was 4 rounds, the others' 6: said, not refused.
  CHECK(d["warnings"].dump().find("round budget") != std::string::npos);
}

TEST_CASE("compare: a label's mean and spread over its runs, round by round") {
  Three t;
  Json d = compare_runs_data({{t.a, ""}, {t.b, ""}, {t.c, ""}});
  REQUIRE(d["groups"].size() == 2);
  const Json& wm = d["groups"][0];
  CHECK(wm["label"].as_string() == "world_model");
  REQUIRE(wm["runs"].size() == 2);
  const Json& c = wm["curve"]["best_latency_ms"];
  REQUIRE(c.size() == 6);
  CHECK(c[0]["n"].as_int() == 2);
  CHECK(c[0]["mean"].as_number() == doctest::Approx(9.0));
  CHECK(c[0]["min"].as_number() == doctest::Approx(8.0));
  CHECK(c[0]["max"].as_number() == doctest::Approx(10.0));
  CHECK(c[0]["stddev"].as_number() == doctest::Approx(std::sqrt(2.0)));
  CHECK(c[3]["mean"].as_number() == doctest::Approx((4.0 + 2.5) / 2));
  CHECK(c[4]["n"].as_int() == 1);  // b ran 4 rounds
  CHECK(c[4]["mean"].as_number() == doctest::Approx(2.0));
  CHECK(c[4]["stddev"].as_number() == 0);
  CHECK(wm["best_latency_ms"]["mean"].as_number() == doctest::Approx(2.25));
  CHECK(wm["best_latency_ms"]["min"].as_number() == doctest::Approx(2.0));
  CHECK(wm["best_latency_ms"]["max"].as_number() == doctest::Approx(2.5));
  CHECK(wm["rounds_to_90"]["mean"].as_number() == doctest::Approx(3.5));
  CHECK(wm["llm_calls"]["mean"].as_number() == doctest::Approx(6.0));  // 7 and 5
  CHECK(wm["input_tokens"]["max"].as_number() == doctest::Approx(6500));
  const Json& greedy = d["groups"][1];
  CHECK(greedy["curve"]["best_latency_ms"][0].is_null());  // nothing passed in round 1
  CHECK(greedy["curve"]["best_latency_ms"][2]["n"].as_int() == 1);

  // Labels given by the caller group other runs: here each run alone.
  Json e = compare_runs_data({{t.a, "first"}, {t.b, "second"}, {t.c, "first"}});
  REQUIRE(e["groups"].size() == 2);
  CHECK(e["groups"][0]["label"].as_string() == "first");
  CHECK(e["groups"][0]["runs"].size() == 2);
  CHECK(e["groups"][0]["strategies"].size() == 2);
  CHECK(e["runs"][1]["label"].as_string() == "second");
}

TEST_CASE("compare: the score against the task's baseline, and the workloads at or above x times it") {
  auto dir = test::scratch_dir("cmp_score");
  RunStore s = RunStore::create(dir, Json::obj({{"task", Json::obj({{"name", "tests/scored"}})},
                                                {"config", Json::obj({{"strategy", "evolve"}, {"max_rounds", 3}})}}));
  // Two workloads with baselines 1 ms and 2 ms; the score is 100 x the mean
  // of baseline / kernel latency.
  auto eval = [](std::vector<double> ms, std::vector<double> base) {
    EvalResult r;
    r.score_mode = ScoreMode::vs_baseline;
    for (std::size_t i = 0; i < ms.size(); ++i) {
      WorkloadResult w;
      w.name = fmt::format("w{}", i);
      w.benchmark = true;
      w.timing.mean_ms = w.timing.median_ms = ms[i];
      w.timing.count = 3;
      w.baseline_ms = base[i];
      r.workloads.push_back(w);
    }
    r.compute_summary();
    return r;
  };
  const std::vector<EvalResult> rounds = {eval({2.0, 2.0}, {1.0, 2.0}),   // 0.5, 1.0: 75
                                          eval({0.8, 1.6}, {1.0, 2.0}),   // 1.25, 1.25: 125
                                          failed(EvalStatus::incorrect, "wrong")};
  Solution best_solution;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    AttemptRecord a;
    a.seq = static_cast<int>(i);
    a.round = static_cast<int>(i) + 1;
    a.solution = sol(fmt::format("void k() {{ /* {} */ }}\n", i));
    a.eval = rounds[i];
    a.eval.solution_id = a.solution.id;
    if (i == 1) best_solution = a.solution;
    s.record_attempt(a);
  }
  Json d = compare_runs_data({{dir, ""}});
  CHECK(d["score"].as_bool());
  const Json& r = d["runs"][0];
  check_curve(r["curve"]["best_score"], {75.0, 125.0, 125.0});
  check_curve(r["curve"]["best_latency_ms"], {2.0, std::sqrt(0.8 * 1.6), std::sqrt(0.8 * 1.6)});
  CHECK(r["best_score"].as_number() == doctest::Approx(125.0));
  CHECK(r["rounds_to_90_score"].as_int() == 2);  // 75 < 0.9 x 125
  CHECK(r["workloads_at_least"]["workloads"].as_int() == 2);
  CHECK(r["workloads_at_least"]["at_least"].as_int() == 2);
  CHECK(r["workloads_at_least"]["fraction"].as_number() == doctest::Approx(1.0));
  CHECK(compare_runs_data({{dir, ""}}, {.at_least = 1.25})["runs"][0]["workloads_at_least"]["at_least"].as_int() == 2);
  CHECK(compare_runs_data({{dir, ""}}, {.at_least = 1.3})["runs"][0]["workloads_at_least"]["at_least"].as_int() == 0);

  // The final evaluation on every workload counts when it is of the best kernel.
  EvalResult all = eval({0.8, 1.6, 2.0}, {1.0, 2.0, 1.0});
  all.solution_id = best_solution.id;
  s.write_final_eval(all);
  Json f = compare_runs_data({{dir, ""}})["runs"][0]["workloads_at_least"];
  CHECK(f["workloads"].as_int() == 3);
  CHECK(f["at_least"].as_int() == 2);
  CHECK(f["from"].as_string() == "final_eval.json");
  CHECK(compare_runs_data({{dir, ""}}, {.at_least = 0.5})["runs"][0]["workloads_at_least"]["at_least"].as_int() == 3);

  std::string text = render_compare_text(compare_runs_data({{dir, ""}}));
  CHECK(text.find("best score") != std::string::npos);
  CHECK(text.find("2/3 (67 %)") != std::string::npos);
  std::string page = render_compare_report(compare_runs_data({{dir, ""}}));
  CHECK(page.find("id=\"score-chart\"") != std::string::npos);
}

TEST_CASE("compare: an evaluation adopted at the start is the best so far from round 1") {
  auto dir = test::scratch_dir("cmp_adopted");
  RunStore s = RunStore::create(dir, Json::obj({{"task", Json::obj({{"name", "tests/synthetic"}})},
                                                {"config", Json::obj({{"strategy", "world_model"}, {"max_rounds", 2}})}}));
  const std::vector<std::pair<int, double>> attempts = {{0, 3.0}, {1, 5.0}, {2, 2.0}};
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    AttemptRecord a;
    a.seq = static_cast<int>(i);
    a.round = attempts[i].first;
    a.solution = sol(fmt::format("void k() {{ /* adopted {} */ }}\n", i));
    a.eval = passed(attempts[i].second, 3.0);
    if (a.round == 0) a.eval.metrics["recorded_from"] = "/elsewhere/best.json";
    s.record_attempt(a);
  }
  const Json r = compare_runs_data({{dir, ""}})["runs"][0];
  check_curve(r["curve"]["best_latency_ms"], {3.0, 2.0});
  CHECK(r["rounds_to_90"].as_int() == 2);
}

TEST_CASE("compare: the page draws every run and label as inline SVG, escapes labels and loads nothing") {
  Three t;
  Json d = compare_runs_data({{t.a, "<b>wm</b>"}, {t.b, "<b>wm</b>"}, {t.c, ""}});
  std::string page = render_compare_report(d);
  CHECK(page.find("<svg") != std::string::npos);
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t p = 0; (p = page.find(what, p)) != std::string::npos; p += what.size()) ++n;
    return n;
  };
  CHECK(count("<path class=\"run\"") == 3);
  CHECK(count("<path class=\"mean\"") == 1);  // the label with two runs
  CHECK(count("<circle class=\"r90\"") == 3);
  CHECK(page.find("<b>wm</b>") == std::string::npos);
  CHECK(page.find("&lt;b&gt;wm&lt;/b&gt;") != std::string::npos);
  CHECK(count("<script") == 1);  // the data only: no code
  CHECK(page.find("http://") == std::string::npos);
  CHECK(page.find("https://") == std::string::npos);
  CHECK(page.find("{{") == std::string::npos);
  const std::string open_tag = "<script type=\"application/json\" id=\"ks-compare-data\">";
  auto from = page.find(open_tag);
  REQUIRE(from != std::string::npos);
  from += open_tag.size();
  CHECK(Json::parse(page.substr(from, page.find("</script>", from) - from)) == d);

  std::string text = render_compare_text(d);
  CHECK(text.find("2.25 [2-2.5]") != std::string::npos);  // the label's best: mean [min-max]
  CHECK(text.find("7 (6+1)") != std::string::npos);       // a's calls: code + world model
}

TEST_CASE("compare: bad input is a clear error naming the folder or file") {
  Three t;
  auto error_of = [](const std::vector<CompareRun>& runs) -> std::pair<Status, std::string> {
    try {
      compare_runs_data(runs);
    } catch (const Error& e) {
      return {e.status(), e.what()};
    }
    return {Status::ok, ""};
  };
  SUBCASE("runs of different tasks") {
    auto other = make_run("cmp_other", Spec{.task = "tests/other", .rounds = {1.0}});
    auto [st, msg] = error_of({{t.a, ""}, {other, ""}});
    CHECK(st == Status::invalid_argument);
    CHECK(msg.find("different tasks") != std::string::npos);
    CHECK(msg.find("tests/other") != std::string::npos);
    CHECK(msg.find("tests/synthetic") != std::string::npos);
  }
  SUBCASE("a missing folder, a folder without a run") {
    auto [st, msg] = error_of({{t.a, ""}, {t.a.parent_path() / "cmp_nowhere", ""}});
    CHECK(st == Status::not_found);
    CHECK(msg.find("cmp_nowhere: no such run folder") != std::string::npos);
    auto empty = test::scratch_dir("cmp_empty");
    auto [st2, msg2] = error_of({{empty, ""}});
    CHECK(st2 == Status::not_found);
    CHECK(msg2.find("holds no run") != std::string::npos);
  }
  SUBCASE("a manifest that is not JSON, or names no task") {
    std::ofstream(t.b / "manifest.json") << "{\"task\": {\"name\": ";
    auto [st, msg] = error_of({{t.a, ""}, {t.b, ""}});
    CHECK(st == Status::parse);
    CHECK(msg.find((t.b / "manifest.json").string()) != std::string::npos);
    std::ofstream(t.b / "manifest.json") << "[1, 2]";
    CHECK(error_of({{t.b, ""}}).second.find("manifest.json: not a JSON object") != std::string::npos);
    std::ofstream(t.b / "manifest.json") << "{\"task\": 5}";
    CHECK(error_of({{t.b, ""}}).second.find("names no task") != std::string::npos);
  }
  SUBCASE("a damaged evaluation or index line") {
    std::string eval_json;
    for (const auto& e : fs::directory_iterator(t.c / "attempts"))
      if (e.path().filename().string().rfind("0002-", 0) == 0) eval_json = (e.path() / "eval.json").string();
    REQUIRE(!eval_json.empty());
    std::ofstream(eval_json) << R"({"status": "bogus"})";
    auto [st, msg] = error_of({{t.c, ""}});
    CHECK(st == Status::parse);
    CHECK(msg.find(eval_json) != std::string::npos);
    CHECK(msg.find("unknown status") != std::string::npos);

    // A line in the middle that is not JSON (a torn last line is left out quietly).
    std::string index;
    {
      std::ifstream in(t.a / "attempts.jsonl");
      std::string line;
      std::getline(in, line);
      index = "not json\n" + line + "\n";
    }
    std::ofstream(t.a / "attempts.jsonl") << index;
    auto [st2, msg2] = error_of({{t.a, ""}});
    CHECK(st2 == Status::parse);
    CHECK(msg2.find((t.a / "attempts.jsonl").string()) != std::string::npos);
  }
  SUBCASE("a round number no run can have") {
    std::ofstream(t.b / "attempts.jsonl", std::ios::app)
        << R"({"seq": 4, "round": 2000000000, "action": "x", "solution_id": "", "parent_id": "", "status": "passed", )"
        << R"("latency_ms": 1, "speedup": 0, "time": ""})" << "\n";
    fs::create_directories(t.b / "attempts" / "0004-no-code");
    std::ofstream(t.b / "attempts" / "0004-no-code" / "eval.json") << R"({"status": "passed", "latency_ms": 1})";
    auto [st, msg] = error_of({{t.b, ""}});
    CHECK(st == Status::parse);
    CHECK(msg.find("says round 2000000000, and the run holds 5 attempts") != std::string::npos);
  }
  SUBCASE("a torn last line is a run in progress, not damage") {
    std::ofstream(t.a / "attempts.jsonl", std::ios::app) << R"({"seq": 6, "round": 7, "act)";
    std::ofstream(t.a / "events.jsonl", std::ios::app) << R"({"seq": 99, "type": "llm_c)";
    Json d = compare_runs_data({{t.a, ""}});
    CHECK(d["runs"][0]["rounds"].as_int() == 6);
    CHECK(d["runs"][0]["llm"]["calls"].as_int() == 7);
  }
  SUBCASE("the same folder twice, a bad threshold, no runs") {
    CHECK(error_of({{t.a, ""}, {t.a / ".", "x"}}).second.find("is given twice") != std::string::npos);
    CHECK_THROWS_WITH(compare_runs_data({{t.a, ""}}, {.at_least = 0}), doctest::Contains("at_least must be a number > 0"));
    CHECK_THROWS_WITH(compare_runs_data({}), doctest::Contains("no run folder given"));
  }
}
