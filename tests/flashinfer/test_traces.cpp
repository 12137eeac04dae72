// K-Search's protocol on FlashInfer-Bench, on a fixture dataset written for
// these tests (tests/fixtures/flashinfer_trace_baselines, its make_fixture.py
// says what it holds): baselines from the traces of FlashInfer's solution
// per card, a card the traces do not cover, measuring the baseline here,
// feedback workloads (pinned, first, random) used during a search with the
// final evaluation on all of them, and published Solution JSON imported.
// Scores are checked on latencies a test double reports, never on timings.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "core/fib_solution.hpp"
#include "eval/baseline_scoring.hpp"
#include "eval/host/host_device.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/search.hpp"
#include "ksearch/solution_export.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"
#include "util/json_fields.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

const fs::path kFixture = test::source_dir() / "tests" / "fixtures" / "flashinfer_trace_baselines";
const fs::path kDefinition = kFixture / "definitions/scale/scale_d64.json";

// The extension libraries built under an evaluator's cache, with the time
// each was written: the same map after another evaluation means the build
// was reused (a signal that does not depend on how long building took).
// The libraries the worker keeps (<cache>/python/ext/<key>.so); no other
// library anywhere in the Python candidates' cache.
std::map<fs::path, fs::file_time_type> extension_libraries(const fs::path& cache) {
  std::map<fs::path, fs::file_time_type> found;
  for (const auto& e : fs::recursive_directory_iterator(cache / "python"))
    if (e.is_regular_file() && e.path().extension() == ".so") {
      CHECK(e.path().parent_path() == cache / "python" / "ext");
      found[e.path()] = e.last_write_time();
    }
  return found;
}
const char* kTask = "flashinfer/scale_d64";
const char* kTraces = "traces/scale/scale_d64.jsonl";

std::string uuid(int n) { return "0a1b2c3d-0000-4000-8000-00000000000" + std::to_string(n); }

// make_fixture.py's latencies: the fastest PASSED trace per card.
const std::vector<double> kH100 = {0.010, 0.011, 0.012, 0.014, 0.020, 0.030, 0.050, 0.160};
const std::vector<double> kB200 = {0.008, 0.009, 0.010, 0.011, 0.015, 0.022, 0.037};

// A test double for the real evaluator: every solution passes every
// workload asked for, at the latency `ms` gives for its name, on `device`.
class FixedLatencies final : public Evaluator {
 public:
  FixedLatencies(std::string device, std::map<std::string, double> ms_by_solution)
      : device_(std::move(device)), ms_(std::move(ms_by_solution)) {}
  EvalResult evaluate(const Task& task, const Solution& s) override {
    evaluated.push_back(s.name);
    EvalResult r;
    r.status = EvalStatus::passed;
    r.device = device_;
    for (const auto& w : task.spec().workloads) {
      if (!options_.only_workloads.empty() &&
          std::find(options_.only_workloads.begin(), options_.only_workloads.end(), w.name) ==
              options_.only_workloads.end())
        continue;
      WorkloadResult wr;
      wr.name = w.name;
      wr.benchmark = w.benchmark;
      wr.timing.count = 5;
      wr.timing.mean_ms = ms_.at(s.name);
      r.workloads.push_back(wr);
    }
    r.compute_summary();
    return r;
  }
  DeviceInfo device() const override {
    DeviceInfo d;
    d.backend = "cuda";
    d.name = device_;
    return d;
  }
  EvalOptions& options() override { return options_; }
  std::vector<std::string> evaluated;

 private:
  std::string device_;
  std::map<std::string, double> ms_;
  EvalOptions options_;
};

Solution candidate(const std::string& name) {
  Solution s;
  s.name = name;
  s.language = Language::cpp;
  return s;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The error reading `good` with `from` replaced by `to` gives.
std::string import_error(std::string text, const TaskSpec& t, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  text.replace(at, from.size(), to);
  return message_of([&] { parse_solution_text(text, t); });
}

fs::path copy_fixture(const std::string& name) {
  fs::path dir = test::scratch_dir(name);
  fs::copy(kFixture, dir, fs::copy_options::recursive);
  return dir;
}

}  // namespace

TEST_CASE("traces: each workload's baseline is the fastest PASSED trace of FlashInfer's solution, per card") {
  auto task = load_task(kDefinition.string());
  const TaskSpec& t = task->spec();
  CHECK(t.score == ScoreMode::vs_baseline);
  CHECK(t.baselines.empty());  // FlashInfer's latencies are not mixed with another kernel's
  const Json& origin = t.baseline_origin;
  CHECK(origin.get_string("solution") == "flashinfer_wrapper_5ca1e");  // found by its name, not given
  CHECK(origin["hardware"].as_array().size() == 2);
  REQUIRE(t.workloads.size() == 8);
  for (int n = 0; n < 8; ++n) {
    CAPTURE(n);
    CHECK(t.workloads[n].name == uuid(n + 1));  // workloads keep their UUIDs
    // Not the slower PASSED trace, nor the INCORRECT one, nor other_kernel's faster ones.
    CHECK(t.baseline_latencies["NVIDIA_H100"].get_number(uuid(n + 1)) == doctest::Approx(kH100[n]));
    // Each workload has five lines on H100 and B200 together (four for the last); the third is the fastest H100.
    const int line = n * 5 + 3;
    CHECK(origin["traces"]["NVIDIA_H100"].get_string(uuid(n + 1)) == std::string(kTraces) + ":" + std::to_string(line));
  }
  CHECK(t.baseline_latencies["NVIDIA_B200"].as_object().size() == 7);
  CHECK(t.baseline_latencies["NVIDIA_B200"].get_number(uuid(7)) == doctest::Approx(kB200[6]));
  // The prompts say what the score is measured against.
  CHECK(t.prompts.at(Language::cpp).find("flashinfer_wrapper_5ca1e") != std::string::npos);
  // Another solution by name; "none" leaves the traces out.
  SUBCASE("--baseline-solution") {
    TaskSources s;
    s.baseline_solution = "other_kernel";
    auto other = load_task(kDefinition.string(), s);
    CHECK(other->spec().baseline_latencies["NVIDIA_H100"].get_number(uuid(8)) == doctest::Approx(0.080));
    s.baseline_solution = "none";
    auto none = load_task(kDefinition.string(), s);
    CHECK(none->spec().baseline_latencies.is_null());
    CHECK(none->spec().score == ScoreMode::latency);
    s.baseline_solution = "no_such_kernel";
    const std::string msg = message_of([&] { load_task(kDefinition.string(), s); });
    CHECK(msg.find("no PASSED trace of it") != std::string::npos);
    CHECK(msg.find("flashinfer_wrapper_5ca1e, other_kernel") != std::string::npos);
  }
}

TEST_CASE("traces: scores divide the card's trace latencies by the candidate's, and say where they came from") {
  auto task = load_task(kDefinition.string());
  auto fake = std::make_unique<FixedLatencies>("NVIDIA H100 80GB HBM3", std::map<std::string, double>{{"cand", 0.020}});
  FixedLatencies* inner = fake.get();
  eval::BaselineScoring ev(std::move(fake), test::scratch_dir("traces_score"));
  EvalResult r = ev.evaluate(*task, candidate("cand"));
  REQUIRE(r.passed());
  double sum = 0;
  for (int n = 0; n < 8; ++n) {
    CHECK(r.workloads[n].baseline_ms == doctest::Approx(kH100[n]));
    sum += kH100[n] / 0.020;
  }
  CHECK(r.vs_baseline == doctest::Approx(sum / 8));
  CHECK(r.score == doctest::Approx(r.vs_baseline));
  CHECK(inner->evaluated == std::vector<std::string>{"cand"});  // nothing measured for the baseline
  // The eval output's record: traces, the card's key, the solution and line.
  const Json src = baseline_sources(task->spec(), ev.options(), r.device, Language::cpp);
  CHECK(src["counts"].get_number("traces") == 8);
  const Json& w1 = src["workloads"][uuid(1)];
  CHECK(w1.get_string("source") == "traces");
  CHECK(w1.get_string("hardware") == "NVIDIA_H100");
  CHECK(w1.get_string("solution") == "flashinfer_wrapper_5ca1e");
  CHECK(w1.get_string("trace") == std::string(kTraces) + ":3");
  CHECK(w1.get_number("ms") == doctest::Approx(0.010));
  // An imported table for this card comes first.
  ev.options().baseline_latencies = Json::obj({{"NVIDIA_H100", Json::obj({{uuid(1), 0.040}})}});
  EvalResult imported = ev.evaluate(*task, candidate("cand"));
  CHECK(imported.workloads[0].baseline_ms == doctest::Approx(0.040));
  CHECK(imported.workloads[1].baseline_ms == doctest::Approx(kH100[1]));
  CHECK(baseline_sources(task->spec(), ev.options(), r.device, Language::cpp)["workloads"][uuid(1)].get_string(
            "source") == "imported");
}

TEST_CASE("traces: a card the traces do not cover is an error naming it, the cards they have and the way out") {
  auto task = load_task(kDefinition.string());
  eval::BaselineScoring ev(std::make_unique<FixedLatencies>("NVIDIA H200", std::map<std::string, double>{{"c", 0.01}}),
                           test::scratch_dir("traces_uncovered"));
  const std::string msg = message_of([&] { ev.evaluate(*task, candidate("c")); });
  CHECK(msg.find("cover NVIDIA_B200, NVIDIA_H100, not this card (NVIDIA H200)") != std::string::npos);
  CHECK(msg.find("--measure-baseline measures flashinfer_wrapper_5ca1e (python solution "
                 "solutions/scale/flashinfer_wrapper_5ca1e.json) here instead") != std::string::npos);
  CHECK(msg == message_of([&] { check_baseline_coverage(task->spec(), {}, "NVIDIA H200", Language::cpp); }));
  // On B200 the traces lack the last workload: named, and only when it is evaluated.
  const std::string b200 = message_of([&] { check_baseline_coverage(task->spec(), {}, "NVIDIA B200", Language::cpp); });
  CHECK(b200.find("1 of the workloads have no PASSED trace of flashinfer_wrapper_5ca1e on this card (NVIDIA B200): " +
                  uuid(8)) != std::string::npos);
  CHECK_NOTHROW(check_baseline_coverage(task->spec(), {}, "NVIDIA B200", Language::cpp, {uuid(1), uuid(2)}));
  CHECK_NOTHROW(check_baseline_coverage(task->spec(), {}, "NVIDIA H100 80GB HBM3", Language::cpp));
  // A baseline solution libksearch cannot run cannot be measured, and says why.
  TaskSources s;
  s.baseline_solution = "other_kernel";
  auto other = load_task(kDefinition.string(), s);
  const std::string cuda = message_of([&] { check_baseline_coverage(other->spec(), {}, "NVIDIA H200", Language::cpp); });
  CHECK(cuda.find("other_kernel (solutions/scale/other_kernel.json) cannot be measured here") != std::string::npos);
  CHECK(cuda.find("spec.language \"tilelang\"") != std::string::npos);
  s.measure_baseline = true;
  CHECK_THROWS_WITH_AS(load_task(kDefinition.string(), s), doctest::Contains("--measure-baseline: other_kernel"), Error);
}

TEST_CASE("traces: --measure-baseline measures the dataset's solution where the traces lack the card or a workload") {
  TaskSources s;
  s.measure_baseline = true;
  auto task = load_task(kDefinition.string(), s);
  REQUIRE(task->spec().baselines.count(Language::python));
  CHECK(task->spec().baselines.at(Language::python).name == "flashinfer_wrapper_5ca1e");
  auto fake = std::make_unique<FixedLatencies>(
      "NVIDIA B200", std::map<std::string, double>{{"cand", 0.010}, {"flashinfer_wrapper_5ca1e", 0.050}});
  FixedLatencies* inner = fake.get();
  eval::BaselineScoring ev(std::move(fake), test::scratch_dir("traces_measure"));
  EvalResult r = ev.evaluate(*task, candidate("cand"));  // a cpp candidate against the python baseline
  REQUIRE(r.passed());
  CHECK(inner->evaluated == std::vector<std::string>{"cand", "flashinfer_wrapper_5ca1e"});
  CHECK(r.workloads[0].baseline_ms == doctest::Approx(kB200[0]));  // traced on B200
  CHECK(r.workloads[7].baseline_ms == doctest::Approx(0.050));     // measured here
  const Json src = baseline_sources(task->spec(), ev.options(), "NVIDIA B200", Language::cpp);
  CHECK(src["counts"].get_number("traces") == 7);
  CHECK(src["workloads"][uuid(8)].get_string("source") == "measured");
  CHECK(src["workloads"][uuid(8)].get_string("origin") == "dataset");
}

TEST_CASE("feedback workloads: pinned by UUID, or the first or a seeded random N; unknown ones are named") {
  const auto task = load_task(kDefinition.string());
  CHECK(task->spec().feedback_workloads.size() == 6);  // the dataset loader's own spread subset
  FeedbackSelection f;
  f.workloads = {uuid(5), uuid(2)};
  CHECK(select_feedback_workloads(task->spec(), f) == std::vector<std::string>{uuid(5), uuid(2)});
  TaskSources s;
  s.feedback = f;
  CHECK(load_task(kDefinition.string(), s)->spec().feedback_workloads == f.workloads);
  f.workloads = {uuid(2), "not-a-uuid"};
  const std::string msg = message_of([&] { select_feedback_workloads(task->spec(), f); });
  CHECK(msg.find("has no workload \"not-a-uuid\"") != std::string::npos);
  CHECK(msg.find(uuid(1) + ", " + uuid(2)) != std::string::npos);  // the valid ones listed
  f.workloads.clear();
  f.policy = "first";
  CHECK(select_feedback_workloads(task->spec(), f) ==
        std::vector<std::string>{uuid(1), uuid(2), uuid(3), uuid(4), uuid(5)});
  f.policy = "random";
  f.seed = 7;
  const auto a = select_feedback_workloads(task->spec(), f);
  CHECK(a.size() == 5);
  CHECK(a == select_feedback_workloads(task->spec(), f));  // the same seed, the same workloads
  // mt19937_64's sequence is fixed by the standard, so seed 7's draw is too.
  std::string drawn;
  for (const auto& w : a) drawn += w.substr(w.size() - 1);
  CHECK(drawn == "23568");
  std::set<std::vector<std::string>> draws;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    f.seed = seed;
    draws.insert(select_feedback_workloads(task->spec(), f));
  }
  CHECK(draws.size() > 1);
  f.count = 20;  // more than there are: all of them
  CHECK(select_feedback_workloads(task->spec(), f).size() == 8);
  f.policy = "sometimes";
  CHECK_THROWS_WITH_AS(select_feedback_workloads(task->spec(), f), doctest::Contains("is not first or random"), Error);
  // The selection travels in manifests.
  FeedbackSelection g;
  g.policy = "random";
  g.count = 3;
  g.seed = 11;
  const FeedbackSelection back = FeedbackSelection::from_json(g.to_json());
  CHECK(back.policy == "random");
  CHECK(back.count == 3);
  CHECK(back.seed == 11);
}

TEST_CASE("dataset by name: flashinfer/<definition> with a dataset is that definition of it") {
  TaskSources s;
  s.dataset = kFixture;
  auto task = load_task(kTask, s);
  CHECK(task->spec().workloads.size() == 8);
  CHECK(task->spec().baseline_origin.get_string("solution") == "flashinfer_wrapper_5ca1e");
  CHECK_THROWS_WITH_AS(load_task("flashinfer/nothere", s), doctest::Contains("its definitions: scale_d64"), Error);
  CHECK_THROWS_WITH_AS(load_task("gpumode/trimul", s), doctest::Contains("gives flashinfer/<definition> tasks"), Error);
  TaskSources b;
  b.baseline_solution = "x";
  CHECK_THROWS_WITH_AS(load_task("gpumode/trimul", b), doctest::Contains("applies to definitions of a FlashInfer-Trace"),
                       Error);
}

namespace {

// Stands for a model: every answer is the same correct C++ kernel, with the
// call count in a comment so each round is a new candidate.
class FixedModel final : public LlmPolicy {
 public:
  LlmResponse complete(const LlmRequest&) override {
    LlmResponse r;
    r.ok = true;
    r.text = "```cpp kernel.cpp\n#include <cstdint>\n// answer " + std::to_string(++calls_) +
             "\nvoid scale_rows(const float* x, float scale, float* y, std::int64_t batch) {\n"
             "  for (std::int64_t i = 0; i < batch * 64; ++i) y[i] = scale * x[i];\n}\n```\n"
             "```json launch_plan\n{\"calls\": [{\"fn\": \"scale_rows\", \"args\": [\"x\", \"scale\", \"y\", "
             "\"batch_size\"]}]}\n```\n";
    return r;
  }
  std::string describe() const override { return "test:fixed"; }

 private:
  int calls_ = 0;
};

}  // namespace

TEST_CASE("search: pinned feedback workloads each round, every workload in the final evaluation, traces for this card") {
  // A copy of the fixture whose traces also cover this machine's CPU, where
  // the host backend runs the candidates: baselines of 1, 2, ... 8 ms.
  const fs::path data = copy_fixture("traces_search_data");
  const std::string cpu = eval::host::host_device_info().name;
  const std::size_t lines_before = util::read_lines(data / kTraces).size();
  std::string add;
  for (int n = 1; n <= 8; ++n)
    add += Json::obj({{"definition", "scale_d64"},
                      {"workload", Json::obj({{"uuid", uuid(n)}})},
                      {"solution", "flashinfer_wrapper_5ca1e"},
                      {"evaluation", Json::obj({{"status", "PASSED"},
                                                {"environment", Json::obj({{"hardware", cpu}})},
                                                {"performance", Json::obj({{"latency_ms", 1.0 * n}})}})}})
               .dump() +
           "\n";
  util::write_file_atomic(data / kTraces, util::read_file(data / kTraces) + add);

  const fs::path run = test::scratch_dir("traces_search_run");
  fs::remove_all(run);
  SearchOptions o;
  o.task = kTask;
  o.task_sources.dataset = data;
  const std::vector<std::string> pinned = {uuid(6), uuid(1), uuid(3)};
  o.task_sources.feedback.workloads = pinned;
  o.config.strategy = StrategyKind::greedy;
  o.config.language = Language::cpp;
  o.config.max_rounds = 2;
  o.llm.kind = LlmSource::custom;
  o.llm.custom = std::make_shared<FixedModel>();
  o.evaluator.backend = ks::EvalBackend::host;
  o.evaluator.cache_dir = test::scratch_dir("traces_search_cache");
  o.evaluator.options.max_time_per_workload_s = 0.05;
  o.weak_check = false;
  o.run_dir = run;
  SearchOutcome out = run_search(o);
  REQUIRE(out.best);
  CHECK(out.feedback_workloads == pinned);

  RunStore store = RunStore::open_read_only(run);
  const auto attempts = store.attempts();
  REQUIRE(attempts.size() == 2);
  const std::set<std::string> want(pinned.begin(), pinned.end());
  for (const auto& a : attempts) {
    std::set<std::string> seen;
    for (const auto& w : a.eval.workloads) {
      seen.insert(w.name);
      const int n = std::stoi(w.name.substr(w.name.size() - 1));
      if (a.eval.passed()) CHECK(w.baseline_ms == doctest::Approx(1.0 * n));  // this card's traces
    }
    CHECK(seen == want);
  }
  REQUIRE(out.final_eval);
  REQUIRE(out.final_eval->passed());
  REQUIRE(out.final_eval->workloads.size() == 8);
  double sum = 0;
  for (const auto& w : out.final_eval->workloads) {
    const int n = std::stoi(w.name.substr(w.name.size() - 1));
    CHECK(w.baseline_ms == doctest::Approx(1.0 * n));
    sum += w.baseline_ms / w.timing.latency();
  }
  CHECK(out.final_eval->vs_baseline == doctest::Approx(sum / 8));

  // The manifest says which workloads were feedback and which final, how
  // they were chosen, and where each baseline came from.
  const Json m = store.manifest();
  CHECK(m["workloads"]["feedback"] == util::string_array(pinned));
  CHECK(m["workloads"]["final"].as_array().size() == 8);
  CHECK(m["workloads"].get_bool("final_evaluation"));
  CHECK(m["workloads"].get_string("chosen_by") == "pinned");
  CHECK(m["task"]["sources"]["feedback"]["workloads"] == util::string_array(pinned));
  const Json& b = m["baseline"];
  CHECK(b.get_string("device") == cpu);
  CHECK(b["counts"].get_number("traces") == 8);
  CHECK(b["workloads"][uuid(2)].get_string("trace") == std::string(kTraces) + ":" + std::to_string(lines_before + 2));
  CHECK(b["workloads"][uuid(2)].get_string("hardware") == cpu);

  // A resume loads the same task (the same feedback subset) from the record.
  ResumeOptions r;
  r.custom_llm = std::make_shared<FixedModel>();
  SearchOutcome again = resume_search(run, r);
  CHECK(again.rounds == 2);
  CHECK(again.feedback_workloads == pinned);
}

TEST_CASE("search: a card the traces do not cover stops the run before anything is asked") {
  SearchOptions o;
  o.task = kDefinition.string();
  o.config.strategy = StrategyKind::greedy;
  o.config.language = Language::cpp;
  o.config.max_rounds = 2;
  auto model = std::make_shared<FixedModel>();
  o.llm.kind = LlmSource::custom;
  o.llm.custom = model;
  o.evaluator.backend = ks::EvalBackend::host;
  o.evaluator.cache_dir = test::scratch_dir("traces_uncovered_cache");
  o.weak_check = false;
  o.run_dir = test::scratch_dir("traces_uncovered_run") / "run";
  const std::string msg = message_of([&] { run_search(o); });
  CHECK(msg.find("not this card (" + eval::host::host_device_info().name + ")") != std::string::npos);
  CHECK_FALSE(fs::exists(o.run_dir));
}

TEST_CASE("import: a published FlashInfer-Bench Solution JSON is read as it is, and bad ones name the field") {
  auto task = load_task(kDefinition.string());
  const TaskSpec& t = task->spec();
  Solution s = load_solution_file(kFixture / "published/scale_rows_python.json", t);
  CHECK(s.language == Language::python);
  CHECK(s.name == "scale_rows_value_returning");
  CHECK(s.entry_point == "kernel.py::scale_rows");
  CHECK(s.destination_passing == false);  // value-returning, as the Solution says
  CHECK(s.sources.size() == 2);
  // Malformed ones.
  const std::string good = util::read_file(kFixture / "published/scale_rows_python.json");
  auto error_of = [&](const std::string& from, const std::string& to) { return import_error(good, t, from, to); };
  // A cuda Solution's entry file is C++ or CUDA, as FlashInfer-Bench requires.
  CHECK(error_of("\"language\": \"python\"", "\"language\": \"cuda\"")
            .find("spec.entry_point \"kernel.py::scale_rows\" names kernel.py, and the entry file of a cpp or cuda "
                  "Solution is a .cu, .cpp, .cc, .cxx or .c file") != std::string::npos);
  CHECK(error_of("\"language\": \"python\"", "\"language\": \"tilelang\"").find("spec.language \"tilelang\"") !=
        std::string::npos);
  CHECK(error_of("\"definition\": \"scale_d64\"", "\"definition\": \"gemm_n4096\"")
            .find("(its \"definition\") is for definition \"gemm_n4096\"") != std::string::npos);
  CHECK(error_of("\"entry_point\": \"kernel.py::scale_rows\",", "").find("entry_point") != std::string::npos);
  CHECK(error_of("\"path\": \"helpers.py\"", "\"path\": \"../helpers.py\"").find("..") != std::string::npos);
  CHECK(error_of("\"sources\": [", "\"sourcez\": [").find("sources") != std::string::npos);
  CHECK(message_of([&] { parse_solution_text(good.substr(0, good.size() / 2), t); })
            .find("looks like solution JSON, but it is not valid JSON") != std::string::npos);
}

namespace {

Json fixture_json(const std::string& file) { return Json::parse(util::read_file(kFixture / file)); }

}  // namespace

TEST_CASE("import: cpp and cuda Solutions become a Python module that builds them, per binding and schema") {
  auto task = load_task(kDefinition.string());
  const TaskSpec& t = task->spec();
  // K-Search's schema: no binding, no destination_passing_style, a
  // PYBIND11_MODULE whose run returns the outputs.
  const Json old = fixture_json("published/scale_rows_cuda_kernel_old.json");
  Solution s = load_solution_file(kFixture / "published/scale_rows_cuda_kernel_old.json", t);
  CHECK(s.language == Language::python);
  CHECK(s.name == "scale_rows_cuda_old_schema");
  CHECK(s.task == kTask);
  REQUIRE(s.sources.size() == 1);
  CHECK(s.sources[0].path == "fib_extension.py");
  CHECK(s.entry_point == "fib_extension.py::run");
  CHECK(s.destination_passing == false);
  const std::string& module = s.sources[0].content;
  CHECK(module.find("cpp_extension.load(") != std::string::npos);
  CHECK(module.find("SOLUTION = _json.loads(\"{") != std::string::npos);
  auto fib = core::extension_solution_of(s);
  REQUIRE(fib);
  CHECK(fib->at("sources").dump() == old.at("sources").dump());  // every file as it was
  CHECK(fib->at("spec").get_string("binding") == "torch");
  CHECK(fib->at("spec").get_bool("destination_passing_style", true) == false);
  CHECK(fib->at("spec").get_string("entry_point") == "main.cpp::run");
  CHECK(fib->get_string("author") == "someone else");

  // binding torch, destination-passing by default.
  Solution torch = load_solution_file(kFixture / "published/scale_rows_cpp_torch.json", t);
  CHECK(torch.destination_passing == true);
  CHECK(torch.entry_point == "fib_extension.py::run");
  CHECK(core::extension_solution_of(torch)->at("spec").get_string("binding") == "torch");
  CHECK(torch.id != s.id);

  // No binding and no PYBIND11_MODULE: FlashInfer-Bench's default, tvm-ffi.
  Solution tvm = load_solution_file(kFixture / "published/scale_rows_cuda_tvm_ffi.json", t);
  CHECK(tvm.destination_passing == true);
  CHECK(core::extension_solution_of(tvm)->at("spec").get_string("binding") == "tvm-ffi");

  // An edited module is an ordinary Python solution (exported as one).
  Solution edited = s;
  edited.sources[0].content += "# tuned\n";
  CHECK_FALSE(core::extension_solution_of(edited));

  // Malformed ones name the field.
  const std::string good = util::read_file(kFixture / "published/scale_rows_cuda_kernel_old.json");
  auto error_of = [&](const std::string& from, const std::string& to) { return import_error(good, t, from, to); };
  CHECK(error_of("\"language\": \"cuda\"", "\"language\": \"tilelang\"")
            .find("spec.language \"tilelang\" is not one libksearch runs") != std::string::npos);
  CHECK(error_of("\"language\": \"cuda\"", "\"language\": \"rust\"")
            .find("spec.language \"rust\" is not one FlashInfer-Bench has") != std::string::npos);
  CHECK(error_of("\"main.cpp::run\"", "\"binding.cpp::run\"")
            .find("spec.entry_point \"binding.cpp::run\" names binding.cpp, which is not among its "
                  "sources[].path") != std::string::npos);
  CHECK(error_of("\"main.cpp::run\"", "\"main.cpp:run\"").find("exactly one \"::\"") != std::string::npos);
  CHECK(error_of("\"main.cpp::run\"", "\"main.cpp::run::again\"").find("exactly one \"::\"") !=
        std::string::npos);
  CHECK(error_of("\"main.cpp::run\"", "\"kernel.h::run\"").find("the entry file of a cpp or cuda Solution") !=
        std::string::npos);
  CHECK(error_of("\"main.cpp::run\"", "\"main.cpp::1run\"").find("does not end in a function name") !=
        std::string::npos);
  CHECK(error_of("\"dependencies\": []", "\"dependencies\": [], \"binding\": \"pybind\"")
            .find("spec.binding \"pybind\" is not one FlashInfer-Bench has") != std::string::npos);
  CHECK(error_of("\"dependencies\": []", "\"dependencies\": [], \"destination_passing_style\": 1")
            .find("spec.destination_passing_style must be true or false") != std::string::npos);
}

TEST_CASE("export: an imported cpp or cuda Solution goes back as that Solution, binding and style written out") {
  auto task = load_task(kDefinition.string());
  Solution s = load_solution_file(kFixture / "published/scale_rows_cuda_kernel_old.json", task->spec());
  ExportOptions o;
  o.format = ExportFormat::flashinfer;
  ExportResult r = export_solution(*task, s, o);
  CHECK(r.default_file_name == "scale_rows_cuda_old_schema.json");
  const Json out = Json::parse(r.content);
  Json expected = fixture_json("published/scale_rows_cuda_kernel_old.json");
  (*expected.find("spec"))["binding"] = "torch";
  (*expected.find("spec"))["destination_passing_style"] = false;
  CHECK(out.dump() == expected.dump());
  // Read again, it is the same solution.
  CHECK(parse_solution_text(r.content, task->spec()).id == s.id);
  // A new-schema Solution comes back as it was written.
  Solution torch = load_solution_file(kFixture / "published/scale_rows_cpp_torch.json", task->spec());
  Json torch_json = fixture_json("published/scale_rows_cpp_torch.json");
  (*torch_json.find("spec"))["destination_passing_style"] = true;
  CHECK(Json::parse(export_solution(*task, torch, o).content).dump() == torch_json.dump());
}

TEST_CASE("import: the published Solution runs on the CPU and is scored against the measured FlashInfer solution") {
  const char* py = std::getenv("KSEARCH_PYTHON");
  if (!py || !*py || std::string(py) == "NONE") {
    MESSAGE("skipped: no Python with PyTorch ($KSEARCH_PYTHON)");
    return;
  }
  TaskSources s;
  s.measure_baseline = true;
  auto task = load_task(kDefinition.string(), s);
  Solution sol = load_solution_file(kFixture / "published/scale_rows_python.json", task->spec());
  EvaluatorConfig c;
  c.backend = ks::EvalBackend::host;
  c.cache_dir = test::scratch_dir("traces_import_cache");
  c.options.max_time_per_workload_s = 0.02;
  c.options.only_workloads = {uuid(1), uuid(2)};
  auto ev = make_evaluator(c);
  EvalResult r = ev->evaluate(*task, sol);
  INFO(r.to_json().dump(1));
  REQUIRE(r.passed());
  REQUIRE(r.workloads.size() == 2);
  for (const auto& w : r.workloads) CHECK(w.baseline_ms > 0);  // the dataset's python solution, measured here
  CHECK(r.vs_baseline > 0);
  const Json src = baseline_sources(task->spec(), ev->options(), r.device, sol.language);
  CHECK(src["workloads"][uuid(1)].get_string("source") == "measured");
  CHECK(src["workloads"][uuid(1)].get_string("solution") == "flashinfer_wrapper_5ca1e");
}

TEST_CASE("import: a cpp Solution with a PyTorch binding is built and run on the CPU, its build reused") {
  const char* py = std::getenv("KSEARCH_PYTHON");
  if (!py || !*py || std::string(py) == "NONE") {
    MESSAGE("skipped: no Python with PyTorch ($KSEARCH_PYTHON)");
    return;
  }
  TaskSources src;
  src.baseline_solution = "none";  // the traces are of GPUs; scored by latency here
  auto task = load_task(kDefinition.string(), src);
  EvaluatorConfig c;
  c.backend = ks::EvalBackend::host;
  c.cache_dir = test::scratch_dir("traces_extension_cache");
  c.options.max_time_per_workload_s = 0.02;
  c.options.only_workloads = {uuid(1), uuid(3)};
  auto evaluate = [&](const Solution& s) {
    auto ev = make_evaluator(c);  // a new evaluator and worker each time: only the cache is shared
    EvalResult r = ev->evaluate(*task, s);
    INFO(r.to_json().dump(1));
    return r;
  };
  // Destination-passing (binding torch): built when its module is imported,
  // the build's time counted as compile time.
  Solution dps = load_solution_file(kFixture / "published/scale_rows_cpp_torch.json", task->spec());
  EvalResult first = evaluate(dps);
  REQUIRE(first.passed());
  const double built = first.metrics.get_number("extension_build_s");
  CHECK(built > 0);
  CHECK(first.metrics.get_number("compile_s") >= built);
  // Evaluated again: the worker hands the library it kept to the new
  // process, which builds nothing; the kept file is not written again.
  const auto libraries = extension_libraries(c.cache_dir);
  REQUIRE(libraries.size() == 1);
  EvalResult again = evaluate(dps);
  REQUIRE(again.passed());
  CHECK_FALSE(again.metrics.contains("extension_build_s"));
  CHECK(extension_libraries(c.cache_dir) == libraries);

  // The older schema: run returns the output.
  Solution returning = load_solution_file(kFixture / "published/scale_rows_cpp_pybind_returning.json", task->spec());
  CHECK(returning.destination_passing == false);
  CHECK(evaluate(returning).passed());

  // A source that does not compile: compile_error with the compiler's line.
  Json broken = fixture_json("published/scale_rows_cpp_torch.json");
  (*broken.find("sources"))[0]["content"] = "#pragma once\nthis is not C++;\n";
  Solution bad = parse_solution_text(broken.dump(), task->spec());
  EvalResult b = evaluate(bad);
  INFO(b.to_json().dump(1));
  CHECK(b.status == EvalStatus::compile_error);
  CHECK(b.to_json().dump().find("did not build") != std::string::npos);
  CHECK(b.to_json().dump().find("scale.h:2") != std::string::npos);

  Solution tvm = load_solution_file(kFixture / "published/scale_rows_cpp_tvm_ffi.json", task->spec());
  if (std::system((std::string(py) + " -c 'import tvm_ffi.cpp' 2>/dev/null").c_str()) == 0) {
    // binding tvm-ffi (FlashInfer-Bench's default): built by tvm_ffi.cpp.build,
    // its function called with DLPack views of the tensors, the build reused.
    const std::size_t torch_builds = extension_libraries(c.cache_dir).size();
    EvalResult t = evaluate(tvm);
    REQUIRE(t.passed());
    CHECK(t.metrics.get_number("extension_build_s") > 0);
    const auto built_tvm = extension_libraries(c.cache_dir);
    CHECK(built_tvm.size() == torch_builds + 1);
    const EvalResult tvm_again = evaluate(tvm);
    CHECK(tvm_again.passed());
    CHECK_FALSE(tvm_again.metrics.contains("extension_build_s"));
    CHECK(extension_libraries(c.cache_dir) == built_tvm);
    // Its compiler's error, as for the torch binding.
    Json broken_tvm = fixture_json("published/scale_rows_cpp_tvm_ffi.json");
    (*broken_tvm.find("sources"))[0]["content"] = "#pragma once\nthis is not C++ either;\n";
    EvalResult bt = evaluate(parse_solution_text(broken_tvm.dump(), task->spec()));
    INFO(bt.to_json().dump(1));
    CHECK(bt.status == EvalStatus::compile_error);
    CHECK(bt.to_json().dump().find("scale.h:2") != std::string::npos);
  } else {
    // binding tvm-ffi without the tvm_ffi package: what is missing and the way out.
    MESSAGE("tvm-ffi binding: only its error without the package (" << std::string(py) << " cannot import tvm_ffi)");
    EvalResult t = evaluate(tvm);
    CHECK(t.status == EvalStatus::compile_error);
    const std::string text = t.to_json().dump();
    CHECK(text.find("spec.binding \\\"tvm-ffi\\\" needs the Python package apache-tvm-ffi") != std::string::npos);
    CHECK(text.find("re-export the Solution with spec.binding \\\"torch\\\"") != std::string::npos);
  }
}
