// metrics.phases end to end on the host backend: real compilations and real
// worker processes. Every result carries every phase; the phases add up to
// at most the evaluation's wall time; and each is charged where it happened
// (a worker's start to the evaluation that started it, the reference's
// compile to the first candidate that needed it, nothing after a failed
// compile). No figure is compared with a time limit.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "fixtures.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "phase_checks.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
using ks::test::checked_phases;
using ks::test::vadd_candidate;

namespace {

using Clock = std::chrono::steady_clock;

struct Timed {
  EvalResult result;
  double wall_s = 0;
};

Timed timed(Evaluator& ev, const Task& task, const Solution& s) {
  const auto t0 = Clock::now();
  Timed t{ev.evaluate(task, s)};
  t.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return t;
}

// The worker's phases: zero after a compile error or a dead worker.
const char* kWorkerPhases[] = {"load_s", "setup_s", "inputs_s", "reference_s", "reference_timing_s",
                               "checks_s", "timing_s", "recheck_s", "transfers_s"};

}  // namespace

TEST_CASE("phases: a passing host candidate, cold and then warm, accounts for its time") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("phases_host").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());

  const Timed cold = timed(*ev, task, vadd_candidate(ks::test::kGoodBody, "cold"));
  REQUIRE(cold.result.status == EvalStatus::passed);
  const Json c = checked_phases(cold.result, cold.wall_s);
  INFO(c.dump());
  // The first evaluation started the worker, compiled both programs, and
  // did every step of the flow.
  CHECK(c.get_number("worker_start_s") + c.get_number("sandbox_setup_s") > 0);
  CHECK(c.get_number("compile_s") > 0);
  CHECK(c.get_number("reference_compile_s") > 0);
  for (const char* k : kWorkerPhases) CHECK_MESSAGE(c.get_number(k) > 0, k);
  CHECK(c.get_number("oracle_s") == 0);
  CHECK(c.get_number("baseline_s") == 0);
  CHECK(cold.result.metrics.get_int("compile_cache_hits") == 0);

  // The same candidate again: the worker, the reference's build and its
  // latency are the evaluator's already; the compile is a cache hit.
  const Timed warm = timed(*ev, task, vadd_candidate(ks::test::kGoodBody, "cold"));
  REQUIRE(warm.result.status == EvalStatus::passed);
  const Json w = checked_phases(warm.result, warm.wall_s);
  INFO(w.dump());
  CHECK(w.get_number("worker_start_s") == 0);
  CHECK(w.get_number("sandbox_setup_s") == 0);
  CHECK(w.get_number("reference_compile_s") == 0);
  // Timed beside the candidate in every evaluation (pair_reference).
  CHECK(w.get_number("reference_timing_s") > 0);
  for (const auto& wl : warm.result.workloads) CHECK(wl.paired == wl.benchmark);
  CHECK(warm.result.metrics.get_int("compile_cache_hits") == 1);
  for (const char* k : {"inputs_s", "reference_s", "checks_s", "timing_s", "recheck_s"})
    CHECK_MESSAGE(w.get_number(k) > 0, k);
}

TEST_CASE("phases: a compile error has no phase after the compile; a dead worker's time is other_s") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("phases_failures").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());

  const Timed broken = timed(*ev, task, vadd_candidate("this is not C++;", "broken"));
  REQUIRE(broken.result.status == EvalStatus::compile_error);
  const Json b = checked_phases(broken.result, broken.wall_s);
  INFO(b.dump());
  CHECK(b.get_number("compile_s") > 0);
  CHECK(b.get_number("reference_compile_s") > 0);  // the first candidate of this evaluator
  CHECK(b.get_number("worker_start_s") == 0);       // no run worker was needed
  CHECK(b.get_number("sandbox_setup_s") == 0);
  for (const char* k : kWorkerPhases) CHECK_MESSAGE(b.get_number(k) == 0, k);

  // A host candidate that crashes ends only its own process: the worker
  // lives on and says where the time went.
  const Timed crash = timed(*ev, task, vadd_candidate(ks::test::kSegfaultBody, "segfault"));
  REQUIRE(crash.result.status == EvalStatus::crashed);
  const Json x = checked_phases(crash.result, crash.wall_s);
  INFO(x.dump());
  CHECK(x.get_number("worker_start_s") + x.get_number("sandbox_setup_s") > 0);  // the first run worker
  CHECK(x.get_number("checks_s") > 0);
  CHECK(x.get_number("timing_s") == 0);

  // A worker killed for hanging sends no phases: the time it had is other_s
  // (at least the run timeout it was given).
  ev->options().run_timeout_s = 1;
  const Timed hang = timed(*ev, task, vadd_candidate(ks::test::kEndlessBody, "endless"));
  REQUIRE(hang.result.status == EvalStatus::timeout);
  const Json h = checked_phases(hang.result, hang.wall_s);
  INFO(h.dump());
  CHECK(h.get_number("worker_start_s") == 0);
  for (const char* k : kWorkerPhases) CHECK_MESSAGE(h.get_number(k) == 0, k);
  CHECK(h.get_number("other_s") >= 1.0);

  // The next evaluation pays for the fresh worker, and is accounted again.
  ev->options().run_timeout_s = 20;
  const Timed after = timed(*ev, task, vadd_candidate(ks::test::kGoodBody, "after"));
  REQUIRE(after.result.status == EvalStatus::passed);
  const Json a = checked_phases(after.result, after.wall_s);
  CHECK(a.get_number("worker_start_s") + a.get_number("sandbox_setup_s") > 0);
  CHECK(a.get_number("checks_s") > 0);
}

TEST_CASE("phases: a batch charges the reference's compile once, and each result its own compile") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("phases_batch").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());
  const std::vector<Solution> batch = {vadd_candidate(ks::test::kGoodBody, "a"), vadd_candidate(ks::test::kWrongBody, "b"),
                                       vadd_candidate("this is not C++;", "c")};
  const auto t0 = Clock::now();
  const auto results = ev->evaluate_batch(task, batch);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  REQUIRE(results.size() == 3);
  std::vector<Json> p;
  for (const auto& r : results) p.push_back(checked_phases(r, wall));
  CHECK(p[0].get_number("reference_compile_s") > 0);
  CHECK(p[1].get_number("reference_compile_s") == 0);
  CHECK(p[2].get_number("reference_compile_s") == 0);
  for (const auto& x : p) CHECK(x.get_number("compile_s") > 0);
  CHECK(p[1].get_number("checks_s") > 0);  // incorrect: found by the checks
  CHECK(p[1].get_number("timing_s") == 0);
  CHECK(p[2].get_number("checks_s") == 0);
}

TEST_CASE("phases: the in-process evaluator reports the same phases") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("phases_inproc").string());
  cfg.in_process = true;
  auto ev = make_evaluator(cfg);
  SpecTask task(ks::test::vadd_task());
  const Timed t = timed(*ev, task, vadd_candidate(ks::test::kGoodBody));
  REQUIRE(t.result.status == EvalStatus::passed);
  const Json p = checked_phases(t.result, t.wall_s);
  INFO(p.dump());
  for (const char* k : {"compile_s", "reference_compile_s", "inputs_s", "reference_s", "checks_s", "timing_s"})
    CHECK_MESSAGE(p.get_number(k) > 0, k);
  CHECK(p.get_number("transfers_s") == 0);  // no protocol, no copies on the host
}

TEST_CASE("phases: the reference's latencies outlive the evaluator, per device identity and timing rules") {
  const auto dir = ks::test::scratch_dir("phases_ref_times");
  auto cfg = ks::test::test_config(dir.string());
  cfg.options.pair_reference = false;  // the cache is for a reference timed alone
  SpecTask task(ks::test::vadd_task());
  auto reference_ms = [](const EvalResult& r) {
    std::vector<double> out;
    for (const auto& w : r.workloads)
      if (w.benchmark) out.push_back(w.reference_ms);
    return out;
  };
  auto same_latencies = [](const std::vector<double>& a, const std::vector<double>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-9));
  };

  const Timed first = timed(*make_evaluator(cfg), task, vadd_candidate(ks::test::kGoodBody, "first"));
  REQUIRE(first.result.status == EvalStatus::passed);
  CHECK(checked_phases(first.result, first.wall_s).get_number("reference_timing_s") > 0);
  const auto measured = reference_ms(first.result);
  REQUIRE(!measured.empty());
  for (double ms : measured) CHECK(ms > 0);

  // A new evaluator on the same cache (a fresh `ksearch eval`) reads them back.
  const Timed again = timed(*make_evaluator(cfg), task, vadd_candidate(ks::test::kGoodBody, "again"));
  REQUIRE(again.result.status == EvalStatus::passed);
  CHECK(checked_phases(again.result, again.wall_s).get_number("reference_timing_s") == 0);
  same_latencies(reference_ms(again.result), measured);

  // Other timing rules are another identity: measured again.
  auto other_rules = cfg;
  other_rules.options.flush_l2 = !cfg.options.flush_l2;
  const Timed other = timed(*make_evaluator(other_rules), task, vadd_candidate(ks::test::kGoodBody, "other"));
  REQUIRE(other.result.status == EvalStatus::passed);
  CHECK(checked_phases(other.result, other.wall_s).get_number("reference_timing_s") > 0);

  // A torn or foreign file is a miss, measured again and rewritten.
  int damaged = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir / "reference-times")) {
    ks::util::write_file_atomic(f.path(), ++damaged % 2 ? "{\"key\": \"someone else\", \"ms\": 1e-9}" : "{\"ms\"");
  }
  REQUIRE(damaged > 0);
  const Timed repaired = timed(*make_evaluator(cfg), task, vadd_candidate(ks::test::kGoodBody, "repaired"));
  REQUIRE(repaired.result.status == EvalStatus::passed);
  CHECK(checked_phases(repaired.result, repaired.wall_s).get_number("reference_timing_s") > 0);
  for (double ms : reference_ms(repaired.result)) CHECK(ms > 1e-6);
  const Timed read_back = timed(*make_evaluator(cfg), task, vadd_candidate(ks::test::kGoodBody, "read back"));
  CHECK(checked_phases(read_back.result, read_back.wall_s).get_number("reference_timing_s") == 0);
  same_latencies(reference_ms(read_back.result), reference_ms(repaired.result));
}
