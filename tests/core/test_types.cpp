#include <doctest/doctest.h>

#include "ksearch/error.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"

using namespace ks;

namespace {

Solution make_solution(const std::string& code) {
  Solution s;
  s.language = Language::cpp;
  s.name = "x";
  s.sources = {{"kernel.cpp", code}};
  s.launch_plan = LaunchPlan::from_json(Json::obj({{"calls", Json::arr({Json::obj({{"fn", "f"}, {"args", Json::array()}})})}}));
  return s.finalize();
}

TaskSpec tiny_task() {
  auto j = Json::parse(R"JSON({
    "name": "tiny", "languages": ["cpp"], "dims": ["N"],
    "tensors": [
      {"name": "x", "dtype": "f32", "shape": ["N"], "dist": {"kind": "normal", "std": "1/sqrt(N)"}},
      {"name": "y", "dtype": "f32", "shape": ["N"], "role": "output"}
    ],
    "workloads": [
      {"name": "small", "dims": {"N": 16}, "seed": 1},
      {"name": "big", "dims": {"N": 4096}, "seed": 2, "benchmark": true,
       "dist": {"x": {"kind": "cauchy", "scale": 2}}}
    ],
    "tolerance": {"atol": 1e-5, "rtol": 1e-5},
    "flops": "N", "bytes": "8*N",
    "references": {"cpp": {"language": "cpp", "sources": [{"path": "ref.cpp", "content": "void f(){}"}],
                           "launch_plan": {"calls": [{"fn": "f", "args": []}]}}}
  })JSON");
  return TaskSpec::from_json(j);
}

}  // namespace

TEST_CASE("solution: id is a content hash independent of name and parent") {
  Solution a = make_solution("int f();");
  Solution b = a;
  b.name = "other";
  b.parent_id = "p";
  CHECK(b.compute_id() == a.id);
  CHECK(make_solution("int g();").id != a.id);
  CHECK(a.id.size() == 16);
  Solution back = Solution::from_json(a.to_json());
  CHECK(back.id == a.id);
  CHECK(back.sources[0].content == "int f();");
}

TEST_CASE("solution: malformed JSON names the field") {
  try {
    Solution::from_json(Json::parse(R"({"language": "rust", "sources": []})"));
    FAIL("should throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("rust") != std::string::npos);
  }
  CHECK_THROWS(Solution::from_json(Json::parse(R"({"language": "cpp"})")));
  CHECK_THROWS(Solution::from_json(Json::parse(R"({"language": "cpp", "sources": [{"path": "a"}]})")));
}

TEST_CASE("task spec: round-trips and validates") {
  TaskSpec t = tiny_task();
  t.validate();
  CHECK(t.benchmark_workloads().size() == 1);
  CHECK(t.find_workload("big")->dist_overrides.at("x").kind == Distribution::Kind::cauchy);
  TaskSpec back = TaskSpec::from_json(t.to_json());
  back.validate();
  CHECK(back.to_json() == t.to_json());
}

TEST_CASE("task spec: each inconsistency is named") {
  auto expect = [](TaskSpec t, const char* needle) {
    try {
      t.validate();
      FAIL("should throw: ", needle);
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  {
    TaskSpec t = tiny_task();
    t.tensors[0].shape = {"M"};
    expect(t, "unknown dimension \"M\"");
  }
  {
    TaskSpec t = tiny_task();
    t.workloads[0].dims.erase("N");
    expect(t, "does not set dimension \"N\"");
  }
  {
    TaskSpec t = tiny_task();
    t.workloads[1].benchmark = false;
    expect(t, "no workload has \"benchmark\"");
  }
  {
    TaskSpec t = tiny_task();
    t.tensors[1].is_output = false;
    expect(t, "no tensor has role \"output\"");
  }
  {
    TaskSpec t = tiny_task();
    t.references.clear();
    expect(t, "no reference solution");
  }
  {
    TaskSpec t = tiny_task();
    t.workloads[0].dims["N"] = 0;
    expect(t, "must be positive");
  }
}

TEST_CASE("task spec: unknown and mistyped fields are rejected by name") {
  auto j = tiny_task().to_json();
  j["tensors"][0]["shpae"] = Json::arr({"N"});
  try {
    TaskSpec::from_json(j);
    FAIL("should throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("unknown field \"shpae\"") != std::string::npos);
  }
  auto j2 = tiny_task().to_json();
  j2["tensors"][0]["dtype"] = "float128";
  CHECK_THROWS_WITH(TaskSpec::from_json(j2), doctest::Contains("unknown dtype \"float128\""));
  auto j3 = tiny_task().to_json();
  j3["workloads"][0]["dims"]["N"] = 1.5;
  CHECK_THROWS_WITH(TaskSpec::from_json(j3), doctest::Contains("must be an integer"));
  auto j4 = tiny_task().to_json();
  j4["tensors"][0]["dist"] = Json::obj({{"kind", "gamma"}});
  CHECK_THROWS_WITH(TaskSpec::from_json(j4), doctest::Contains("unknown distribution kind \"gamma\""));
}

TEST_CASE("solution text: a damaged solution JSON is named as such, not as an answer without code") {
  TaskSpec t = tiny_task();
  std::string good = R"({"language": "cpp", "sources": [{"path": "k.cpp", "content": "void f(){}"}],
                         "launch_plan": {"calls": [{"fn": "f", "args": []}]}})";
  CHECK(parse_solution_text(good, t).sources.size() == 1);
  CHECK_THROWS_WITH(parse_solution_text(good.substr(0, 40), t),
                    doctest::Contains("looks like solution JSON, but it is not valid JSON"));
  CHECK_THROWS_WITH(parse_solution_text("{}", t), doctest::Contains("looks like solution JSON, but it has no \"sources\""));
  // Prose without code blocks keeps the message written for a model.
  CHECK_THROWS_WITH(parse_solution_text("no code here", t), doctest::Contains("no source code block"));
}

TEST_CASE("eval result: geometric mean, speedup and score") {
  EvalResult r;
  r.status = EvalStatus::passed;
  WorkloadResult a, b, t;
  a.benchmark = b.benchmark = true;
  a.timing.mean_ms = 1.0;
  a.timing.count = 10;
  a.reference_ms = 4.0;
  b.timing.mean_ms = 4.0;
  b.timing.count = 10;
  b.reference_ms = 4.0;
  t.benchmark = false;  // correctness-only workloads do not count
  r.workloads = {a, b, t};
  r.compute_summary();
  CHECK(r.latency_ms == doctest::Approx(2.0));
  CHECK(r.reference_latency_ms == doctest::Approx(4.0));
  CHECK(r.speedup == doctest::Approx(2.0));
  CHECK(r.score == doctest::Approx(0.5));
  EvalResult back = EvalResult::from_json(r.to_json());
  CHECK(back.latency_ms == r.latency_ms);
  CHECK(back.workloads.size() == 3);
  r.status = EvalStatus::incorrect;
  r.compute_summary();
  CHECK(r.score == 0);
}
