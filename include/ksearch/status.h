/* Status codes of the libksearch C ABI. Values are pinned: never renumber. */
#ifndef KSEARCH_STATUS_H
#define KSEARCH_STATUS_H

#include "ksearch/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ks_status {
  KS_OK = 0,
  KS_E_INVALID_ARGUMENT = -1, /* a parameter or input file is malformed */
  KS_E_NOT_FOUND = -2,        /* a named task, file, node or run does not exist */
  KS_E_IO = -3,               /* reading or writing a file failed */
  KS_E_PARSE = -4,            /* JSON or an LLM answer could not be parsed */
  KS_E_NO_DEVICE = -5,        /* a CUDA evaluation was asked for where no driver or GPU is present */
  KS_E_COMPILE = -6,          /* a kernel failed to compile */
  KS_E_TIMEOUT = -7,          /* an operation ran past its time limit */
  KS_E_LLM = -8,              /* the language model failed to answer */
  KS_E_BUDGET = -9,           /* a round, cost or time budget is exhausted */
  KS_E_CANCELLED = -10,       /* the run was stopped by a callback or a cancel token */
  KS_E_USER = -11,            /* returned by user callbacks to abort; never produced by the library */
  KS_E_VERSION = -12,         /* a params struct carries an unknown version */
  KS_E_BUFFER_TOO_SMALL = -13,/* a caller-provided buffer is too small */
  KS_E_STATE = -14,           /* the object is not in a state that allows the call */
  KS_E_SUBPROCESS = -15,      /* a worker or external program failed */
  KS_E_CUDA = -16,            /* a CUDA driver call made for the caller failed (the error is named) */
  KS_E_INTERNAL = -99         /* a bug in libksearch: please report it */
} ks_status;

/* A static, human-readable name for a status code. Never NULL. */
KS_API const char *ks_status_string(ks_status status);

#ifdef __cplusplus
}
#endif

#endif
