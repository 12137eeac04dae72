#include "eval/deadline.hpp"

#include <algorithm>
#include <utility>

namespace ks::eval {
namespace {

Deadline::Clock::time_point after(Deadline::Clock::time_point now, double seconds) {
  return now + std::chrono::duration_cast<Deadline::Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Deadline::Deadline(double limit_s, double load_grace_s, Clock::time_point now)
    : limit_s_(limit_s), load_grace_s_(load_grace_s), at_(after(now, limit_s + load_grace_s)) {}

void Deadline::workload_started(Clock::time_point now) {
  at_ = after(now, limit_s_);
  allowed_s_ = limit_s_;
  step_ = FlowPhase{"", "starting the workload"};
}

void Deadline::enter(FlowPhase next, Clock::time_point now) {
  if (next.reference) {
    if (!step_.reference) candidate_left_s_ = std::max(0.0, std::chrono::duration<double>(at_ - now).count());
    reference_allowed_s_ = limit_s_ + next.extra_s;
    at_ = after(now, reference_allowed_s_);
  } else {
    if (step_.reference) at_ = after(now, candidate_left_s_);
    at_ = after(at_, next.extra_s);
    allowed_s_ += next.extra_s;
  }
  step_ = std::move(next);
}

}  // namespace ks::eval
