// ks_status_string: names for the pinned status codes.
#include "ksearch/status.h"

extern "C" const char* ks_status_string(ks_status status) {
  switch (status) {
    case KS_OK: return "ok";
    case KS_E_INVALID_ARGUMENT: return "invalid argument";
    case KS_E_NOT_FOUND: return "not found";
    case KS_E_IO: return "input/output error";
    case KS_E_PARSE: return "parse error";
    case KS_E_NO_DEVICE: return "no CUDA device";
    case KS_E_COMPILE: return "compile error";
    case KS_E_TIMEOUT: return "timeout";
    case KS_E_LLM: return "LLM failure";
    case KS_E_BUDGET: return "budget exhausted";
    case KS_E_CANCELLED: return "cancelled";
    case KS_E_USER: return "stopped by a user callback";
    case KS_E_VERSION: return "unsupported params version";
    case KS_E_BUFFER_TOO_SMALL: return "buffer too small";
    case KS_E_STATE: return "invalid state";
    case KS_E_SUBPROCESS: return "subprocess failure";
    case KS_E_CUDA: return "CUDA driver error";
    case KS_E_INTERNAL: return "internal error";
  }
  return "unknown status";
}
