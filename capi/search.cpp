// ks_search_run, ks_search_resume, results, cancel tokens, versions and the
// thread-local error.
#include "capi_internal.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/tasks.hpp"

namespace ks::capi {
namespace {

thread_local std::string g_last_error;

SearchConfig config_of(const ks_search_options& o) {
  // The nested structs' versions, checked before any of their fields is read.
  check_version("options.budget", o.budget.version, KS_BUDGET_OPTIONS_VERSION);
  check_version("options.world_model", o.world_model.version, KS_WORLD_MODEL_OPTIONS_VERSION);
  check_version("options.tune", o.tune.version, KS_TUNE_OPTIONS_VERSION);
  check_version("options.eval", o.eval.version, KS_EVAL_OPTIONS_VERSION);
  check_version("options.llm", o.llm.version, KS_LLM_OPTIONS_VERSION);
  check_version("options.evolve", o.evolve.version, KS_EVOLVE_OPTIONS_VERSION);
  SearchConfig c;
  if (o.strategy == KS_STRATEGY_AUTO)
    c.strategy = o.llm.source == KS_LLM_OFFLINE ? ks::StrategyKind::tune : ks::StrategyKind::world_model;
  else
    c.strategy = strategy_of(o.strategy, "options.strategy");
  c.language = language_of(o.language, "options.language");
  c.parallel = o.parallel;
  c.seed = o.seed;
  c.max_rounds = o.budget.max_rounds;
  c.max_cost_usd = o.budget.max_cost_usd;
  c.max_wall_s = o.budget.max_wall_s;
  c.max_answer_bytes = static_cast<std::size_t>(o.budget.max_answer_bytes);
  c.world_model.stagnation_window = o.world_model.stagnation_window;
  c.world_model.max_difficulty = o.world_model.max_difficulty;
  c.world_model.edit_retries = o.world_model.edit_retries;
  c.world_model.max_chars = static_cast<std::size_t>(o.world_model.max_chars);
  c.world_model.lenient_edits = o.world_model.lenient_edits != 0;
  c.tune.rounds = o.tune.rounds;
  c.evolve.islands = o.evolve.islands;
  c.evolve.island_size = o.evolve.island_size;
  c.evolve.migration_interval = o.evolve.migration_interval;
  c.evolve.migration_size = o.evolve.migration_size;
  c.evolve.archive_size = o.evolve.archive_size;
  c.evolve.inspirations = o.evolve.inspirations;
  c.evolve.exploit_ratio = o.evolve.exploit_ratio;
  c.start_from_starting_point = o.start_from_starting_point != 0;
  c.remeasure = o.remeasure != 0;
  if (o.llm.source != KS_LLM_OPENAI && o.llm.model) c.model = o.llm.model;  // a label for the run
  apply_config_json(o.config_json, c);  // after the fields: a setting by name wins
  return c;
}

}  // namespace

ks_status fail(ks_status s, const std::string& message) noexcept {
  try {
    g_last_error = message;
  } catch (...) {
    g_last_error.clear();  // out of memory: the status still says what happened
  }
  return s;
}

char* copy_out(const std::string& s) {
  char* buf = static_cast<char*>(std::malloc(s.size() + 1));
  if (!buf) throw std::bad_alloc();
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return buf;
}

ks_status make_result(SearchOutcome outcome, ks_result** out) {
  auto r = std::make_unique<ks_result>();
  r->outcome = std::move(outcome);
  r->run_dir = r->outcome.run_dir.string();
  try {
    Json m = RunStore::open_read_only(r->outcome.run_dir).manifest();
    r->task = m["task"].get_string("name");
  } catch (const Error&) {
    // The outcome stands without it.
  }
  if (r->outcome.best) {
    if (!r->outcome.best->solution.launch_plan.empty()) r->plan = r->outcome.best->solution.launch_plan.to_json().dump(2);
    r->solution = r->outcome.best->solution.to_json().dump(2);
  }
  r->json = r->outcome.to_json().dump(2);
  bool cancelled = r->outcome.stop_reason == StopReason::cancelled;
  *out = r.release();
  if (cancelled) return fail(KS_E_CANCELLED, "the run was stopped by a callback or its cancel token; it can be resumed");
  return KS_OK;
}

}  // namespace ks::capi

using namespace ks::capi;

extern "C" {

const char* ks_version_string(void) { return KS_VERSION_STRING; }

void ks_version(int* major, int* minor, int* patch) {
  if (major) *major = KS_VERSION_MAJOR;
  if (minor) *minor = KS_VERSION_MINOR;
  if (patch) *patch = KS_VERSION_PATCH;
}

const char* ks_last_error_message(void) { return g_last_error.c_str(); }

ks_status ks_cancel_token_create(ks_cancel_token** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_cancel_token_create: out is NULL");
  *out = nullptr;
  return guarded("ks_cancel_token_create", [&] {
    *out = new ks_cancel_token();
    return KS_OK;
  });
}

void ks_cancel_token_destroy(ks_cancel_token* t) { delete t; }
void ks_cancel_token_cancel(ks_cancel_token* t) {
  if (t) t->token->cancel();
}
int ks_cancel_token_is_cancelled(const ks_cancel_token* t) { return t && t->token->cancelled() ? 1 : 0; }

ks_status ks_search_run(const ks_search_options* given, ks_result** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_search_run: out is NULL");
  *out = nullptr;
  if (!given) return fail(KS_E_INVALID_ARGUMENT, "ks_search_run: options is NULL");
  return guarded("ks_search_run", [&] {
    check_version("ks_search_options", given->version, KS_SEARCH_OPTIONS_VERSION);
    const ks_search_options* const o = given;
    if (!o->task || !*o->task) throw ks::Error(ks::Status::invalid_argument, "options.task is required");
    ks::SearchOptions so;
    so.task = o->task;
    so.config = config_of(*o);
    so.llm = llm_choice_of(o->llm, o->budget.max_cost_usd, "options.llm");
    so.custom_evaluator = evaluator_callback_of(o->eval.callback, o->eval.batch_callback, o->eval.user_data,
                                                o->eval.callback_device_json);
    apply_eval_options(o->eval, so.evaluator, "options.eval");
    so.infer_language = o->language_from_task != 0;
    so.weak_check = o->weak_check != 0;
    if (o->run_dir) so.run_dir = o->run_dir;
    if (o->kernelbench_dir) so.kernelbench_dir = o->kernelbench_dir;
    so.task_sources = task_sources_of(*o);
    so.wandb.enabled = o->wandb != 0;
    if (o->wandb_project) so.wandb.project = o->wandb_project;
    if (o->run_name) so.wandb.run_name = o->run_name;
    if (!so.wandb.enabled && (o->wandb_project || o->run_name))
      throw ks::Error(ks::Status::invalid_argument, "options.wandb_project and options.run_name need options.wandb");
    so.task_sources.kernelbench_dir = so.kernelbench_dir;
    if (o->continue_from_solution) {
      ks::TaskSpec spec = ks::load_task(so.task, so.task_sources)->spec();
      if (!so.infer_language) spec.languages = {so.config.language};
      try {
        so.config.continue_from_solution = ks::load_solution_file(o->continue_from_solution, spec);
        so.config.continue_from_solution_eval = ks::load_recorded_evaluation(o->continue_from_solution);
      } catch (const ks::Error& e) {
        throw ks::Error(e.status(), std::string("options.continue_from_solution: ") + e.what());
      }
      if (so.infer_language) {  // the kernel's language is the run's
        so.config.language = so.config.continue_from_solution->language;
        so.infer_language = false;
      }
    }
    if (o->continue_from_world_model) {
      if (!*o->continue_from_world_model)
        throw ks::Error(ks::Status::invalid_argument,
                        "options.continue_from_world_model is empty (NULL for none; a file, a run folder or auto)");
      so.continue_from_world_model = o->continue_from_world_model;
    }
    so.progress = progress_of(o->progress, o->progress_user_data);
    so.on_event = events_of(o->event, o->event_user_data);
    if (o->cancel) so.cancel = o->cancel->token;
    return make_result(ks::run_search(so), out);
  });
}

ks_status ks_search_resume(const char* run_dir, const ks_resume_options* o, ks_result** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_search_resume: out is NULL");
  *out = nullptr;
  if (!run_dir) return fail(KS_E_INVALID_ARGUMENT, "ks_search_resume: run_dir is NULL");
  if (!*run_dir) return fail(KS_E_INVALID_ARGUMENT, "ks_search_resume: run_dir is empty");
  return guarded("ks_search_resume", [&] {
    ks::ResumeOptions r;
    if (o) {
      check_version("ks_resume_options", o->version, KS_RESUME_OPTIONS_VERSION);
      if (o->llm) {
        ks::LlmChoice c = llm_choice_of(*o->llm, 0, "options.llm");
        if (c.kind == ks::LlmSource::custom) r.custom_llm = c.custom;
        else r.llm = c;
      }
      // The C ABI's rule: a larger value raises the budget; a smaller one
      // (0, the default) keeps it. A folder without a run is left for
      // resume_search to report.
      if (o->max_rounds > 0 && ks::RunStore::exists(run_dir)) {
        const ks::Json recorded = ks::RunStore::open_read_only(run_dir).manifest()["config"];
        if (o->max_rounds > recorded.get_int("max_rounds", 0)) r.max_rounds = o->max_rounds;
      }
      r.custom_evaluator = evaluator_callback_of(o->eval_callback, o->eval_batch_callback, o->eval_user_data, nullptr);
      r.progress = progress_of(o->progress, o->progress_user_data);
      r.on_event = events_of(o->event, o->event_user_data);
      if (o->cancel) r.cancel = o->cancel->token;
    }
    return make_result(ks::resume_search(run_dir, r), out);
  });
}

ks_status ks_search_replay(const char* recorded_run_dir, const ks_replay_options* o, ks_result** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_search_replay: out is NULL");
  *out = nullptr;
  if (!recorded_run_dir) return fail(KS_E_INVALID_ARGUMENT, "ks_search_replay: recorded_run_dir is NULL");
  if (!*recorded_run_dir) return fail(KS_E_INVALID_ARGUMENT, "ks_search_replay: recorded_run_dir is empty");
  return guarded("ks_search_replay", [&] {
    ks::ReplayOptions r;
    if (o) {
      r = replay_options_of(*o);
      r.custom_evaluator = evaluator_callback_of(o->eval_callback, o->eval_batch_callback, o->eval_user_data, nullptr);
      r.progress = progress_of(o->progress, o->progress_user_data);
      r.on_event = events_of(o->event, o->event_user_data);
      if (o->cancel) r.cancel = o->cancel->token;
    }
    return make_result(ks::replay_search(recorded_run_dir, r), out);
  });
}

void ks_result_destroy(ks_result* result) { delete result; }
int ks_result_has_best(const ks_result* r) { return r && r->outcome.best ? 1 : 0; }
double ks_result_best_latency_ms(const ks_result* r) { return r && r->outcome.best ? r->outcome.best->eval.latency_ms : 0; }
double ks_result_best_speedup(const ks_result* r) { return r && r->outcome.best ? r->outcome.best->eval.speedup : 0; }
int ks_result_best_round(const ks_result* r) { return r && r->outcome.best ? r->outcome.best->round : 0; }
int ks_result_rounds(const ks_result* r) { return r ? r->outcome.rounds : 0; }
const char* ks_result_run_dir(const ks_result* r) { return r ? r->run_dir.c_str() : ""; }
const char* ks_result_stop_reason(const ks_result* r) { return r ? to_string(r->outcome.stop_reason) : ""; }
ks_stop_reason ks_result_stop_reason_code(const ks_result* r) {
  return r ? stop_reason_to_c(r->outcome.stop_reason) : KS_STOP_MAX_ROUNDS;
}
const char* ks_result_task(const ks_result* r) { return r ? r->task.c_str() : ""; }

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
const char* ks_result_best_solution_json(const ks_result* r) { return r ? r->solution.c_str() : ""; }
const char* ks_result_json(const ks_result* r) { return r ? r->json.c_str() : ""; }

}  // extern "C"
