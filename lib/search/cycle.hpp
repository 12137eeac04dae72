// The stagnation rule of a K-Search cycle, kept apart so it can be tested
// on its own: a cycle ends when `window` consecutive attempts fail to beat
// the cycle's best, or (once it has a pass and the base kernel has a score)
// when `window` consecutive attempts leave the cycle's best below the base.
#pragma once

namespace ks::core {

class CycleTracker {
 public:
  CycleTracker(int window, double base_score) : window_(window < 1 ? 1 : window), base_score_(base_score) {}

  // Records one attempt (a failure is passed=false). Returns true when the
  // attempt is the new cycle best.
  bool observe(bool passed, double score) {
    bool improved = passed && (!has_pass_ || score > best_score_);
    if (improved) {
      has_pass_ = true;
      best_score_ = score;
      no_improve_ = 0;
    } else {
      ++no_improve_;
    }
    if (has_pass_ && base_score_ > 0) {
      if (best_score_ > base_score_) no_improve_over_base_ = 0;
      else ++no_improve_over_base_;
    }
    return improved;
  }

  bool stagnant() const { return no_improve_ >= window_ || no_improve_over_base_ >= window_; }
  bool has_pass() const { return has_pass_; }
  double best_score() const { return best_score_; }
  int no_improve_streak() const { return no_improve_; }
  int no_improve_over_base_streak() const { return no_improve_over_base_; }

 private:
  int window_;
  double base_score_;
  bool has_pass_ = false;
  double best_score_ = 0;
  int no_improve_ = 0;
  int no_improve_over_base_ = 0;
};

}  // namespace ks::core
