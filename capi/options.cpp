// The option structs of the C ABI: their init functions (the defaults come
// from the C++ API's own default values, never repeated here), the version
// check, the translation of the search's struct fields that are not the
// LLM's (llm_options.cpp) or the evaluator's (eval.cpp), and the settings by
// name (the library's settings table, ksearch/search_settings.hpp).
//
// One layout per minor release (docs/api.md, "The C ABI's promise"): a
// struct of any other version is refused before a byte past its version is
// read, so there are no older layouts to convert.
#include <cmath>

#include "capi_internal.hpp"
#include "ksearch/search_settings.hpp"

namespace ks::capi {
namespace {

template <typename T>
ks_status init_struct(const char* where, T* options, std::uint32_t version, std::uint32_t current) {
  if (!options) return fail(KS_E_INVALID_ARGUMENT, fmt::format("{}: options is NULL", where));
  if (version != current)
    return fail(KS_E_VERSION, fmt::format("{}: version {} is not this library's ({}); build against the headers "
                                          "of the library you run with",
                                          where, version, current));
  std::memset(static_cast<void*>(options), 0, sizeof(T));
  options->version = version;
  return KS_OK;
}

}  // namespace

std::string str(const char* s) { return s ? s : ""; }

double finite_at_least(double v, double lo, const std::string& field, bool strictly) {
  if (!std::isfinite(v) || v < lo || (strictly && v == lo))
    throw Error(Status::invalid_argument,
                fmt::format("{} must be a finite number {} {}, is {}", field, strictly ? ">" : ">=", lo, v));
  return v;
}

std::vector<std::string> string_array(const char* const* items, std::size_t n, const std::string& field) {
  if (n > 0 && !items) throw Error(Status::invalid_argument, fmt::format("{} is NULL but its count is {}", field, n));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    if (!items[i]) throw Error(Status::invalid_argument, fmt::format("{}[{}] is NULL", field, i));
    out.emplace_back(items[i]);
  }
  return out;
}

Json json_object_field(const char* text, const std::string& field) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Error& e) {
    throw Error(Status::invalid_argument, fmt::format("{} is not valid JSON: {}", field, e.what()));
  }
  if (!j.is_object()) throw Error(Status::invalid_argument, fmt::format("{} must be a JSON object", field));
  return j;
}

void check_version(const char* what, std::uint32_t version, std::uint32_t current) {
  if (version != current)
    throw Error(Status::version,
                fmt::format("{} version {} is not this library's ({}); initialise it with its *_init function and "
                            "build against the headers of the library you run with",
                            what, version, current));
}

void apply_config_json(const char* text, SearchConfig& c) {
  if (!text) return;
  const Json settings = json_object_field(text, "options.config_json");
  for (const auto& [key, value] : settings.as_object()) {
    try {
      set_search_setting(c, key, value);
    } catch (const Error& e) {
      throw Error(Status::invalid_argument, fmt::format("options.config_json: {}", e.what()));
    }
  }
}

ReplayOptions replay_options_of(const ks_replay_options& o) {
  check_version("ks_replay_options", o.version, KS_REPLAY_OPTIONS_VERSION);
  ReplayOptions r;
  if (o.run_dir) r.run_dir = o.run_dir;
  if (o.config_changes_json) r.config_changes = json_object_field(o.config_changes_json, "options.config_changes_json");
  if (o.llm) {
    LlmChoice c = llm_choice_of(*o.llm, 0, "options.llm");
    if (c.kind == LlmSource::replay || c.kind == LlmSource::offline)
      throw Error(Status::invalid_argument,
                  "options.llm names the model to go on with live: KS_LLM_OPENAI, KS_LLM_COMMAND or a callback");
    if (c.kind == LlmSource::custom) r.custom_llm = c.custom;
    else r.llm = c;
  }
  r.on_divergence = divergence_of(o.on_divergence, "options.on_divergence");
  if (o.llm && r.on_divergence == ReplayDivergence::stop) r.on_divergence = ReplayDivergence::live;
  r.check_prompts = o.allow_prompt_changes == 0;
  return r;
}

// The dataset and feedback fields (the CLI's --dataset, ...).
TaskSources task_sources_of(const ks_search_options& o) {
  TaskSources t;
  if (o.dataset) t.dataset = o.dataset;
  if (o.baseline_solution) t.baseline_solution = o.baseline_solution;
  t.measure_baseline = o.measure_baseline != 0;
  t.feedback.workloads = string_array(o.feedback_workloads, o.feedback_workload_count, "options.feedback_workloads");
  if (o.feedback_policy) t.feedback.policy = o.feedback_policy;
  t.feedback.count = o.feedback_count;
  t.feedback.seed = o.feedback_seed;
  if (!t.feedback.policy.empty() && t.feedback.count < 1)
    throw Error(Status::invalid_argument, "options.feedback_count must be at least 1 with a feedback_policy");
  return t;
}

}  // namespace ks::capi

using namespace ks::capi;

extern "C" {

ks_status ks_budget_options_init(ks_budget_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_budget_options_init", o, version, KS_BUDGET_OPTIONS_VERSION); s != KS_OK) return s;
  ks::SearchConfig d;
  o->max_rounds = d.max_rounds;
  o->max_cost_usd = d.max_cost_usd;
  o->max_wall_s = d.max_wall_s;
  o->max_answer_bytes = d.max_answer_bytes;
  return KS_OK;
}

ks_status ks_world_model_options_init(ks_world_model_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_world_model_options_init", o, version, KS_WORLD_MODEL_OPTIONS_VERSION); s != KS_OK) return s;
  ks::SearchConfig d;
  o->stagnation_window = d.world_model.stagnation_window;
  o->max_difficulty = d.world_model.max_difficulty;
  o->edit_retries = d.world_model.edit_retries;
  o->max_chars = d.world_model.max_chars;
  o->lenient_edits = d.world_model.lenient_edits ? 1 : 0;
  return KS_OK;
}

ks_status ks_tune_options_init(ks_tune_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_tune_options_init", o, version, KS_TUNE_OPTIONS_VERSION); s != KS_OK) return s;
  o->rounds = ks::SearchConfig{}.tune.rounds;
  return KS_OK;
}

ks_status ks_evolve_options_init(ks_evolve_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_evolve_options_init", o, version, KS_EVOLVE_OPTIONS_VERSION); s != KS_OK) return s;
  const ks::EvolveOptions d;
  o->islands = d.islands;
  o->island_size = d.island_size;
  o->migration_interval = d.migration_interval;
  o->migration_size = d.migration_size;
  o->archive_size = d.archive_size;
  o->inspirations = d.inspirations;
  o->exploit_ratio = d.exploit_ratio;
  return KS_OK;
}

ks_status ks_search_options_init(ks_search_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_search_options_init", o, version, KS_SEARCH_OPTIONS_VERSION); s != KS_OK)
    return s;
  ks::SearchConfig d;
  o->strategy = KS_STRATEGY_AUTO;
  o->language = KS_LANGUAGE_CUDA;
  o->language_from_task = 1;
  o->parallel = d.parallel;
  o->seed = d.seed;
  ks_status s = ks_budget_options_init(&o->budget, KS_BUDGET_OPTIONS_VERSION);
  if (s == KS_OK) s = ks_world_model_options_init(&o->world_model, KS_WORLD_MODEL_OPTIONS_VERSION);
  if (s == KS_OK) s = ks_tune_options_init(&o->tune, KS_TUNE_OPTIONS_VERSION);
  if (s == KS_OK) s = ks_eval_options_init(&o->eval, KS_EVAL_OPTIONS_VERSION);
  if (s == KS_OK) s = ks_llm_options_init(&o->llm, KS_LLM_OPTIONS_VERSION);
  if (s == KS_OK) s = ks_evolve_options_init(&o->evolve, KS_EVOLVE_OPTIONS_VERSION);
  o->weak_check = ks::SearchOptions{}.weak_check ? 1 : 0;
  o->start_from_starting_point = d.start_from_starting_point ? 1 : 0;
  o->remeasure = d.remeasure ? 1 : 0;
  o->feedback_count = ks::FeedbackSelection{}.count;
  return s;
}

ks_status ks_replay_options_init(ks_replay_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_replay_options_init", o, version, KS_REPLAY_OPTIONS_VERSION); s != KS_OK) return s;
  o->on_divergence = KS_REPLAY_STOP;
  o->allow_prompt_changes = ks::ReplayOptions{}.check_prompts ? 0 : 1;
  return KS_OK;
}

ks_status ks_resume_options_init(ks_resume_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_resume_options_init", o, version, KS_RESUME_OPTIONS_VERSION); s != KS_OK) return s;
  o->max_rounds = ks::ResumeOptions{}.max_rounds;
  return KS_OK;
}

size_t ks_search_setting_count(void) {
  std::size_t n = 0;
  for (const auto& s : ks::search_settings()) n += s.settable ? 1 : 0;
  return n;
}

const char* ks_search_setting_name(size_t index) {
  for (const auto& s : ks::search_settings())
    if (s.settable && index-- == 0) return s.key.c_str();
  return "";
}

ks_status ks_search_setting_bounds(const char* name, ks_setting_bounds* out) {
  if (!name || !out) return fail(KS_E_INVALID_ARGUMENT, "ks_search_setting_bounds: name or out is NULL");
  const ks::SettingSpec* s = ks::find_search_setting(name);
  if (!s || !s->settable)
    return fail(KS_E_NOT_FOUND, fmt::format("ks_search_setting_bounds: \"{}\" is not a search setting", name));
  out->type = s->type == ks::SettingType::number    ? KS_SETTING_NUMBER
              : s->type == ks::SettingType::boolean ? KS_SETTING_BOOLEAN
              : s->type == ks::SettingType::bytes   ? KS_SETTING_BYTES
                                                    : KS_SETTING_INTEGER;
  out->min = s->min;
  out->max = s->max;
  const ks::Json d = s->default_value();
  out->default_value = d.is_bool() ? (d.as_bool() ? 1.0 : 0.0) : d.as_number();
  return KS_OK;
}

const char* ks_search_settings_json(void) {
  static const std::string text = ks::search_settings_json().dump(2);
  return text.c_str();
}

}  // extern "C"
