#include "eval/phases.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ksearch/error.hpp"

namespace ks::eval {

std::string_view phase_key(Phase p) {
  switch (p) {
    case Phase::worker_start: return "worker_start_s";
    case Phase::sandbox_setup: return "sandbox_setup_s";
    case Phase::compile: return "compile_s";
    case Phase::reference_compile: return "reference_compile_s";
    case Phase::oracle: return "oracle_s";
    case Phase::load: return "load_s";
    case Phase::setup: return "setup_s";
    case Phase::inputs: return "inputs_s";
    case Phase::reference: return "reference_s";
    case Phase::reference_timing: return "reference_timing_s";
    case Phase::checks: return "checks_s";
    case Phase::timing: return "timing_s";
    case Phase::recheck: return "recheck_s";
    case Phase::transfers: return "transfers_s";
    case Phase::baseline: return "baseline_s";
    case Phase::count: break;
  }
  return "?";
}

double monotonic_seconds(PhaseClockType::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

double PhaseTimes::sum() const {
  double s = 0;
  for (double x : seconds) s += x;
  return s;
}

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& other) {
  for (std::size_t i = 0; i < seconds.size(); ++i) seconds[i] += other.seconds[i];
  return *this;
}

Json PhaseTimes::to_json() const {
  Json j = Json::object();
  for (int i = 0; i < kPhaseCount; ++i) j[phase_key(static_cast<Phase>(i))] = seconds[static_cast<std::size_t>(i)];
  j[kPhaseOtherKey] = std::max(0.0, wall_s - sum());
  j[kPhaseWallKey] = wall_s;
  return j;
}

PhaseTimes PhaseTimes::from_json(const Json& j) {
  if (!j.is_object()) throw Error(Status::parse, "phases: not an object");
  PhaseTimes t;
  auto number = [&](std::string_view key) {
    const Json* v = j.find(key);
    if (!v) return 0.0;
    if (!v->is_number() || !(v->as_number() >= 0))
      throw Error(Status::parse, fmt::format("phases: \"{}\" is not a non-negative number of seconds", key));
    return v->as_number();
  };
  for (int i = 0; i < kPhaseCount; ++i) t.seconds[static_cast<std::size_t>(i)] = number(phase_key(static_cast<Phase>(i)));
  t.wall_s = number(kPhaseWallKey);
  return t;
}

void PhaseClock::switch_to(int phase) {
  const auto now = PhaseClockType::now();
  if (current_ >= 0) spent_[static_cast<std::size_t>(current_)] += now - last_;
  last_ = now;
  current_ = phase;
}

PhaseTimes PhaseClock::read() const {
  const auto now = PhaseClockType::now();
  PhaseTimes t;
  for (int i = 0; i < kPhaseCount; ++i) {
    auto d = spent_[static_cast<std::size_t>(i)];
    if (i == current_) d += now - last_;
    t.seconds[static_cast<std::size_t>(i)] = std::chrono::duration<double>(d).count();
  }
  t.wall_s = std::chrono::duration<double>(now - start_).count();
  return t;
}

}  // namespace ks::eval
