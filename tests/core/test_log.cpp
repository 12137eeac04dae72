// The library's log (ksearch/log.hpp): one sink a host replaces, a level
// that filters before it, and a heartbeat for long silent steps.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ksearch/log.hpp"

namespace {

// Captures the sink's calls; restores the default sink and level after.
struct Capture {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<ks::LogLevel, std::string>> lines;
  ks::LogLevel saved = ks::log_level();

  Capture() {
    ks::set_log_sink([this](ks::LogLevel level, std::string_view message) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.emplace_back(level, std::string(message));
      cv.notify_all();
    });
  }
  ~Capture() {
    ks::set_log_sink(nullptr);
    ks::set_log_level(saved);
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines.size();
  }
};

}  // namespace

TEST_CASE("log: levels filter before the sink, names round-trip") {
  Capture c;
  ks::set_log_level(ks::LogLevel::warning);
  ks::log_message(ks::LogLevel::info, "progress");
  ks::log_message(ks::LogLevel::debug, "detail");
  ks::log_message(ks::LogLevel::warning, "careful");
  ks::log_message(ks::LogLevel::error, "broken");
  ks::log_message(ks::LogLevel::off, "never: off is a threshold, not a level");
  REQUIRE(c.count() == 2);
  CHECK(c.lines[0] == std::pair(ks::LogLevel::warning, std::string("careful")));
  CHECK(c.lines[1].first == ks::LogLevel::error);
  ks::set_log_level(ks::LogLevel::debug);
  CHECK(ks::log_enabled(ks::LogLevel::debug));
  ks::log_message(ks::LogLevel::debug, "detail");
  CHECK(c.count() == 3);
  ks::set_log_level(ks::LogLevel::off);
  ks::log_message(ks::LogLevel::error, "silenced");
  CHECK(c.count() == 3);
  for (auto l : {ks::LogLevel::debug, ks::LogLevel::info, ks::LogLevel::warning, ks::LogLevel::error,
                 ks::LogLevel::off})
    CHECK(ks::log_level_from_string(ks::to_string(l)) == l);
  CHECK_FALSE(ks::log_level_from_string("loud").has_value());
}

TEST_CASE("log: a sink that throws loses its line, never the caller's flow") {
  const ks::LogLevel saved = ks::log_level();
  ks::set_log_level(ks::LogLevel::info);
  ks::set_log_sink([](ks::LogLevel, std::string_view) { throw std::runtime_error("sink failed"); });
  CHECK_NOTHROW(ks::log_message(ks::LogLevel::warning, "lost"));
  ks::set_log_sink(nullptr);
  ks::set_log_level(saved);
}

TEST_CASE("log: a heartbeat says a step is still going, and nothing after it ends") {
  Capture c;
  ks::set_log_level(ks::LogLevel::info);
  {
    ks::LogHeartbeat beat(ks::LogLevel::info, std::chrono::milliseconds(5),
                          [](auto) { return std::string("still going"); });
    // Waits for two lines (bounded, so a broken heartbeat fails instead of hanging).
    std::unique_lock<std::mutex> lock(c.mutex);
    const bool two = c.cv.wait_for(lock, std::chrono::seconds(60), [&] { return c.lines.size() >= 2; });
    REQUIRE(two);
    CHECK(c.lines[0] == std::pair(ks::LogLevel::info, std::string("still going")));
  }
  const std::size_t after = c.count();
  ks::log_message(ks::LogLevel::info, "next");  // the destructor joined: no heartbeat line after this one
  {
    ks::LogHeartbeat disabled(ks::LogLevel::debug, std::chrono::milliseconds(1), [](auto) { return std::string("x"); });
  }
  CHECK(c.count() == after + 1);
  CHECK(c.lines.back().second == "next");
}
