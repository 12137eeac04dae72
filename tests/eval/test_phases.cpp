// The phase clock and the phase figures that travel in the protocol
// (eval/phases.hpp), and that the documentation names every phase the code
// reports.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "eval/phases.hpp"
#include "ksearch/error.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::eval;

namespace {

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST_CASE("phases: time goes to the innermost phase, and the phases never exceed the wall time") {
  PhaseClock clock;
  sleep_ms(5);  // in no phase: other_s
  {
    auto checks = clock.enter(Phase::checks);
    sleep_ms(10);
    {
      auto inputs = clock.enter(Phase::inputs);
      sleep_ms(20);
    }
    sleep_ms(10);
    {
      auto reference = clock.enter(Phase::reference);
      {
        auto transfer = clock.enter(Phase::transfers);
        sleep_ms(15);
      }
    }
  }
  sleep_ms(5);
  const PhaseTimes t = clock.read();
  CAPTURE(t.to_json().dump());
  // A sleep lasts at least as long as asked: lower bounds only.
  CHECK(t[Phase::inputs] >= 0.020);
  CHECK(t[Phase::transfers] >= 0.015);
  CHECK(t[Phase::checks] >= 0.020);
  // Exclusive: the outer phase does not count what its inner ones took, the
  // phases leave out the time outside them, and nothing else was entered.
  CHECK(t[Phase::checks] + t[Phase::inputs] + t[Phase::reference] + t[Phase::transfers] == doctest::Approx(t.sum()));
  CHECK(t[Phase::checks] <= t.wall_s - t[Phase::inputs] - t[Phase::transfers]);
  CHECK(t.sum() <= t.wall_s - 0.010);
  CHECK(t[Phase::timing] == 0);
  CHECK(t.to_json().get_number("other_s") >= 0.010);

  // A phase in progress is counted up to now; the outer one resumes after it.
  PhaseClock open;
  auto timing = open.enter(Phase::timing);
  sleep_ms(5);
  CHECK(open.read()[Phase::timing] >= 0.005);
}

TEST_CASE("phases: the figures survive JSON, name every phase, and refuse nonsense") {
  PhaseTimes t;
  for (int i = 0; i < kPhaseCount; ++i) t.seconds[static_cast<std::size_t>(i)] = 0.25 * (i + 1);
  t.wall_s = 100;
  const Json j = t.to_json();
  CHECK(j.size() == static_cast<std::size_t>(kPhaseCount) + 2);
  CHECK(j.get_number("worker_start_s") == 0.25);
  CHECK(j.get_number("wall_s") == 100);
  CHECK(j.get_number("other_s") == doctest::Approx(100 - t.sum()));
  const PhaseTimes back = PhaseTimes::from_json(Json::parse(j.dump()));
  CHECK(back.seconds == t.seconds);
  CHECK(back.wall_s == 100);

  // other_s is never negative (clocks of two processes may disagree by a hair).
  PhaseTimes over;
  over[Phase::compile] = 2;
  over.wall_s = 1;
  CHECK(over.to_json().get_number("other_s") == 0);

  // Missing keys are 0 (an older worker), unknown ones ignored (a newer one).
  const PhaseTimes partial = PhaseTimes::from_json(Json::obj({{"checks_s", 1.5}, {"future_phase_s", 3}}));
  CHECK(partial[Phase::checks] == 1.5);
  CHECK(partial.sum() == 1.5);
  CHECK_THROWS_AS(PhaseTimes::from_json(Json::obj({{"timing_s", -1}})), ks::Error);
  CHECK_THROWS_AS(PhaseTimes::from_json(Json::obj({{"timing_s", "fast"}})), ks::Error);
  CHECK_THROWS_AS(PhaseTimes::from_json(Json::arr({1})), ks::Error);

  PhaseTimes sum = partial;
  sum += partial;
  CHECK(sum[Phase::checks] == 3);
}

TEST_CASE("phases: docs/evaluation.md documents exactly the keys of metrics.phases") {
  std::ifstream in(ks::test::source_dir() / "docs/evaluation.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const auto begin = doc.find("## Where the time goes");
  REQUIRE(begin != std::string::npos);
  const auto end = doc.find("\n## ", begin + 1);
  const std::string section = doc.substr(begin, end - begin);
  // The table's first column: | `name_s` | ...
  std::set<std::string> documented;
  std::istringstream lines(section);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const auto close = line.find('`', 3);
    if (close != std::string::npos) documented.insert(line.substr(3, close - 3));
  }
  std::set<std::string> reported;
  const Json keys = PhaseTimes{}.to_json();
  for (const auto& [key, v] : keys.as_object()) reported.insert(key);
  auto join = [](const std::set<std::string>& names) {
    std::string s;
    for (const auto& k : names) s += k + " ";
    return s;
  };
  CHECK_MESSAGE(documented == reported, "documented: ", join(documented), "\nreported:   ", join(reported));
}
