/* libksearch C ABI: the library's log (see ksearch.h for the conventions).
 *
 * The warnings, notes and progress lines the library writes itself (a weak
 * check, a missing sandbox, an LLM request retried, a long batch of
 * evaluations still going) go through one sink. By default it writes
 * "ksearch: <level>: <message>" lines to standard error, at level
 * KS_LOG_WARNING and above. A host replaces it to capture, reformat or
 * silence them:
 *
 *   static void my_log(void *user_data, ks_log_level level, const char *message) {
 *     fprintf(my_file, "[%s] %s\n", ks_log_level_name(level), message);
 *   }
 *   ks_log_set_callback(my_log, my_file_state);
 *   ks_log_set_level(KS_LOG_INFO);              (progress lines too)
 *   ...
 *   ks_log_set_callback(NULL, NULL);            (back to standard error)
 *
 * The sink is process-wide, not per run. The callback may be called from any
 * thread of the library (a heartbeat during a long evaluation comes from a
 * thread of its own), never twice at once; it must return quickly and must
 * not call ks_log_set_callback. `message` has no prefix and no final newline,
 * is valid only during the call, and may quote what an endpoint or a
 * candidate wrote: make it safe before showing it on a terminal. */
#ifndef KSEARCH_KS_LOG_H
#define KSEARCH_KS_LOG_H

#include "ksearch/export.h"
#include "ksearch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ks_log_level {
  KS_LOG_DEBUG = 0,   /* details for whoever debugs a run */
  KS_LOG_INFO = 1,    /* progress: what a long step is doing */
  KS_LOG_WARNING = 2, /* what the user should know (the default threshold) */
  KS_LOG_ERROR = 3,   /* an error the library recovers from or reports besides its status */
  KS_LOG_OFF = 4      /* as a threshold only: nothing */
} ks_log_level;

typedef void (*ks_log_callback)(void *user_data, ks_log_level level, const char *message);

/* Replaces the sink; callback NULL restores the default (standard error).
 * Always KS_OK. */
KS_API ks_status ks_log_set_callback(ks_log_callback callback, void *user_data);
/* The lowest level passed to the sink; KS_E_INVALID_ARGUMENT for a value
 * outside ks_log_level. */
KS_API ks_status ks_log_set_level(ks_log_level lowest);
KS_API ks_log_level ks_log_get_level(void);
/* "debug", "info", "warning", "error", "off"; "" for a value outside the set. */
KS_API const char *ks_log_level_name(ks_log_level value);
/* The level of a name above; KS_E_INVALID_ARGUMENT naming the known ones otherwise. */
KS_API ks_status ks_log_level_parse(const char *name, ks_log_level *out);

#ifdef __cplusplus
}
#endif

#endif /* KSEARCH_KS_LOG_H */
