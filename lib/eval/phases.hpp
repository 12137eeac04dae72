// Where an evaluation's time goes: one wall-clock figure per phase, in
// `metrics.phases` of every result (docs/evaluation.md, "Phases").
//
// The phases are exclusive: a second belongs to the innermost phase in
// progress (reading a workload's data file during set-up counts as inputs,
// not set-up), so they add up, and `other_s` is the evaluation's wall time
// less their sum. The worker measures the flow's phases with a PhaseClock
// and sends them in its `finished` message; the parent adds its own
// (compiling, starting workers, the protocol's round trip, an oracle's work).
#pragma once

#include <array>
#include <chrono>
#include <string_view>

#include "ksearch/json.hpp"

namespace ks::eval {

// Seconds on the steady clock since `t`: how every phase and wait is measured.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// In the order of docs/evaluation.md and of metrics.phases.
enum class Phase : int {
  worker_start,       // starting worker processes (their own start-up; sandbox_setup excluded)
  sandbox_setup,      // spawn to the worker's main(): bubblewrap's set-up, exec
  compile,            // the candidate's compilation, as the parent waited for it
  reference_compile,  // the task's reference, compiled by the evaluation that needed it first
  oracle,             // a reference oracle's start, data preparation and baselines
  load,               // loading programs: module loads, candidate processes
  setup,              // allocating a workload's buffers, binding plans
  inputs,             // drawing inputs (all seeds), reading inputs given as data
  reference,          // reference outputs computed, or fetched from memory or a file
  reference_timing,   // timing the task's reference
  checks,             // checked runs and comparisons, and the check of the last timed call
  timing,             // warm-up and timed repetitions (poisoning and cache flushes included)
  recheck,            // the re-check after timing
  transfers,          // host<->device copies, handovers, the protocol's round trip
  baseline,           // evaluating a task's baseline solution (scored tasks, once per device)
  count
};
inline constexpr int kPhaseCount = static_cast<int>(Phase::count);

// "worker_start_s", ... : the key of `p` in metrics.phases.
std::string_view phase_key(Phase p);
// The keys besides the phases: wall time less their sum, and the wall time.
inline constexpr std::string_view kPhaseOtherKey = "other_s";
inline constexpr std::string_view kPhaseWallKey = "wall_s";

using PhaseClockType = std::chrono::steady_clock;

// Seconds on the monotonic clock every process of the machine shares
// (steady_clock is CLOCK_MONOTONIC, which namespaces do not shift), so a
// worker can say when its main() began and the parent can compare.
double monotonic_seconds(PhaseClockType::time_point t = PhaseClockType::now());

// Seconds per phase, and the wall time they are parts of.
struct PhaseTimes {
  std::array<double, kPhaseCount> seconds{};
  double wall_s = 0;

  double& operator[](Phase p) { return seconds[static_cast<std::size_t>(p)]; }
  double operator[](Phase p) const { return seconds[static_cast<std::size_t>(p)]; }
  double sum() const;
  // Adds the phases (not the wall time).
  PhaseTimes& operator+=(const PhaseTimes& other);

  // {"worker_start_s": .., ..., "other_s": wall less the sum (never
  // negative), "wall_s": ..}: every key, always.
  Json to_json() const;
  // What to_json wrote: a missing key is 0, an unknown one (a newer
  // worker's) ignored. Throws ks::Error(Status::parse) for a value that is
  // not a non-negative number.
  static PhaseTimes from_json(const Json& j);
};

// Charges wall time to the innermost phase entered, exclusively. Time
// outside every phase is charged to none (it ends up in other_s). Two
// clock reads per phase entered: cheap enough around steps, never used
// inside a timed call.
class PhaseClock {
 public:
  PhaseClock() : start_(PhaseClockType::now()), last_(start_) {}

  class [[nodiscard]] Scope {
   public:
    Scope(PhaseClock& clock, Phase p) : clock_(&clock), outer_(clock.current_) { clock.switch_to(static_cast<int>(p)); }
    ~Scope() {
      if (clock_) clock_->switch_to(outer_);
    }
    Scope(Scope&& o) noexcept : clock_(o.clock_), outer_(o.outer_) { o.clock_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;

   private:
    PhaseClock* clock_;
    int outer_;
  };
  Scope enter(Phase p) { return Scope(*this, p); }

  // The times so far (the phase in progress counted up to now); wall_s is
  // the time since the clock was made.
  PhaseTimes read() const;

 private:
  void switch_to(int phase);

  PhaseClockType::time_point start_, last_;
  int current_ = -1;  // none
  std::array<PhaseClockType::duration, kPhaseCount> spent_{};
};

}  // namespace ks::eval
