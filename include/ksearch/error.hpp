// Errors of the C++ API: one exception type carrying a status code.
#pragma once

#include <stdexcept>
#include <string>

#include "ksearch/export.h"

KS_NAMESPACE_BEGIN

// The C ABI's ks_status codes (ksearch/status.h, which capi/status.cpp
// checks them against): the library's status, one number on both sides.
enum class Status : int {
  ok = 0,
  invalid_argument = -1,
  not_found = -2,
  io = -3,
  parse = -4,
  no_device = -5,
  compile = -6,
  timeout = -7,
  llm = -8,
  budget = -9,
  cancelled = -10,
  user = -11,
  version = -12,
  buffer_too_small = -13,
  state = -14,
  subprocess = -15,
  cuda = -16,
  internal = -99,
};

// Every failure of the C++ API is an ks::Error; the C ABI turns it into a
// ks_status plus the thread-local last-error message.
class KS_API Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

KS_NAMESPACE_END
