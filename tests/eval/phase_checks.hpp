// What every evaluation's metrics.phases must be (docs/evaluation.md, "Where
// the time goes"), for the tests that evaluate.
#pragma once

#include <doctest/doctest.h>

#include "eval/phases.hpp"
#include "ksearch/types.hpp"

namespace ks::test {

// Every key, each a non-negative number of seconds, the phases adding up to
// at most wall_s, other_s the rest, and wall_s at most `outer_wall_s` (the
// caller's own clock around the call). Returns the phases for more checks.
inline Json checked_phases(const EvalResult& r, double outer_wall_s) {
  INFO(r.to_json().dump(2));
  const Json* p = r.metrics.find("phases");
  REQUIRE(p);
  REQUIRE(p->is_object());
  double sum = 0;
  const Json keys = eval::PhaseTimes{}.to_json();
  for (const auto& [key, unused] : keys.as_object()) {
    CAPTURE(key);
    const Json* v = p->find(key);
    REQUIRE(v);
    REQUIRE(v->is_number());
    CHECK(v->as_number() >= 0);
    if (key != eval::kPhaseOtherKey && key != eval::kPhaseWallKey) sum += v->as_number();
  }
  const double wall = p->get_number("wall_s");
  constexpr double eps = 1e-6;  // rounding, and two processes' reads of one clock
  CHECK(wall > 0);
  CHECK(sum <= wall + eps);
  CHECK(p->get_number("other_s") == doctest::Approx(wall - sum));
  CHECK(wall <= outer_wall_s + eps);
  return *p;
}

}  // namespace ks::test
