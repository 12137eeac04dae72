// The C ABI: a thin layer over the C++ API. Every entry point catches every
// exception and turns it into a ks_status plus the thread-local message.
#include "ksearch/ksearch.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/search.hpp"
#include "ksearch/tasks.hpp"

// Opaque handle definitions (global namespace, as declared in ksearch.h).
struct ks_llm_answer {
  std::string text;
  bool has_text = false;
  ks::LlmUsage usage;
};

struct ks_result {
  ks::SearchOutcome outcome;
  std::string run_dir;
  std::string plan;
  std::string json;
};

struct ks_task {
  std::unique_ptr<ks::Task> task;
  std::string json;
};

struct ks_evaluator {
  std::unique_ptr<ks::Evaluator> evaluator;
};

namespace {

thread_local std::string g_last_error;

ks_status fail(ks_status s, const std::string& message) noexcept {
  try {
    g_last_error = message;
  } catch (...) {
    g_last_error.clear();  // out of memory: the status still says what happened
  }
  return s;
}

// Runs `fn`, mapping exceptions to status codes; nothing escapes.
template <typename Fn>
ks_status guarded(const char* where, Fn&& fn) {
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

const char* or_empty(const char* s) { return s ? s : ""; }

ks_prompt_kind to_c(ks::PromptKind k) {
  switch (k) {
    case ks::PromptKind::wm_init: return KS_PROMPT_WM_INIT;
    case ks::PromptKind::wm_propose: return KS_PROMPT_WM_PROPOSE;
    case ks::PromptKind::wm_refine: return KS_PROMPT_WM_REFINE;
    case ks::PromptKind::wm_too_hard: return KS_PROMPT_WM_TOO_HARD;
    case ks::PromptKind::generate: return KS_PROMPT_GENERATE;
    case ks::PromptKind::debug: return KS_PROMPT_DEBUG;
    case ks::PromptKind::improve: return KS_PROMPT_IMPROVE;
  }
  return KS_PROMPT_GENERATE;
}

// A C callback as an LlmPolicy. KS_E_USER from the callback stops the run.
class CallbackPolicy final : public ks::LlmPolicy {
 public:
  CallbackPolicy(ks_llm_callback cb, void* user) : cb_(cb), user_(user) {}
  ks::LlmResponse complete(const ks::LlmRequest& req) override {
    ks_llm_request r{to_c(req.kind), req.system.c_str(), req.prompt.c_str()};
    ks_llm_answer answer;
    int rc = 0;
    ks::LlmResponse resp;
    try {
      rc = cb_(&r, &answer, user_);
    } catch (...) {
      rc = KS_E_INTERNAL;  // a C++ host's callback threw; treat as a failed generation
    }
    if (rc == KS_E_USER)  // the host wants the run to end: a cancellation, not a failed answer
      throw ks::Error(ks::Status::cancelled, "the LLM callback asked to stop the run");
    if (rc != 0 || !answer.has_text) {
      resp.error = rc != 0 ? fmt::format("the LLM callback returned {}", rc)
                           : "the LLM callback returned 0 without setting an answer";
      return resp;
    }
    resp.ok = true;
    resp.text = std::move(answer.text);
    resp.usage = answer.usage;
    total_ += resp.usage;
    return resp;
  }
  std::string describe() const override { return "c-callback"; }
  ks::LlmUsage total_usage() const override { return total_; }

 private:
  ks_llm_callback cb_;
  void* user_;
  ks::LlmUsage total_;
};

ks::ProgressCallback progress_of(const ks_search_params* p) {
  if (!p || !p->progress_callback) return {};
  ks_progress_callback cb = p->progress_callback;
  void* user = p->progress_user_data;
  return [cb, user](const ks::RoundReport& r) {
    ks_round_report c{};
    c.round = r.round;
    c.max_rounds = r.max_rounds;
    c.action = r.action.c_str();
    c.status = ks::to_string(r.status);
    c.solution_id = r.solution_id.c_str();
    c.latency_ms = r.latency_ms;
    c.best_latency_ms = r.best_latency_ms;
    c.best_speedup = r.best_speedup;
    c.improved = r.improved ? 1 : 0;
    c.replayed = r.replayed ? 1 : 0;
    c.elapsed_s = r.elapsed_s;
    c.cost_usd = r.llm_usage.cost_usd;
    return cb(&c, user) == 0;
  };
}

// The size of ks_search_params as each version defined it. A caller built
// against an older header passes a smaller struct: only that many bytes may
// be read or written. (Version 1 is the whole current struct.)
std::size_t search_params_size(std::uint32_t version) {
  switch (version) {
    case 1: return sizeof(ks_search_params);
    default: return 0;
  }
}

// `where` names the entry point, so the message says which call was refused.
ks_status check_params(const char* where, const ks_search_params* p) {
  return guarded(where, [&] {
    if (!p) return fail(KS_E_INVALID_ARGUMENT, fmt::format("{}: params is NULL", where));
    if (search_params_size(p->version) == 0)
      return fail(KS_E_VERSION, fmt::format("ks_search_params version {} is not supported (this library knows "
                                            "1..{}); initialise params with ks_search_params_init",
                                            p->version, KS_SEARCH_PARAMS_VERSION));
    return KS_OK;
  });
}

// The same rule for a run and a resume: with both llm and llm_callback set,
// either choice would silently ignore something the caller asked for.
ks::LlmChoice llm_choice_of(const ks_search_params* p) {
  ks::LlmChoice c;
  bool names_callback = p->llm && std::strcmp(p->llm, "callback") == 0;
  if (p->llm_callback && p->llm && !names_callback)
    throw ks::Error(ks::Status::invalid_argument,
                    fmt::format("params.llm is \"{}\" and params.llm_callback is set too; set only one "
                                "(params.llm NULL or \"callback\" uses the callback)", p->llm));
  if (p->llm_callback) {
    c.kind = "custom";
    c.custom = std::make_shared<CallbackPolicy>(p->llm_callback, p->llm_user_data);
    return c;
  }
  if (names_callback)
    throw ks::Error(ks::Status::invalid_argument, "params.llm is \"callback\" but params.llm_callback is NULL");
  if (!p->llm) throw ks::Error(ks::Status::invalid_argument, "set params.llm or params.llm_callback");
  c = ks::LlmChoice::parse(p->llm);
  if (c.kind == "openai") {
    c.openai.model = or_empty(p->model);
    if (p->base_url) c.openai.base_url = p->base_url;
    if (p->api_key_env) c.openai.api_key_env = p->api_key_env;
  }
  return c;
}

ks_status make_result(ks::SearchOutcome outcome, ks_result** out) {
  auto r = std::make_unique<ks_result>();
  r->outcome = std::move(outcome);
  r->run_dir = r->outcome.run_dir.string();
  if (r->outcome.best && !r->outcome.best->solution.launch_plan.is_null())
    r->plan = r->outcome.best->solution.launch_plan.dump(2);
  r->json = r->outcome.to_json().dump(2);
  bool cancelled = r->outcome.stop_reason == "cancelled";
  *out = r.release();
  if (cancelled) return fail(KS_E_CANCELLED, "the run was stopped by a callback; it can be resumed");
  return KS_OK;
}

}  // namespace

extern "C" {

const char* ks_version_string(void) { return KS_VERSION_STRING; }

void ks_version(int* major, int* minor, int* patch) {
  if (major) *major = KS_VERSION_MAJOR;
  if (minor) *minor = KS_VERSION_MINOR;
  if (patch) *patch = KS_VERSION_PATCH;
}

const char* ks_last_error_message(void) { return g_last_error.c_str(); }

ks_status ks_llm_answer_set_text(ks_llm_answer* answer, const char* text, size_t length) {
  // Each message names the NULL argument: "NULL argument" alone leaves the caller guessing.
  if (!answer) return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_text: answer is NULL");
  if (!text && length > 0)
    return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_text: text is NULL but length is not 0");
  return guarded("ks_llm_answer_set_text", [&] {
    answer->text.assign(text ? text : "", length);
    answer->has_text = true;
    return KS_OK;
  });
}

ks_status ks_llm_answer_set_usage(ks_llm_answer* answer, int64_t input_tokens, int64_t output_tokens, double cost_usd) {
  if (!answer) return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_usage: answer is NULL");
  if (input_tokens < 0 || output_tokens < 0 || cost_usd < 0)
    return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_usage: negative usage");
  // NaN passes `< 0`: a NaN cost would make the run's total NaN (written as
  // null) and silently switch max_cost_usd off; an infinite one is no cost either.
  if (!std::isfinite(cost_usd))
    return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_usage: cost_usd is not a finite number");
  answer->usage.input_tokens = input_tokens;
  answer->usage.output_tokens = output_tokens;
  answer->usage.cost_usd = cost_usd;
  return KS_OK;
}

ks_status ks_search_params_init(ks_search_params* params, uint32_t version) {
  if (!params) return fail(KS_E_INVALID_ARGUMENT, "ks_search_params_init: params is NULL");
  if (search_params_size(version) == 0)
    return fail(KS_E_VERSION, "ks_search_params_init: unknown version " + std::to_string(version));
  std::memset(params, 0, search_params_size(version));
  ks::SearchConfig defaults;
  params->version = version;
  params->strategy = "world_model";
  params->language = "cuda";
  params->max_rounds = defaults.max_rounds;
  params->wm_stagnation_window = defaults.wm_stagnation_window;
  params->wm_max_difficulty = defaults.wm_max_difficulty;
  params->parallel = defaults.parallel;
  params->backend = "auto";
  params->timing_cap_s = ks::EvalOptions{}.max_time_per_workload_s;
  return KS_OK;
}

ks_status ks_search_run(const ks_search_params* params, ks_result** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_search_run: out is NULL");
  *out = nullptr;
  if (ks_status s = check_params("ks_search_run", params); s != KS_OK) return s;
  if (!params->task || !*params->task) return fail(KS_E_INVALID_ARGUMENT, "ks_search_run: params.task is required");
  return guarded("ks_search_run", [&] {
    ks::SearchOptions o;
    o.task = params->task;
    ks::SearchConfig& c = o.config;
    c.strategy = params->strategy ? params->strategy : "world_model";
    auto lang = ks::language_from_string(params->language ? params->language : "cuda");
    if (!lang) throw ks::Error(ks::Status::invalid_argument, "params.language must be \"cuda\" or \"cpp\"");
    c.language = *lang;
    c.max_rounds = params->max_rounds;
    c.wm_stagnation_window = params->wm_stagnation_window;
    c.wm_max_difficulty = params->wm_max_difficulty;
    c.parallel = params->parallel;
    c.tune_rounds = params->tune_rounds;
    c.seed = params->seed;
    c.max_cost_usd = params->max_cost_usd;
    c.max_wall_s = params->max_wall_s;
    c.model = or_empty(params->model);
    o.llm = llm_choice_of(params);
    o.evaluator.backend = params->backend ? params->backend : "auto";
    o.evaluator.in_process = params->in_process != 0;
    if (!(params->timing_cap_s >= 0))  // NaN too, which would silently mean the default
      throw ks::Error(ks::Status::invalid_argument,
                      fmt::format("params.timing_cap_s must be a number >= 0, is {}", params->timing_cap_s));
    if (params->timing_cap_s > 0) o.evaluator.options.max_time_per_workload_s = params->timing_cap_s;
    if (params->run_dir) o.run_dir = params->run_dir;
    o.progress = progress_of(params);
    return make_result(ks::run_search(o), out);
  });
}

ks_status ks_search_resume(const char* run_dir, const ks_search_params* params, ks_result** out) {
  if (!run_dir) return fail(KS_E_INVALID_ARGUMENT, "ks_search_resume: run_dir is NULL");
  if (!*run_dir) return fail(KS_E_INVALID_ARGUMENT, "ks_search_resume: run_dir is empty");
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_search_resume: out is NULL");
  *out = nullptr;
  if (params)
    if (ks_status s = check_params("ks_search_resume", params); s != KS_OK) return s;
  return guarded("ks_search_resume", [&] {
    ks::ResumeOptions r;
    if (params) {
      r.progress = progress_of(params);
      if (params->llm_callback || params->llm) {
        ks::LlmChoice c = llm_choice_of(params);
        if (c.kind == "custom") r.custom_llm = c.custom;
        else r.llm = c;
      }
      // The C ABI's rule: a larger value raises the budget; a smaller one
      // (such as the default of ks_search_params_init) keeps it. A folder
      // without a run is left for resume_search to report.
      if (params->max_rounds > 0 && ks::RunStore::exists(run_dir)) {
        const ks::Json recorded = ks::RunStore::open_read_only(run_dir).manifest()["config"];
        if (params->max_rounds > recorded.get_int("max_rounds", 0)) r.max_rounds = params->max_rounds;
      }
    }
    return make_result(ks::resume_search(run_dir, r), out);
  });
}

void ks_result_destroy(ks_result* result) { delete result; }
int ks_result_has_best(const ks_result* r) { return r && r->outcome.best ? 1 : 0; }
double ks_result_best_latency_ms(const ks_result* r) { return r && r->outcome.best ? r->outcome.best->eval.latency_ms : 0; }
double ks_result_best_speedup(const ks_result* r) { return r && r->outcome.best ? r->outcome.best->eval.speedup : 0; }
int ks_result_rounds(const ks_result* r) { return r ? r->outcome.rounds : 0; }
const char* ks_result_run_dir(const ks_result* r) { return r ? r->run_dir.c_str() : ""; }
const char* ks_result_stop_reason(const ks_result* r) { return r ? r->outcome.stop_reason.c_str() : ""; }

size_t ks_result_source_count(const ks_result* r) {
  return r && r->outcome.best ? r->outcome.best->solution.sources.size() : 0;
}

const char* ks_result_source_path(const ks_result* r, size_t i) {
  if (!r || !r->outcome.best || i >= r->outcome.best->solution.sources.size()) return "";
  return r->outcome.best->solution.sources[i].path.c_str();
}

const char* ks_result_source_content(const ks_result* r, size_t i) {
  if (!r || !r->outcome.best || i >= r->outcome.best->solution.sources.size()) return "";
  return r->outcome.best->solution.sources[i].content.c_str();
}

const char* ks_result_launch_plan_json(const ks_result* r) { return r ? r->plan.c_str() : ""; }
const char* ks_result_best_solution_id(const ks_result* r) {
  return r && r->outcome.best ? r->outcome.best->solution.id.c_str() : "";
}
const char* ks_result_json(const ks_result* r) { return r ? r->json.c_str() : ""; }

ks_status ks_task_load(const char* name_or_path, ks_task** out) {
  if (!name_or_path) return fail(KS_E_INVALID_ARGUMENT, "ks_task_load: name_or_path is NULL");
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_task_load: out is NULL");
  *out = nullptr;
  return guarded("ks_task_load", [&] {
    auto t = std::make_unique<ks_task>();
    t->task = ks::load_task(name_or_path);
    t->json = t->task->spec().to_json().dump(2);
    *out = t.release();
    return KS_OK;
  });
}

void ks_task_destroy(ks_task* task) { delete task; }
const char* ks_task_name(const ks_task* t) { return t ? t->task->name().c_str() : ""; }
const char* ks_task_json(const ks_task* t) { return t ? t->json.c_str() : ""; }

ks_status ks_evaluator_create(const char* backend, ks_evaluator** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluator_create: out is NULL");
  *out = nullptr;
  return guarded("ks_evaluator_create", [&] {
    ks::EvaluatorConfig c;
    c.backend = backend ? backend : "auto";
    auto e = std::make_unique<ks_evaluator>();
    e->evaluator = ks::make_evaluator(c);
    *out = e.release();
    return KS_OK;
  });
}

void ks_evaluator_destroy(ks_evaluator* e) { delete e; }

ks_status ks_evaluate(ks_evaluator* evaluator, const ks_task* task, const char* solution, char** result_json) {
  if (!evaluator) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluate: evaluator is NULL");
  if (!task) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluate: task is NULL");
  if (!solution) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluate: solution is NULL");
  if (!result_json) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluate: result_json is NULL");
  *result_json = nullptr;
  return guarded("ks_evaluate", [&] {
    ks::Solution s = ks::parse_solution_text(solution, task->task->spec());
    ks::EvalResult r = evaluator->evaluator->evaluate(*task->task, s);
    std::string j = r.to_json().dump(2);
    char* buf = static_cast<char*>(std::malloc(j.size() + 1));
    if (!buf) throw std::bad_alloc();
    std::memcpy(buf, j.c_str(), j.size() + 1);
    *result_json = buf;
    return KS_OK;
  });
}

void ks_string_free(char* s) { std::free(s); }

}  // extern "C"
