// The library's log (ksearch/log.hpp): one sink, a level, a heartbeat.
#include "ksearch/log.hpp"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "util/text.hpp"

KS_NAMESPACE_BEGIN

namespace {

constexpr const char* kNames[] = {"debug", "info", "warning", "error", "off"};

// The sink and the lock that serialises its calls. The level is read on
// every log_message() without the lock (most messages are filtered out).
struct LogState {
  std::mutex mutex;
  LogSink sink;  // empty: the default
  std::atomic<int> level{static_cast<int>(LogLevel::warning)};
};

LogState& state() {
  static LogState* s = new LogState;  // never destroyed: threads may log during exit
  return *s;
}

// "ksearch: warning: text" on standard error; progress (info) without a
// level word, as the CLI's other lines. Text is shown terminal-safe: a
// message may quote what an endpoint or a candidate wrote.
void default_sink(LogLevel level, std::string_view message) {
  const std::string text = util::terminal_safe(message);
  const std::string line = level == LogLevel::info ? fmt::format("ksearch: {}\n", text)
                                                   : fmt::format("ksearch: {}: {}\n", to_string(level), text);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

const char* to_string(LogLevel level) {
  const int i = static_cast<int>(level);
  return i >= 0 && i <= 4 ? kNames[i] : "unknown";
}

std::optional<LogLevel> log_level_from_string(std::string_view name) {
  for (int i = 0; i <= 4; ++i)
    if (name == kNames[i]) return static_cast<LogLevel>(i);
  return std::nullopt;
}

void set_log_sink(LogSink sink) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sink = std::move(sink);
}

void set_log_level(LogLevel lowest) {
  const int i = static_cast<int>(lowest);
  state().level.store(i < 0 ? 0 : i > 4 ? 4 : i);
}

LogLevel log_level() { return static_cast<LogLevel>(state().level.load()); }

bool log_enabled(LogLevel level) {
  return level != LogLevel::off && static_cast<int>(level) >= state().level.load();
}

void log_message(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // A host's sink that throws must not unwind through the library's code
  // (the C ABI's callback cannot; a C++ one might): the message is dropped.
  try {
    if (s.sink) s.sink(level, message);
    else default_sink(level, message);
  } catch (...) {
  }
}

struct LogHeartbeat::State {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

LogHeartbeat::LogHeartbeat(LogLevel level, std::chrono::milliseconds every,
                           std::function<std::string(std::chrono::steady_clock::duration)> what) {
  if (!log_enabled(level) || every.count() <= 0 || !what) return;
  state_ = std::make_unique<State>();
  State* st = state_.get();
  const auto start = std::chrono::steady_clock::now();
  st->thread = std::thread([st, level, every, start, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(st->mutex);
    for (;;) {
      if (st->wake.wait_for(lock, every, [st] { return st->stop; })) return;
      std::string line;
      try {
        line = what(std::chrono::steady_clock::now() - start);
      } catch (...) {
        return;
      }
      lock.unlock();
      log_message(level, line);
      lock.lock();
    }
  });
}

LogHeartbeat::~LogHeartbeat() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

KS_NAMESPACE_END
