// The evaluator end to end on the host backend: real compilations, real
// worker processes, and candidates that are wrong, crash, hang, overrun their
// buffers, tamper with inputs or cache results.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "eval/isolation/sandbox.hpp"
#include "fixtures.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"

using namespace ks;
using ks::test::vadd_candidate;

namespace {

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

const WorkloadResult* last_workload(const EvalResult& r) { return r.workloads.empty() ? nullptr : &r.workloads.back(); }

std::string failure_message(const EvalResult& r) {
  const WorkloadResult* w = last_workload(r);
  return w ? w->message : r.log;
}

}  // namespace

TEST_CASE("evaluator: one evaluator survives crashing, hanging and cheating candidates") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_gauntlet").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());

  // A good kernel passes, is timed, and is compared with the timed reference.
  EvalResult good = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "good"));
  INFO(good.to_json().dump(2));
  REQUIRE(good.status == EvalStatus::passed);
  REQUIRE(good.workloads.size() == 2);
  CHECK(good.workloads[0].name == "t1");
  CHECK_FALSE(good.workloads[0].benchmark);
  CHECK(good.workloads[0].timing.count == 0);
  CHECK(good.workloads[1].name == "b1");
  CHECK(good.workloads[1].timing.count >= 3);
  CHECK(good.workloads[1].timing.min_ms > 0);
  CHECK(good.workloads[1].reference_ms > 0);
  CHECK(good.latency_ms > 0);
  CHECK(good.speedup > 0);
  CHECK(good.metrics.get_int("reference_runs") == 5);  // 2 seeds on t1; 2 seeds + re-check on b1
  const auto first_pid = good.metrics.get_int("worker_pid");

  SUBCASE("failures, each with the right status, and the next candidate still evaluates") {
    struct Case {
      const char* name;
      const char* body;
      EvalStatus status;
      std::vector<std::string> words;
    };
    std::vector<Case> cases = {
        {"wrong", ks::test::kWrongBody, EvalStatus::incorrect, {"differ from the reference", "Z[", "output \"Z\""}},
        {"segfault", ks::test::kSegfaultBody, EvalStatus::crashed,
         {"signal 11", "SIGSEGV", "0x40", "(running the kernel on input seed 1 of 2)"}},
        {"far-overrun", ks::test::kFarOverrunBody, EvalStatus::crashed,
         {"out-of-bounds write at byte offset", "(past the end) of output \"Z\", which has 4000 bytes"}},
        {"near-overrun", ks::test::kNearOverrunBody, EvalStatus::runtime_error,
         {"4 bytes past the end of output \"Z\""}},
        {"modifies-input", ks::test::kModifyInputBody, EvalStatus::incorrect, {"modified input \"X\"", "X[500]"}},
        {"skips-last", ks::test::kSkipLastBody, EvalStatus::incorrect,
         {"never written", "Z[999]", "copied from scratch"}},
        {"throws", ks::test::kThrowBody, EvalStatus::runtime_error, {"boom from the kernel"}},
        {"exits", ks::test::kExitBody, EvalStatus::crashed, {"exited with code 0"}},
        {"compile-error", "this is not C++", EvalStatus::compile_error, {"error"}},
    };
    for (const auto& c : cases) {
      CAPTURE(c.name);
      EvalResult r = ev->evaluate(task, vadd_candidate(c.body, c.name));
      INFO(r.to_json().dump(2));
      CHECK(r.status == c.status);
      CHECK(r.score == 0);
      std::string text = failure_message(r) + "\n" + r.log;
      for (const auto& w : c.words) CHECK_MESSAGE(contains(text, w), "missing \"" << w << "\"");
      if (c.status != EvalStatus::compile_error) {
        REQUIRE(last_workload(r));
        CHECK(last_workload(r)->name == "t1");
      }
      // After every failure the evaluator goes on, in a fresh worker when the old one died.
      EvalResult after = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "good-after"));
      CHECK(after.status == EvalStatus::passed);
      // A host candidate runs in a process of its own: a crash or an exit
      // ends that process, never the worker or the references it holds.
      CHECK_FALSE(r.metrics.get_bool("worker_restarted"));
      CHECK(after.metrics.get_int("worker_pid") == first_pid);
      CHECK(after.metrics.get_int("reference_runs") == 0);
      if (c.status != EvalStatus::compile_error) CHECK(after.metrics.get_int("reference_memory_hits") > 0);
    }
  }

  SUBCASE("a kernel that stops computing after the checks is caught at its timed calls") {
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kCachingBody, "caching"));
    INFO(r.to_json().dump(2));
    CHECK(r.status == EvalStatus::incorrect);
    REQUIRE(r.workloads.size() == 2);
    CHECK(r.workloads[0].status == EvalStatus::passed);  // t1: two calls only, both computed
    CHECK(r.workloads[1].name == "b1");
    CHECK(contains(r.workloads[1].message, "the timed calls did not compute the result"));
  }

  SUBCASE("a kernel that replays its last result passes the timed calls and is caught by the re-check") {
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kReplayBody, "replay"));
    INFO(r.to_json().dump(2));
    CHECK(r.status == EvalStatus::incorrect);
    REQUIRE(r.workloads.size() == 2);
    CHECK(r.workloads[0].status == EvalStatus::passed);
    CHECK(r.workloads[1].name == "b1");
    CHECK(contains(r.workloads[1].message, "re-check after timing"));
    CHECK(contains(r.workloads[1].message, "outputs for the inputs of the timed calls"));
    CHECK(contains(r.workloads[1].message, "reuses results"));
  }

  SUBCASE("a kernel that is merely wrong on the re-check's inputs is not accused of reusing results") {
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kWrongLaterBody, "wrong-later"));
    INFO(r.to_json().dump(2));
    CHECK(r.status == EvalStatus::incorrect);
    REQUIRE(r.workloads.size() == 2);
    CHECK(contains(r.workloads[1].message, "re-check after timing"));
    CHECK(contains(r.workloads[1].message, "differ from the reference"));
    CHECK_FALSE(contains(r.workloads[1].message, "reuses results"));
  }

  SUBCASE("a kernel that skips work on inputs it has seen fails the check of its timed calls") {
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kSkipUnchangedBody, "skips-unchanged"));
    INFO(r.to_json().dump(2));
    CHECK(r.status == EvalStatus::incorrect);
    REQUIRE(r.workloads.size() == 2);
    CHECK(r.workloads[0].status == EvalStatus::passed);
    CHECK(r.workloads[1].name == "b1");
    CHECK(contains(r.workloads[1].message, "the timed calls did not compute the result"));
    CHECK(contains(r.workloads[1].message, "never written"));
    CHECK_FALSE(contains(r.workloads[1].message, "re-check"));
  }

  SUBCASE("a kernel that returns early when its output holds a result is timed doing the work") {
    // Outputs are poisoned before every timed call, so the early exit never
    // triggers: every timed call sleeps its 2 ms (a lower bound, not a speed claim).
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kEarlyExitBody, "early-exit"));
    INFO(r.to_json().dump(2));
    CHECK(r.status == EvalStatus::passed);
    REQUIRE(r.workloads.size() == 2);
    CHECK(r.workloads[1].timing.count >= 3);
    CHECK(r.workloads[1].timing.min_ms >= 2.0);
  }

  SUBCASE("an endless loop is killed at the run timeout and recorded as timeout") {
    ev->options().run_timeout_s = 1.5;
    auto t0 = std::chrono::steady_clock::now();
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kEndlessBody, "endless"));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(r.to_json().dump(2));
    CHECK(r.status == EvalStatus::timeout);
    REQUIRE(last_workload(r));
    CHECK(last_workload(r)->name == "t1");
    CHECK(contains(last_workload(r)->message, "did not finish within 1.5 s"));
    CHECK(contains(last_workload(r)->message, "killed while running the kernel on input seed 1 of 2"));
    // The message shows which limit ended it; the wall time (compile included) depends on the machine's load.
    MESSAGE("the endless candidate ended after " << s << " s");
    ev->options().run_timeout_s = 20;
    CHECK(ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "good-after-hang")).status == EvalStatus::passed);
  }

  SUBCASE("output on stdout cannot disturb the protocol") {
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kChattyBody, "chatty"));
    INFO(r.to_json().dump(2));
    CHECK(r.status == EvalStatus::passed);
  }
}

TEST_CASE("evaluator: a failing task reference is an error of the evaluation, not the candidate's status") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_reference_fault").string());
  auto ev = make_evaluator(cfg);
  TaskSpec broken = ks::test::vadd_task("2*N", "test/vadd-broken-reference");
  broken.references.at(Language::cpp).sources[0].content =
      "#include <cstdint>\n#include <stdexcept>\n"
      "void vadd_ref(const float*, const float*, float*, std::int64_t) { throw std::runtime_error(\"no\"); }\n";
  broken.references.at(Language::cpp).finalize();
  try {
    ev->evaluate(SpecTask(broken), vadd_candidate(ks::test::kGoodBody));
    FAIL("the reference's failure became the candidate's result");
  } catch (const ks::Error& e) {
    CHECK(contains(e.what(), "the task's reference failed while computing the reference outputs for input seed 1"));
    CHECK(contains(e.what(), "no"));
  }
  // The evaluator carries on with a sound task.
  CHECK(ev->evaluate(SpecTask(ks::test::vadd_task()), vadd_candidate(ks::test::kGoodBody)).status ==
        EvalStatus::passed);
}

TEST_CASE("evaluator: timing caps come on top of the run timeout, and the reference's time is its own") {
  // run_timeout_s 1 s; each timing may take up to its wall cap (0.5 s) and
  // both sides take 50 ms per call: checks, the reference's timing and the
  // candidate's timing need about 1.3 s together, more than the run timeout.
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_deadlines").string());
  cfg.options.run_timeout_s = 1.0;
  cfg.options.max_time_per_workload_s = 0.45;
  cfg.options.target_rel_stderr = 1e-12;  // time until a cap ends it
  cfg.options.only_workloads = {"b1"};
  cfg.options.pair_reference = false;  // each timing its own cap (paired, the two share one)
  auto ev = make_evaluator(cfg);
  TaskSpec spec = ks::test::vadd_task("2*N", "test/vadd-slow");
  auto& ref = spec.references.at(Language::cpp);
  ref.sources[0].content =
      "#include <chrono>\n#include <cstdint>\n#include <thread>\n"
      "void vadd_ref(const float* x, const float* y, float* z, std::int64_t n) {\n"
      "  std::this_thread::sleep_for(std::chrono::milliseconds(50));\n"
      "  for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];\n}\n";
  ref.finalize();
  EvalResult r = ev->evaluate(SpecTask(spec), vadd_candidate(ks::test::kSlowBody, "slow"));
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);
  REQUIRE(r.workloads.size() == 1);
  CHECK(r.workloads[0].timing.count >= 3);
  CHECK(r.workloads[0].reference_ms >= 50);
  CHECK(r.metrics.get_number("run_s") > 1.0);  // longer than run_timeout_s, and not killed

  // A reference that never finishes is the task's problem, reported as an error.
  TaskSpec hung = ks::test::vadd_task("2*N", "test/vadd-hung-reference");
  auto& href = hung.references.at(Language::cpp);
  href.sources[0].content =
      "#include <cstdint>\nvoid vadd_ref(const float*, const float*, float*, std::int64_t) {\n"
      "  volatile int spin = 1;\n  while (spin) {}\n}\n";
  href.finalize();
  try {
    ev->evaluate(SpecTask(hung), vadd_candidate(ks::test::kGoodBody));
    FAIL("a hanging reference became the candidate's timeout");
  } catch (const ks::Error& e) {
    CHECK(e.status() == Status::timeout);
    CHECK(contains(e.what(), "the task's reference did not finish within 1 s while computing the reference outputs"));
  }
}

TEST_CASE("evaluator: the reference is compiled without the candidate's extra flags") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_reference_flags").string());
  cfg.options.extra_compile_flags = {"-DKS_CANDIDATE_ONLY_FLAG=1"};
  cfg.options.run_benchmarks = false;
  auto ev = make_evaluator(cfg);
  TaskSpec spec = ks::test::vadd_task("2*N", "test/vadd-flags");
  auto& ref = spec.references.at(Language::cpp);
  ref.sources[0].content =
      "#ifdef KS_CANDIDATE_ONLY_FLAG\n#error the reference was compiled with the candidate's flags\n#endif\n" +
      ref.sources[0].content;
  ref.finalize();
  // The candidate does get them.
  Solution s = vadd_candidate("static_assert(KS_CANDIDATE_ONLY_FLAG == 1);\n" + std::string(ks::test::kGoodBody));
  EvalResult r = ev->evaluate(SpecTask(spec), s);
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);
}

TEST_CASE("evaluator: a batch overlaps compilation with runs and keeps input order") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_batch").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());
  std::vector<Solution> batch = {vadd_candidate(ks::test::kWrongBody, "a"), vadd_candidate(ks::test::kGoodBody, "b"),
                                 vadd_candidate(ks::test::kSegfaultBody, "c"),
                                 vadd_candidate("for (std::int64_t i = n; i-- > 0;) z[i] = 2.0f * y[i] + x[i];", "d")};
  auto results = ev->evaluate_batch(task, batch);
  REQUIRE(results.size() == 4);
  CHECK(results[0].status == EvalStatus::incorrect);
  CHECK(results[1].status == EvalStatus::passed);
  CHECK(results[2].status == EvalStatus::crashed);
  CHECK(results[3].status == EvalStatus::passed);
  for (std::size_t i = 0; i < batch.size(); ++i) CHECK(results[i].solution_id == batch[i].id);
}

TEST_CASE("evaluator: a host batch is timed only once all of it is compiled") {
  // Timing a candidate while the compiler runs on the same CPU would disturb
  // the measurement, so the host worker starts on a batch when its last
  // compilation has finished. The quick candidate's result therefore comes
  // after the slow one's compilation (a relation of the phases each result
  // reports, whatever the machine's speed); without the wait it would come
  // first, measured while the slow one compiled.
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_host_batch_order").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());
  Solution slow = vadd_candidate(ks::test::kGoodBody, "slow to compile");
  slow.sources[0].content =
      "constexpr long spin(long k) { long s = k; for (long i = 0; i < 150000; ++i) s = (s * 31 + i) % 1000003; "
      "return s; }\nstatic_assert(spin(1) + spin(2) >= 0, \"spin\");\n" +
      slow.sources[0].content;
  slow.finalize();
  const auto results = ev->evaluate_batch(task, {vadd_candidate(ks::test::kGoodBody, "quick"), slow});
  REQUIRE(results.size() == 2);
  INFO(results[0].metrics.dump(), results[1].metrics.dump());
  REQUIRE(results[0].status == EvalStatus::passed);
  REQUIRE(results[1].status == EvalStatus::passed);
  const double slow_compile = results[1].metrics.at("phases").get_number("compile_s");
  const double quick_done = results[0].metrics.at("phases").get_number("wall_s");
  CHECK(slow_compile > 0);
  CHECK(quick_done >= slow_compile);
}

TEST_CASE("evaluator: a kernel faster than the speed of light is invalid") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_sol").string());
  auto ev = make_evaluator(cfg);
  // A FLOP formula a billion times too large makes an honest kernel look impossibly fast.
  SpecTask task(ks::test::vadd_task("N*1000000000", "test/vadd-sol"));
  EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "honest"));
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::invalid);
  REQUIRE(last_workload(r));
  CHECK(last_workload(r)->name == "b1");
  CHECK(contains(last_workload(r)->message, "speed-of-light bound"));
  CHECK(contains(last_workload(r)->message, "FLOP"));
  CHECK(r.score == 0);
}

TEST_CASE("evaluator: tunable parameters compile once per distinct value set") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_params").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());
  Solution s = vadd_candidate(
      "static_assert(STEP >= 1, \"STEP\");\n"
      "for (std::int64_t i0 = 0; i0 < n; i0 += STEP)\n"
      "  for (std::int64_t i = i0; i < i0 + STEP && i < n; ++i) z[i] = x[i] + 2.0f * y[i];");
  s.params = ks::Params::from_json(Json::parse(R"({"space": {"STEP": {"values": [1, 4, 16]}}, "values": {"STEP": 4},
                                                 "per_workload": {"b1": {"STEP": 16}}})"));
  s.finalize();
  EvalResult r = ev->evaluate(task, s);
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);
  CHECK(r.metrics.get_int("builds") == 2);

  s.params = ks::Params::from_json(Json::parse(R"({"space": {"STEP": {"values": [1, 4, 16]}}, "values": {"STEP": 5}})"));
  s.finalize();
  EvalResult bad = ev->evaluate(task, s);
  CHECK(bad.status == EvalStatus::compile_error);
  CHECK(contains(bad.log, "STEP"));
}

TEST_CASE("evaluator: workload selection and configuration errors") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_select").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());
  ev->options().only_workloads = {"b1"};
  EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody));
  REQUIRE(r.workloads.size() == 1);
  CHECK(r.workloads[0].name == "b1");
  ev->options().only_workloads = {"nope"};
  CHECK_THROWS_WITH_AS(ev->evaluate(task, vadd_candidate(ks::test::kGoodBody)),
                       doctest::Contains("no workload \"nope\""), ks::Error);
  ev->options().only_workloads = {};
  ev->options().run_benchmarks = false;
  r = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody));
  REQUIRE(r.workloads.size() == 1);
  CHECK(r.workloads[0].name == "t1");
  CHECK(r.status == EvalStatus::passed);
  CHECK(r.latency_ms == 0);

  Solution cuda = vadd_candidate(ks::test::kGoodBody);
  cuda.language = Language::cuda;
  cuda.finalize();
  try {
    ev->evaluate(task, cuda);
    FAIL("a CUDA solution was accepted by a cpp-only task");
  } catch (const ks::Error& e) {
    CHECK(e.status() == Status::invalid_argument);
  }
  CHECK(ev->device().backend == "host");
}

TEST_CASE("evaluator: CUDA where there is none is Status::no_device with the reason") {
  std::string why;
  if (cuda_available(&why)) {
    MESSAGE("a CUDA device is present; the no-device path is not testable here");
    return;
  }
  CHECK_FALSE(why.empty());
  EvaluatorConfig cfg;
  cfg.backend = ks::EvalBackend::cuda;
  try {
    make_evaluator(cfg);
    FAIL("a CUDA evaluator was made without CUDA");
  } catch (const ks::Error& e) {
    CHECK(e.status() == Status::no_device);
    CHECK(contains(e.what(), why));
  }
}

TEST_CASE("evaluator: a backend or sandbox outside its set, and a sandbox it cannot keep, are refused") {
  EvaluatorConfig cfg;
  cfg.backend = static_cast<ks::EvalBackend>(9);  // a value cast from outside the set
  CHECK_THROWS_WITH_AS(make_evaluator(cfg), doctest::Contains("backend 9 is not one of auto, cuda, host"), ks::Error);
  cfg.backend = ks::EvalBackend::automatic;
  cfg.sandbox = static_cast<ks::SandboxMode>(5);
  CHECK_THROWS_WITH_AS(make_evaluator(cfg), doctest::Contains("sandbox 5 is not one of auto, on, off"), ks::Error);
  // A sandbox that is required cannot confine kernels run in this process.
  cfg.sandbox = ks::SandboxMode::required;
  cfg.in_process = true;
  CHECK_THROWS_WITH_AS(make_evaluator(cfg), doctest::Contains("cannot confine them"), ks::Error);
}

TEST_CASE("evaluator: the in-process mode runs the same flow") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_inproc").string());
  cfg.in_process = true;
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());
  EvalResult good = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody));
  INFO(good.to_json().dump(2));
  CHECK(good.status == EvalStatus::passed);
  CHECK(good.speedup > 0);
  CHECK(good.metrics.get_int("reference_runs") == 5);
  EvalResult wrong = ev->evaluate(task, vadd_candidate(ks::test::kWrongBody));
  CHECK(wrong.status == EvalStatus::incorrect);
  CHECK(wrong.metrics.get_int("reference_runs") == 0);
  EvalResult near = ev->evaluate(task, vadd_candidate(ks::test::kNearOverrunBody));
  CHECK(near.status == EvalStatus::runtime_error);
}
