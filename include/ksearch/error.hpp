// Errors of the C++ API: one exception type carrying a status code.
#pragma once

#include <stdexcept>
#include <string>

#include "ksearch/export.h"
#include "ksearch/status.h"

KS_NAMESPACE_BEGIN

enum class Status : int {
  ok = KS_OK,
  invalid_argument = KS_E_INVALID_ARGUMENT,
  not_found = KS_E_NOT_FOUND,
  io = KS_E_IO,
  parse = KS_E_PARSE,
  no_device = KS_E_NO_DEVICE,
  compile = KS_E_COMPILE,
  timeout = KS_E_TIMEOUT,
  llm = KS_E_LLM,
  budget = KS_E_BUDGET,
  cancelled = KS_E_CANCELLED,
  user = KS_E_USER,
  version = KS_E_VERSION,
  buffer_too_small = KS_E_BUFFER_TOO_SMALL,
  state = KS_E_STATE,
  subprocess = KS_E_SUBPROCESS,
  cuda = KS_E_CUDA,
  internal = KS_E_INTERNAL,
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
