// The library's log through the C ABI (ks_log.h): a host's callback as the
// sink of ksearch/log.hpp.
#include <string>

#include "capi_internal.hpp"
#include "ksearch/ks_log.h"
#include "ksearch/log.hpp"

static_assert(static_cast<int>(ks::LogLevel::debug) == KS_LOG_DEBUG && static_cast<int>(ks::LogLevel::info) == KS_LOG_INFO &&
              static_cast<int>(ks::LogLevel::warning) == KS_LOG_WARNING &&
              static_cast<int>(ks::LogLevel::error) == KS_LOG_ERROR && static_cast<int>(ks::LogLevel::off) == KS_LOG_OFF);

extern "C" {

ks_status ks_log_set_callback(ks_log_callback callback, void* user_data) {
  return ks::capi::guarded("ks_log_set_callback", [&] {
    if (!callback) {
      ks::set_log_sink(nullptr);
      return KS_OK;
    }
    ks::set_log_sink([callback, user_data](ks::LogLevel level, std::string_view message) {
      const std::string text(message);  // NUL-terminated for C
      callback(user_data, static_cast<ks_log_level>(level), text.c_str());
    });
    return KS_OK;
  });
}

ks_status ks_log_set_level(ks_log_level lowest) {
  return ks::capi::guarded("ks_log_set_level", [&] {
    const int v = static_cast<int>(lowest);
    if (v < KS_LOG_DEBUG || v > KS_LOG_OFF)
      throw ks::Error(ks::Status::invalid_argument,
                      fmt::format("level {} is not a ks_log_level (KS_LOG_DEBUG 0 to KS_LOG_OFF 4)", v));
    ks::set_log_level(static_cast<ks::LogLevel>(v));
    return KS_OK;
  });
}

ks_log_level ks_log_get_level(void) { return static_cast<ks_log_level>(ks::log_level()); }

const char* ks_log_level_name(ks_log_level value) {
  const int v = static_cast<int>(value);
  return v < KS_LOG_DEBUG || v > KS_LOG_OFF ? "" : ks::to_string(static_cast<ks::LogLevel>(v));
}

ks_status ks_log_level_parse(const char* name, ks_log_level* out) {
  return ks::capi::guarded("ks_log_level_parse", [&] {
    if (!out) throw ks::Error(ks::Status::invalid_argument, "out is NULL");
    const auto level = ks::log_level_from_string(name ? name : "");
    if (!level)
      throw ks::Error(ks::Status::invalid_argument,
                      fmt::format("unknown log level \"{}\" (known: debug, info, warning, error, off)",
                                  name ? name : "(NULL)"));
    *out = static_cast<ks_log_level>(*level);
    return KS_OK;
  });
}

}  // extern "C"
