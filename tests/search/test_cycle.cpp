#include <doctest/doctest.h>

#include "search/cycle.hpp"

using ks::core::CycleTracker;

TEST_CASE("cycle: stagnates after `window` attempts without a new cycle best") {
  CycleTracker t(3, 0);
  CHECK_FALSE(t.observe(false, 0));
  CHECK_FALSE(t.stagnant());
  CHECK(t.observe(true, 1.0));   // first pass is the cycle best
  CHECK(t.no_improve_streak() == 0);
  CHECK_FALSE(t.observe(true, 0.9));
  CHECK_FALSE(t.observe(true, 1.0));  // equal is not an improvement
  CHECK_FALSE(t.stagnant());
  CHECK_FALSE(t.observe(false, 0));
  CHECK(t.stagnant());
}

TEST_CASE("cycle: failures count towards stagnation before any pass") {
  CycleTracker t(2, 0);
  t.observe(false, 0);
  CHECK_FALSE(t.stagnant());
  t.observe(false, 0);
  CHECK(t.stagnant());
  CHECK_FALSE(t.has_pass());
}

TEST_CASE("cycle: improving within the cycle but staying below the base also stagnates") {
  CycleTracker t(3, 10.0);  // the parent kernel scores 10
  t.observe(true, 1.0);
  t.observe(true, 2.0);
  t.observe(true, 3.0);  // three improvements, none beats the base
  CHECK(t.no_improve_streak() == 0);
  CHECK(t.no_improve_over_base_streak() == 3);
  CHECK(t.stagnant());
}

TEST_CASE("cycle: beating the base resets the over-base streak") {
  CycleTracker t(2, 10.0);
  t.observe(true, 5.0);
  CHECK(t.no_improve_over_base_streak() == 1);
  t.observe(true, 11.0);
  CHECK(t.no_improve_over_base_streak() == 0);
  CHECK_FALSE(t.stagnant());
  CHECK(t.best_score() == 11.0);
}

TEST_CASE("cycle: a window below one is treated as one") {
  CycleTracker t(0, 0);
  t.observe(false, 0);
  CHECK(t.stagnant());
}
