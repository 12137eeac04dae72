// ks_status_string: names for the pinned status codes.
#include "ksearch/status.h"

#include "ksearch/error.hpp"

// The C++ API's Status is the same number as each ks_status.
#define KS_SAME(cpp, c) static_assert(static_cast<int>(ks::Status::cpp) == (c), #c)
KS_SAME(ok, KS_OK);
KS_SAME(invalid_argument, KS_E_INVALID_ARGUMENT);
KS_SAME(not_found, KS_E_NOT_FOUND);
KS_SAME(io, KS_E_IO);
KS_SAME(parse, KS_E_PARSE);
KS_SAME(no_device, KS_E_NO_DEVICE);
KS_SAME(compile, KS_E_COMPILE);
KS_SAME(timeout, KS_E_TIMEOUT);
KS_SAME(llm, KS_E_LLM);
KS_SAME(budget, KS_E_BUDGET);
KS_SAME(cancelled, KS_E_CANCELLED);
KS_SAME(user, KS_E_USER);
KS_SAME(version, KS_E_VERSION);
KS_SAME(buffer_too_small, KS_E_BUFFER_TOO_SMALL);
KS_SAME(state, KS_E_STATE);
KS_SAME(subprocess, KS_E_SUBPROCESS);
KS_SAME(cuda, KS_E_CUDA);
KS_SAME(internal, KS_E_INTERNAL);
#undef KS_SAME

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
