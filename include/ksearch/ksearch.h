/* libksearch: the C ABI, version 1. This umbrella header includes every part:
 *
 *   ksearch/status.h     ks_status, the pinned status codes
 *   ksearch/version.h    KS_VERSION_* macros of the headers
 *   ksearch/ks_enums.h   the closed sets (strategy, language, backend, ...) and their names
 *   ksearch/ks_llm.h     LLM options and the host's LLM callbacks
 *   ksearch/ks_eval.h    evaluation options, the host's evaluator callbacks, tasks, single evaluations
 *   ksearch/ks_search.h  search options, cancel tokens, progress and event callbacks, results
 *   ksearch/ks_kernel.h  loading a found kernel into the host's CUDA context and launching it
 *   ksearch/ks_log.h     the library's log: a callback for its warnings and progress lines, levels
 *
 * Conventions (they hold for every header above):
 *
 * Errors. Every function that can fail returns a ks_status: KS_OK (0), or a
 *   negative code. ks_last_error_message() then says what went wrong, naming
 *   the argument or field; the message is thread-local and valid until the
 *   next failing call on the same thread. No C++ exception crosses this ABI.
 *
 * Handles. Objects (ks_result, ks_task, ks_evaluator, ks_cancel_token,
 *   ks_kernel) are opaque, made by *_create / *_load / ks_search_run, and
 *   released by the matching *_destroy, which accepts NULL. Output pointers
 *   come first-to-last as documented and are set to NULL on failure.
 *
 * Option structs. Each starts with `uint32_t version` and is filled by its
 *   *_init(&opts, *_VERSION) function (or, nested, by its parent's init);
 *   then set only the fields you need. The version says which header the
 *   program was built with: a struct's layout is fixed within a minor
 *   release, and the library reads its own layouts only, so any other
 *   version (an older release's too) is refused with KS_E_VERSION before
 *   another byte is read. The search's knobs beyond its struct's fields are
 *   settings by name (ks_search_options.config_json), so they need no new
 *   layout. Closed sets are enums (ks_enums.h); 0 is always a sensible default.
 *
 * Strings. Every string is NUL-terminated UTF-8 (paths: bytes, as the OS
 *   takes them). Strings passed in are borrowed for the duration of the call
 *   that receives them, including the strings an option struct points to
 *   (the library copies what it keeps; NULL means "not set" where a field
 *   says so). Strings returned by accessors (`const char *`) belong to the
 *   object they came from and live as long as it does; never free them.
 *   Strings returned through a `char **` out-parameter belong to the caller,
 *   who releases them with ks_string_free. Everything a callback receives
 *   (requests, reports, events) is valid only during that callback.
 *
 * Threading. The library has no global state to initialise. Independent
 *   runs may go on at once on different threads (in different run folders).
 *   A handle is used by one thread at a time, except that const accessors
 *   may be called concurrently and ks_cancel_token_cancel may be called from
 *   any thread at any time. ks_search_run, ks_search_resume and
 *   ks_search_replay block the calling thread; every callback of a run (LLM,
 *   evaluator, progress, event) is called on that thread, one at a time, so
 *   callbacks need no locking among themselves. A batch LLM or evaluator callback may hand its
 *   items to other threads, as long as it has finished with all of them
 *   when it returns. Callbacks must not start another search on the thread
 *   that called them.
 *
 * Stability. The functions and structs declared in these headers are the
 *   C ABI, promised within a minor release (libgit2's policy): 0.3.x
 *   libraries run a program built against any 0.3 header; a new minor
 *   release has a new SONAME (libksearch.so.0.MINOR), and a program is
 *   rebuilt against its headers (docs/api.md, "The C ABI's promise").
 *   The C++ headers (ksearch/<name>.hpp) are the C++ API; those under
 *   ksearch/sys/ are extension interfaces that may change in minor
 *   releases. docs/api.md describes it all and has the migration from the 0.1 ABI.
 */
#ifndef KSEARCH_H
#define KSEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/export.h"
#include "ksearch/ks_enums.h"
#include "ksearch/ks_eval.h"
#include "ksearch/ks_kernel.h"
#include "ksearch/ks_llm.h"
#include "ksearch/ks_log.h"
#include "ksearch/ks_search.h"
#include "ksearch/status.h"
#include "ksearch/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, e.g. "0.3.0" (may differ from KS_VERSION_STRING of the headers). */
KS_API const char *ks_version_string(void);
KS_API void ks_version(int *major, int *minor, int *patch);
/* The message of the last failure on this thread; "" when there was none. Never NULL. */
KS_API const char *ks_last_error_message(void);

#ifdef __cplusplus
}
#endif

#endif /* KSEARCH_H */
