// eval::Deadline: when the parent stops waiting for the worker, as the steps
// the worker reports move it (the clock is passed in, so nothing sleeps).
#include <doctest/doctest.h>

#include "eval/deadline.hpp"

using ks::eval::Deadline;
using ks::eval::FlowPhase;

namespace {

const Deadline::Clock::time_point t0{};

Deadline::Clock::time_point at(double s) {
  return t0 + std::chrono::duration_cast<Deadline::Clock::duration>(std::chrono::duration<double>(s));
}

double secs(Deadline::Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); }

}  // namespace

TEST_CASE("deadline: loading gets the grace, each workload starts afresh") {
  Deadline d(60, 10, at(0));
  CHECK(secs(d.at()) == doctest::Approx(70));
  CHECK(d.load_allowed_s() == doctest::Approx(70));
  d.workload_started(at(5));
  CHECK(secs(d.at()) == doctest::Approx(65));
  CHECK(d.allowed_s() == doctest::Approx(60));
  CHECK(d.step().detail == "starting the workload");
  CHECK_FALSE(d.step().reference);
}

TEST_CASE("deadline: a step's allowance is added when it starts") {
  Deadline d(60, 10, at(0));
  d.workload_started(at(0));
  d.enter(FlowPhase{"timing", "timing the kernel", 12}, at(20));
  CHECK(secs(d.at()) == doctest::Approx(72));
  CHECK(d.allowed_s() == doctest::Approx(72));
  d.enter(FlowPhase{"timed-check", "checking the timed calls", 0}, at(30));
  CHECK(secs(d.at()) == doctest::Approx(72));
  CHECK(d.step().name == "timed-check");
  // The next workload starts with run_timeout_s alone.
  d.workload_started(at(40));
  CHECK(d.allowed_s() == doctest::Approx(60));
  CHECK(secs(d.at()) == doctest::Approx(100));
}

TEST_CASE("deadline: the reference runs on a clock of its own; the candidate's resumes") {
  Deadline d(60, 10, at(0));
  d.workload_started(at(0));
  d.enter(FlowPhase{"checks", "running the kernel", 0}, at(15));  // 45 s left
  FlowPhase ref{"reference", "timing the reference", 5, true};
  d.enter(ref, at(20));
  CHECK(d.step().reference);
  CHECK(d.reference_allowed_s() == doctest::Approx(65));
  CHECK(secs(d.at()) == doctest::Approx(85));
  // A second reference step does not touch what the candidate had left.
  d.enter(FlowPhase{"reference", "checking the reference", 0, true}, at(50));
  CHECK(secs(d.at()) == doctest::Approx(110));
  // Back to the candidate, 200 s later: its 40 s left, from now.
  d.enter(FlowPhase{"timing", "timing the kernel", 3}, at(250));
  CHECK(secs(d.at()) == doctest::Approx(293));
  CHECK(d.allowed_s() == doctest::Approx(63));
  CHECK_FALSE(d.step().reference);
}

TEST_CASE("deadline: a candidate already past its time resumes with none left") {
  Deadline d(1, 0, at(0));
  d.workload_started(at(0));
  d.enter(FlowPhase{"reference", "loading the reference", 0, true}, at(5));  // 1 s limit, 5 s gone
  d.enter(FlowPhase{"checks", "running the kernel", 0}, at(6));
  CHECK(secs(d.at()) == doctest::Approx(6));
}
