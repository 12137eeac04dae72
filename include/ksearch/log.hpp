// The library's log: every warning, note and progress line the library
// itself writes goes through one sink, which a host program can replace
// (to capture, reformat or silence it) and filter by level. The default sink
// writes "ksearch: <level>: <message>" lines to standard error.
//
// The sink is process-wide. It may be called from any thread of the library
// (a heartbeat of a long evaluation comes from a thread of its own), but
// never twice at once: calls are serialised. It must not call set_log_sink.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ksearch/export.h"

KS_NAMESPACE_BEGIN

// Ordered: a sink gets the messages at or above the level set_log_level
// gives. The numbers are the C ABI's ks_log_level (ksearch/ks_log.h).
enum class LogLevel : int {
  debug = 0,    // details for whoever is debugging a run
  info = 1,     // progress: what a long step is doing
  warning = 2,  // something the user should know: a check that could not run, a sandbox missing
  error = 3,    // an error the library recovers from, or reports besides its status
  off = 4,      // as a threshold only: nothing
};

KS_API const char* to_string(LogLevel level);
// "debug", "info", "warning", "error", "off"; nullopt for anything else.
KS_API std::optional<LogLevel> log_level_from_string(std::string_view name);

// A message without its prefix or final newline (it may hold inner newlines).
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Replaces the sink; an empty function restores the default (standard error).
KS_API void set_log_sink(LogSink sink);
// The lowest level passed to the sink. Default: warning, so a host that never
// asks gets warnings and errors only (the ksearch CLI sets info: progress).
KS_API void set_log_level(LogLevel lowest);
KS_API LogLevel log_level();
KS_API bool log_enabled(LogLevel level);
// Sends one message to the sink when its level is enabled.
KS_API void log_message(LogLevel level, std::string_view message);

// While it lives, a line every `every` from a thread of its own, for a step
// that may be silent a long while (a batch of evaluations): `what(elapsed)`
// gives the line. Nothing when `level` is not enabled at construction. The
// destructor stops the thread before it returns (no line comes after it).
class KS_API LogHeartbeat {
 public:
  LogHeartbeat(LogLevel level, std::chrono::milliseconds every,
               std::function<std::string(std::chrono::steady_clock::duration elapsed)> what);
  ~LogHeartbeat();
  LogHeartbeat(const LogHeartbeat&) = delete;
  LogHeartbeat& operator=(const LogHeartbeat&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

KS_NAMESPACE_END
