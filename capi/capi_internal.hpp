// What the C ABI's translation units share: the thread-local error, the
// exception barrier, the handle definitions, and the conversions between the
// C option structs and the C++ API.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "ksearch/cancel.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/ksearch.h"
#include "ksearch/search.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"

// Opaque handle definitions (global namespace, as declared in the headers).
struct ks_result {
  ks::SearchOutcome outcome;
  std::string run_dir;
  std::string task;
  std::string plan;
  std::string solution;
  std::string json;
};

struct ks_cancel_token {
  std::shared_ptr<ks::CancelToken> token = std::make_shared<ks::CancelToken>();
};

namespace ks::capi {

// Records `message` as this thread's last error and returns `s`.
ks_status fail(ks_status s, const std::string& message) noexcept;

// Runs `fn`, mapping exceptions to status codes; nothing escapes.
template <typename Fn>
ks_status guarded(const char* where, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const ks::Error& e) {
    return fail(static_cast<ks_status>(e.status()), fmt::format("{}: {}", where, e.what()));
  } catch (const std::bad_alloc&) {
    return fail(KS_E_INTERNAL, fmt::format("{}: out of memory", where));
  } catch (const std::exception& e) {
    return fail(KS_E_INTERNAL, fmt::format("{}: {}", where, e.what()));
  } catch (...) {
    return fail(KS_E_INTERNAL, fmt::format("{}: unknown exception", where));
  }
}

inline const char* or_empty(const char* s) { return s ? s : ""; }

// A malloc'ed copy for a `char **` out-parameter (released by ks_string_free).
char* copy_out(const std::string& s);

// The closed sets, between their C and C++ forms; each throws
// Error(invalid_argument) naming `field` for a value outside the set.
// strategy_of refuses KS_STRATEGY_AUTO, which the caller resolves first.
StrategyKind strategy_of(ks_strategy v, const char* field);
Language language_of(ks_language v, const char* field);
EvalBackend backend_of(ks_backend v, const char* field);
SandboxMode sandbox_of(ks_sandbox_mode v, const char* field);
TimingMode timing_of(ks_timing_mode v, const char* field);
ReplayDivergence divergence_of(ks_replay_divergence v, const char* field);
ks_prompt_kind prompt_kind_to_c(PromptKind k);
ks_eval_status eval_status_to_c(EvalStatus s);
ks_stop_reason stop_reason_to_c(StopReason r);
EvalStatus eval_status_of(ks_eval_status s, const char* field);

// One layout per minor release: a struct of any version but `current` is
// refused (Error(version)) naming `what`.
void check_version(const char* what, std::uint32_t version, std::uint32_t current);

// Field readers shared by the translations; each throws
// Error(invalid_argument) naming `field`.
std::string str(const char* s);  // "" for NULL
double finite_at_least(double v, double lo, const std::string& field, bool strictly = false);
std::vector<std::string> string_array(const char* const* items, std::size_t n, const std::string& field);
Json json_object_field(const char* text, const std::string& field);

// The options, in C++ form. Throw ks::Error naming the field at fault.
LlmChoice llm_choice_of(const ks_llm_options& o, double max_cost_usd, const char* prefix);
void apply_eval_options(const ks_eval_options& o, EvaluatorConfig& out, const char* prefix);
// The dataset, baseline and feedback fields as TaskSources.
TaskSources task_sources_of(const ks_search_options& o);
// ks_search_options.config_json (NULL: nothing) set by name on `c`.
void apply_config_json(const char* text, SearchConfig& c);
// The replay's settings and model (not its callbacks).
ReplayOptions replay_options_of(const ks_replay_options& o);

// The host's parts as C++ objects (callbacks.cpp).
std::shared_ptr<LlmPolicy> llm_callback_policy(ks_llm_callback cb, void* user);
std::shared_ptr<LlmPolicy> llm_batch_callback_policy(ks_llm_batch_callback cb, void* user);
// Null when neither callback is set.
std::shared_ptr<Evaluator> evaluator_callback_of(ks_evaluate_callback cb, ks_evaluate_batch_callback batch,
                                                 void* user, const char* device_json);
ProgressCallback progress_of(ks_progress_callback cb, void* user);
EventCallback events_of(ks_event_callback cb, void* user);

// Wraps an outcome for the caller; KS_E_CANCELLED for a run a callback or
// token stopped (the result is still handed over).
ks_status make_result(SearchOutcome outcome, ks_result** out);

}  // namespace ks::capi
