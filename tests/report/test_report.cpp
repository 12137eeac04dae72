#include <doctest/doctest.h>

#include <fmt/format.h>

#include <fstream>

#include "core/run_events.hpp"
#include "ksearch/error.hpp"
#include "ksearch/report.hpp"
#include "ksearch/run_store.hpp"
#include "report/run_fixture.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::test;  // the synthetic run's pieces (report/run_fixture.hpp)
namespace fs = std::filesystem;

namespace {

Json node(const std::string& id, const char* parent, const std::string& title, double score, int difficulty,
          const std::string& solution = "") {
  Json n = Json::obj({{"node_id", id}, {"parent_id", parent ? Json(parent) : Json()},
                      {"node_type", parent ? "decision" : "root"}});
  if (!title.empty())
    n["action"] = Json::obj({{"title", title}, {"score_0_to_1", score}, {"difficulty_1_to_5", difficulty}});
  if (!solution.empty())
    n["solution_ref"] = Json::obj({{"solution_id", solution}, {"eval", Json::obj({{"status", "passed"}, {"latency_ms", 2.0}})}});
  return n;
}

Json tree(std::uint64_t version, Json nodes, const std::string& active = "root") {
  return Json::obj({{"kernel_summary", "a test tree"}, {"version", version},
                    {"decision_tree", Json::obj({{"root_id", "root"}, {"active_leaf_id", active}, {"nodes", std::move(nodes)}})}});
}

// A small run: wm init call, three rounds (pass 4 ms, compile error, pass
// 2 ms), two snapshots, a too-hard cycle, the best at round 3.
fs::path make_run(const std::string& name, const std::string& best_code = "void k() {}\n") {
  auto dir = test::scratch_dir(name);
  RunStore s = RunStore::create(dir, Json::obj({{"task", Json::obj({{"name", "tests/synthetic"}})},
                                                {"config", Json::obj({{"strategy", "world_model"}, {"max_rounds", 3}})},
                                                {"status", "running"}}));
  llm_call(s, 0, "wm_init", 100, 10, 0.5);
  s.write_world_model(1, tree(1, Json::arr({node("root", nullptr, "", 0, 0), node("a", "root", "first", 0.9, 2),
                                            node("b", "root", "second", 0.6, 3)})));
  append(s, core::events::WorldModelSnapshot{1});
  append(s, core::events::CycleStarted{1, "a", "first", 2, 0.9, ""});
  Solution s1 = sol("void k() { /* slow */ }\n"), s2 = sol("void k() { broken"), s3 = sol(best_code);
  const std::vector<std::tuple<Solution, EvalResult>> rounds = {
      {s1, passed(4.0, 3.0)}, {s2, failed(EvalStatus::compile_error, "kernel.cpp:1: error: expected '}'\nmore")},
      {s3, passed(2.0, 3.0)}};
  int seq = 0;
  for (const auto& [solution, eval] : rounds) {
    llm_call(s, seq + 1, "generate", 1000, 200, 0.25);
    AttemptRecord a;
    a.seq = seq;
    a.round = seq + 1;
    a.action = fmt::format("round {}", seq + 1);
    a.solution = solution;
    a.eval = eval;
    a.eval.solution_id = solution.id;
    s.record_attempt(a);
    append(s, core::events::Evaluated{a.round, true, a.action, solution.id, "", std::string(to_string(eval.status)),
                                        eval.latency_ms, eval.speedup, {}, std::nullopt});
    if (eval.passed()) s.write_best(BestSolution{solution, a.eval, a.round});
    ++seq;
  }
  append(s, core::events::CycleFinished{1, "a", 3, false, ""});
  llm_call(s, 4, "wm_too_hard", 300, 30, 0.125);
  // Version 2 edits node a and makes b the active one.
  s.write_world_model(2, tree(2, Json::arr({node("root", nullptr, "", 0, 0), node("a", "root", "first \"quoted\"\nline", 0.2, 2),
                                            node("b", "root", "second", 0.6, 3)}), "b"));
  append(s, core::events::WorldModelSnapshot{2});
  return dir;
}

}  // namespace

TEST_CASE("report data: attempts with best so far, LLM usage per round, snapshots, best and baselines") {
  auto dir = make_run("report_data");
  Json d = run_report_data(dir);
  const Json& at = d["attempts"];
  REQUIRE(at.size() == 3);
  CHECK(at[0]["best_ms"].as_number() == doctest::Approx(4.0));
  CHECK(at[0]["improved"].as_bool());
  CHECK(at[1]["status"].as_string() == "compile_error");
  CHECK(at[1]["best_ms"].as_number() == doctest::Approx(4.0));
  CHECK(at[1]["reason"].as_string() == "compile_error (kernel.cpp:1: error: expected '}')");
  CHECK(at[2]["best_ms"].as_number() == doctest::Approx(2.0));

  // wm_init and round 1's generate count towards round 1; the too-hard call
  // after round 3 towards round 4.
  const Json& rounds = d["llm"]["rounds"];
  REQUIRE(rounds.size() == 4);
  CHECK(rounds[0]["round"].as_int() == 1);
  CHECK(rounds[0]["calls"].as_int() == 2);
  CHECK(rounds[0]["input_tokens"].as_int() == 1100);
  CHECK(rounds[0]["cost_usd"].as_number() == doctest::Approx(0.75));
  CHECK(rounds[3]["round"].as_int() == 4);
  CHECK(rounds[3]["cum_cost_usd"].as_number() == doctest::Approx(1.375));
  CHECK(d["llm"]["calls"].size() == 5);

  const Json& wm = d["world_model"];
  REQUIRE(wm["snapshots"].size() == 2);
  CHECK(wm["snapshots"][0]["round"].as_int() == 0);
  CHECK(wm["snapshots"][1]["round"].as_int() == 3);
  // root, a, b; then a edited and b active: the unchanged root is stored once.
  CHECK(wm["nodes"].size() == 5);
  CHECK(wm["snapshots"][0]["nodes"][0] == wm["snapshots"][1]["nodes"][0]);
  const Json& a2 = wm["nodes"][static_cast<std::size_t>(wm["snapshots"][1]["nodes"][1].as_int())];
  CHECK(a2["status"].as_string() == "too_hard");  // its cycle ended without a kernel
  CHECK(wm["nodes"][static_cast<std::size_t>(wm["snapshots"][1]["nodes"][2].as_int())]["status"].as_string() == "active");

  const Json& best = d["best"];
  CHECK(best["round"].as_int() == 3);
  CHECK(best["latency_ms"].as_number() == doctest::Approx(2.0));
  REQUIRE(best["baselines"].size() == 1);
  CHECK(best["baselines"][0].as_string() == "first passing kernel (round 1)");
  CHECK(best["workloads"][0]["baselines"]["first passing kernel (round 1)"].as_number() == doctest::Approx(4.0));
  CHECK(best["workloads"][0]["reference_ms"].as_number() == doctest::Approx(3.0));
  CHECK(best["sources"][0]["content"].as_string() == "void k() {}\n");
  CHECK(d["warnings"].empty());
}

TEST_CASE("report data: an evaluation adopted from another run is the best so far from the first point") {
  auto dir = test::scratch_dir("report_adopted");
  RunStore s = RunStore::create(dir, Json::obj({{"task", Json::obj({{"name", "tests/synthetic"}})},
                                                {"config", Json::obj({{"strategy", "world_model"}, {"max_rounds", 1}})},
                                                {"status", "running"}}));
  Solution seed = sol("void k() { /* continued */ }\n"), r1 = sol("void k() { /* slower */ }\n");
  AttemptRecord a0;
  a0.seq = 0;
  a0.round = 0;  // adopted, not a round
  a0.solution = seed;
  a0.eval = passed(1.5, 3.0);
  a0.eval.solution_id = seed.id;
  a0.eval.metrics["recorded_from"] = "/elsewhere/best.json";
  s.record_attempt(a0);
  AttemptRecord a1;
  a1.seq = 1;
  a1.round = 1;
  a1.solution = r1;
  a1.eval = passed(4.0, 3.0);
  a1.eval.solution_id = r1.id;
  s.record_attempt(a1);
  Json d = run_report_data(dir);
  const Json& at = d["attempts"];
  REQUIRE(at.size() == 2);
  CHECK(at[0]["best_ms"].as_number() == doctest::Approx(1.5));
  CHECK(at[0]["improved"].as_bool());
  CHECK(at[1]["best_ms"].as_number() == doctest::Approx(1.5));  // round 1 (4 ms) does not beat it
  CHECK_FALSE(at[1]["improved"].as_bool());
}

TEST_CASE("report page: code and text from the run cannot break out of the page") {
  // A kernel whose source would end the data block or the page's script if
  // it were pasted in unescaped, and a placeholder the template uses.
  const std::string evil = "// </script><script>alert(1)</script> <!-- {{DATA}} & \xE2\x80\xA8 end\n";
  auto dir = make_run("report_escape", evil);
  std::string page = render_run_report(dir);
  CHECK(page.find("alert(1)</script>") == std::string::npos);
  CHECK(page.find("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);  // in the <pre>
  // Exactly two script blocks: the data and the code.
  std::size_t opens = 0, closes = 0;
  for (std::size_t p = 0; (p = page.find("<script", p)) != std::string::npos; ++p) ++opens;
  for (std::size_t p = 0; (p = page.find("</script", p)) != std::string::npos; ++p) ++closes;
  CHECK(opens == 2);
  CHECK(closes == 2);
  // The data block parses back to the same data.
  const std::string open_tag = "<script type=\"application/json\" id=\"ks-report-data\">";
  auto from = page.find(open_tag);
  REQUIRE(from != std::string::npos);
  from += open_tag.size();
  auto to = page.find("</script>", from);
  Json d = Json::parse(page.substr(from, to - from));
  CHECK(d["best"]["sources"][0]["content"].as_string() == evil);
  CHECK(page.find("{{") == page.find("{{DATA}} &amp;"));  // only the escaped one, in the source
}

TEST_CASE("report: the world model's edits, rejections, fallbacks and repairs, with the edit mode") {
  auto dir = make_run("report_wm_totals");
  auto set_manifest = [&](bool lenient, Json world_model) {
    RunStore s = RunStore::open(dir);
    Json m = s.manifest();
    m["config"]["wm_lenient_edits"] = lenient;
    m["totals"] = Json::obj({{"rounds", 3}, {"world_model", std::move(world_model)}});
    s.write_manifest(m);
  };
  set_manifest(true, Json::obj({{"edits", 4}, {"rejected", 2}, {"fallbacks", 1}, {"repairs", 5},
                                {"repaired_edits", 3}}));
  Json d = run_report_data(dir);
  const Json& w = d["run"]["world_model"];
  CHECK(w["repairs"].as_number() == 5);
  CHECK(w["repaired_edits"].as_number() == 3);
  CHECK(w["lenient"].as_bool());
  CHECK(render_run_report(dir).find("4 edits committed, 2 answers rejected, 1 fallbacks; lenient edits, 5 repairs "
                                    "in 3 edits") != std::string::npos);
  // A strict run, or one recorded before the counts existed, says so.
  set_manifest(false, Json::obj({{"edits", 4}, {"rejected", 2}, {"fallbacks", 1}}));
  CHECK(run_report_data(dir)["run"]["world_model"]["repairs"].as_number() == 0);
  CHECK(render_run_report(dir).find("4 edits committed, 2 answers rejected, 1 fallbacks; strict edits") !=
        std::string::npos);
}

TEST_CASE("report data: a run in progress with torn lines and a damaged snapshot") {
  auto dir = make_run("report_torn");
  {
    std::ofstream(dir / "attempts.jsonl", std::ios::app) << R"({"seq": 3, "round": 4, "act)";
    std::ofstream(dir / "events.jsonl", std::ios::app) << R"({"seq": 99, "type": "llm_c)";
    std::ofstream(dir / "world_model" / "v000003.json") << "{\"decision_tree\": ";
  }
  Json d = run_report_data(dir);
  CHECK(d["attempts"].size() == 3);
  CHECK(d["llm"]["calls"].size() == 5);
  CHECK(d["world_model"]["snapshots"].size() == 2);
  std::string warnings = d["warnings"].dump();
  CHECK(warnings.find("attempts.jsonl: the last line is incomplete") == std::string::npos);  // the store drops it quietly
  CHECK(warnings.find("events.jsonl: the last line is incomplete") != std::string::npos);
  CHECK(warnings.find("v000003.json") != std::string::npos);
  CHECK(render_run_report(dir).find("v000003.json") != std::string::npos);  // the page lists the gap
}

TEST_CASE("report: a folder without a run is a clear error") {
  auto dir = test::scratch_dir("report_none");
  try {
    run_report_data(dir);
    FAIL("should throw");
  } catch (const Error& e) {
    CHECK(e.status() == Status::not_found);
    CHECK(std::string(e.what()).find("holds no run") != std::string::npos);
  }
}

TEST_CASE("world_model_dot: escaped labels, edges, status colours, the run's too-hard nodes") {
  auto dir = make_run("report_dot");
  std::string dot = run_world_model_dot(dir);
  CHECK(dot.rfind("digraph world_model {", 0) == 0);
  CHECK(dot.find("label=\"tests/synthetic: world model v2, after round 3\"") != std::string::npos);
  CHECK(dot.find(R"("a" [label="a: first \"quoted\"\nline\ntoo_hard | V 0.20 | difficulty 2")") != std::string::npos);
  CHECK(dot.find(R"("b" [label="b: second\nactive | V 0.60 | difficulty 3", fillcolor="#90caf9", penwidth=2.5])") !=
        std::string::npos);
  CHECK(dot.find("\"root\" -> \"a\";") != std::string::npos);
  CHECK(dot.find("\"root\" -> \"b\";") != std::string::npos);
  // Every label is one line of dot: no raw newline inside quotes.
  for (std::size_t p = 0, q; (q = dot.find('\n', p)) != std::string::npos; p = q + 1) {
    std::string line = dot.substr(p, q - p);
    std::size_t quotes = 0;
    for (std::size_t i = 0; i < line.size(); ++i)
      if (line[i] == '"' && (i == 0 || line[i - 1] != '\\')) ++quotes;
    CHECK_MESSAGE(quotes % 2 == 0, line);
  }
  CHECK(run_world_model_dot(dir, 1).find("v1, after round 0") != std::string::npos);
  CHECK_THROWS_WITH(run_world_model_dot(dir, 7), doctest::Contains("no such snapshot"));
  // A bare snapshot (no run): the same picture without the event log.
  std::string bare = world_model_dot(tree(5, Json::arr({node("root", nullptr, "", 0, 0), node("x", "root", "t", 0.5, 1, "abc")})));
  CHECK(bare.find("label=\"world model v5\"") != std::string::npos);
  CHECK(bare.find("solved | V 0.50 | difficulty 1\\nkernel abc: 2 ms") != std::string::npos);
}

TEST_CASE("report data: the best so far follows the score, as the session does (vs_baseline tasks)") {
  auto dir = test::scratch_dir("report_score");
  RunStore s = RunStore::create(dir, Json::obj({{"task", Json::obj({{"name", "tests/scored"}})}}));
  // Round 2 is faster by its geometric mean but scores lower against the
  // task's baseline (an arithmetic mean of per-workload ratios).
  const std::vector<std::pair<double, double>> rounds = {{4.0, 2.0}, {3.0, 1.5}, {5.0, 2.5}};
  int seq = 0;
  for (const auto& [ms, score] : rounds) {
    AttemptRecord a;
    a.seq = seq;
    a.round = seq + 1;
    a.solution = sol(fmt::format("void k() {{ /* {} */ }}\n", seq));
    a.eval = passed(ms, 3.0);
    a.eval.score_mode = ScoreMode::vs_baseline;
    a.eval.score = score;
    s.record_attempt(a);
    ++seq;
  }
  Json at = run_report_data(dir)["attempts"];
  REQUIRE(at.size() == 3);
  CHECK(at[0]["improved"].as_bool());
  CHECK_FALSE(at[1]["improved"].as_bool());
  CHECK(at[1]["best_ms"].as_number() == doctest::Approx(4.0));
  CHECK(at[2]["improved"].as_bool());
  CHECK(at[2]["best_ms"].as_number() == doctest::Approx(5.0));
  CHECK(at[2]["score_mode"].as_string() == "vs_baseline");
}
