// The option structs of the C ABI: their init functions (the defaults come
// from the C++ API's own default values, never repeated here) and their
// translation into the C++ options, with every field checked by name.
#include <cmath>
#include <limits>

#include "capi_internal.hpp"
#include "ksearch/llm_policies.hpp"
#include "util/fs.hpp"

namespace ks::capi {
namespace {

// The size of each version of a struct, 0 for a version this library does
// not know. A struct is at version 1 unless a specialisation says otherwise.
template <typename T>
std::size_t struct_size(std::uint32_t version) {
  return version == 1 ? sizeof(T) : 0;
}
template <typename T>
constexpr std::uint32_t kLatestVersion = 1;

// The older layouts of ks_search_options, as programs built with those
// headers lay them out. A nested struct that grew moved every field after it:
//   versions 1..3: world_model at version 1 (ended after max_chars), eval at 1;
//   versions 4..5: world_model at version 2, eval at version 1 (ended after
//                  callback_device_json);
//   version 6:     eval at version 2 (timing), today's ks_search_options.
// Each older layout converts to the next one; fields a version lacks read as
// zero, and the init functions write an older layout through the same steps.
struct WorldModelOptionsV1 {
  std::uint32_t version;
  int stagnation_window;
  int max_difficulty;
  int edit_retries;
  std::uint64_t max_chars;
};
struct EvalOptionsV1 {
  std::uint32_t version;
  ks_backend backend;
  const int* devices;
  std::size_t device_count;
  int in_process;
  const char* cache_dir;
  const char* cuda_arch;
  ks_sandbox_mode sandbox;
  std::uint64_t memory_limit_bytes;
  double timing_cap_s;
  int seeds;
  double compile_timeout_s;
  double run_timeout_s;
  int compile_workers;
  const char* worker_path;
  const char* baseline_latencies_path;
  const char* options_json;
  ks_evaluate_callback callback;
  ks_evaluate_batch_callback batch_callback;
  void* user_data;
  const char* callback_device_json;
};
// Version 1 is a prefix of version 2: every field is where it was.
static_assert(sizeof(EvalOptionsV1) == offsetof(ks_eval_options, timing));
static_assert(offsetof(EvalOptionsV1, callback_device_json) == offsetof(ks_eval_options, callback_device_json));
static_assert(sizeof(WorldModelOptionsV1) == offsetof(ks_world_model_options, lenient_edits));

struct SearchOptionsV5 {
  std::uint32_t version;
  const char* task;
  const char* run_dir;
  const char* kernelbench_dir;
  ks_strategy strategy;
  ks_language language;
  int language_from_task;
  int parallel;
  std::uint64_t seed;
  ks_budget_options budget;
  ks_world_model_options world_model;
  ks_tune_options tune;
  EvalOptionsV1 eval;
  ks_llm_options llm;
  ks_progress_callback progress;
  void* progress_user_data;
  ks_event_callback event;
  void* event_user_data;
  ks_cancel_token* cancel;
  int weak_check;
  const char* continue_from_solution;
  const char* continue_from_world_model;
  int start_from_starting_point;
  int remeasure;
  const char* dataset;
  const char* baseline_solution;
  int measure_baseline;
  const char* const* feedback_workloads;
  std::size_t feedback_workload_count;
  const char* feedback_policy;
  int feedback_count;
  std::uint64_t feedback_seed;
  int wandb;
  const char* wandb_project;
  const char* run_name;
};
// Version 6 differs from it only in eval: the fields before it are where they
// were, and the ones after it moved together (so they copy as one block).
static_assert(offsetof(SearchOptionsV5, eval) == offsetof(ks_search_options, eval));
static_assert(sizeof(SearchOptionsV5) - offsetof(SearchOptionsV5, llm) ==
              offsetof(ks_search_options, evolve) - offsetof(ks_search_options, llm));

struct SearchOptionsV3 {
  std::uint32_t version;
  const char* task;
  const char* run_dir;
  const char* kernelbench_dir;
  ks_strategy strategy;
  ks_language language;
  int language_from_task;
  int parallel;
  std::uint64_t seed;
  ks_budget_options budget;
  WorldModelOptionsV1 world_model;
  ks_tune_options tune;
  EvalOptionsV1 eval;
  ks_llm_options llm;
  ks_progress_callback progress;
  void* progress_user_data;
  ks_event_callback event;
  void* event_user_data;
  ks_cancel_token* cancel;
  int weak_check;
  const char* continue_from_solution;
};
// Version 4 differs from it only in world_model, and appended fields.
static_assert(offsetof(SearchOptionsV3, world_model) == offsetof(SearchOptionsV5, world_model));
static_assert(sizeof(SearchOptionsV3) - offsetof(SearchOptionsV3, tune) ==
              offsetof(SearchOptionsV5, continue_from_world_model) - offsetof(SearchOptionsV5, tune));

// The old layouts are frozen, but they hold today's ks_budget_options,
// ks_tune_options and ks_llm_options: if one of those grew, the mirrors above
// would move with today's struct and the relative checks would still hold.
// Their sizes on LP64, measured from the headers of those versions, pin them.
static_assert(sizeof(void*) != 8 || (sizeof(WorldModelOptionsV1) == 24 && sizeof(EvalOptionsV1) == 160 &&
                                     sizeof(SearchOptionsV3) == 544 && sizeof(SearchOptionsV5) == 656));

template <>
std::size_t struct_size<ks_world_model_options>(std::uint32_t version) {
  switch (version) {
    case 1: return sizeof(WorldModelOptionsV1);
    case 2: return sizeof(ks_world_model_options);
    default: return 0;
  }
}
template <>
constexpr std::uint32_t kLatestVersion<ks_world_model_options> = 2;

template <>
std::size_t struct_size<ks_eval_options>(std::uint32_t version) {
  switch (version) {
    case 1: return sizeof(EvalOptionsV1);
    case 2: return sizeof(ks_eval_options);
    default: return 0;
  }
}
template <>
constexpr std::uint32_t kLatestVersion<ks_eval_options> = 2;

// Version 2 appended weak_check, version 3 continue_from_solution: an older
// struct ends where the next version's field begins. Version 4 appended
// continue_from_world_model, start_from_starting_point and remeasure, version
// 5 the dataset, feedback and W&B fields, version 6 evolve (and its eval grew).
template <>
std::size_t struct_size<ks_search_options>(std::uint32_t version) {
  switch (version) {
    case 1: return offsetof(SearchOptionsV3, weak_check);
    case 2: return offsetof(SearchOptionsV3, continue_from_solution);
    case 3: return sizeof(SearchOptionsV3);
    case 4: return offsetof(SearchOptionsV5, dataset);
    case 5: return sizeof(SearchOptionsV5);
    case 6: return sizeof(ks_search_options);
    default: return 0;
  }
}
template <>
constexpr std::uint32_t kLatestVersion<ks_search_options> = 6;
constexpr std::uint32_t kFirstSearchOptionsWithWorldModelV2 = 4;
constexpr std::uint32_t kFirstSearchOptionsWithEvalV2 = 6;

// Between versions 3 and 5: the fields before world_model and the block after
// it are copied as they are; world_model field by field (lenient_edits is not
// in the older one, and reads as 0: strict).
SearchOptionsV3 to_v3_layout(const SearchOptionsV5& o) {
  SearchOptionsV3 old;
  std::memset(&old, 0, sizeof old);
  std::memcpy(&old, &o, offsetof(SearchOptionsV3, world_model));
  old.world_model.version = 1;
  old.world_model.stagnation_window = o.world_model.stagnation_window;
  old.world_model.max_difficulty = o.world_model.max_difficulty;
  old.world_model.edit_retries = o.world_model.edit_retries;
  old.world_model.max_chars = o.world_model.max_chars;
  std::memcpy(&old.tune, &o.tune, sizeof old - offsetof(SearchOptionsV3, tune));
  return old;
}

SearchOptionsV5 from_v3_layout(const SearchOptionsV3& old) {
  SearchOptionsV5 o;
  std::memset(&o, 0, sizeof o);
  std::memcpy(&o, &old, offsetof(SearchOptionsV3, world_model));
  o.world_model.version = old.world_model.version;
  o.world_model.stagnation_window = old.world_model.stagnation_window;
  o.world_model.max_difficulty = old.world_model.max_difficulty;
  o.world_model.edit_retries = old.world_model.edit_retries;
  o.world_model.max_chars = old.world_model.max_chars;
  std::memcpy(&o.tune, &old.tune, sizeof old - offsetof(SearchOptionsV3, tune));
  return o;
}

// Between versions 5 and 6: eval's version 1 fields are a prefix of version
// 2's (timing is not in the older one, and reads as 0: the default).
SearchOptionsV5 to_v5_layout(const ks_search_options& o) {
  SearchOptionsV5 old;
  std::memset(&old, 0, sizeof old);
  std::memcpy(&old, &o, offsetof(SearchOptionsV5, eval));
  std::memcpy(&old.eval, &o.eval, sizeof old.eval);
  old.eval.version = 1;
  std::memcpy(&old.llm, &o.llm, sizeof old - offsetof(SearchOptionsV5, llm));
  return old;
}

ks_search_options from_v5_layout(const SearchOptionsV5& old) {
  ks_search_options o;
  std::memset(&o, 0, sizeof o);
  std::memcpy(&o, &old, offsetof(SearchOptionsV5, eval));
  std::memcpy(&o.eval, &old.eval, sizeof old.eval);
  std::memcpy(&o.llm, &old.llm, sizeof old - offsetof(SearchOptionsV5, llm));
  return o;
}

template <typename T>
ks_status init_struct(const char* where, T* options, std::uint32_t version) {
  if (!options) return fail(KS_E_INVALID_ARGUMENT, fmt::format("{}: options is NULL", where));
  std::size_t size = struct_size<T>(version);
  if (size == 0)
    return fail(KS_E_VERSION, fmt::format("{}: version {} is not one this library knows (it knows 1..{})", where,
                                          version, kLatestVersion<T>));
  std::memset(options, 0, size);
  options->version = version;
  return KS_OK;
}

void need_version(const char* field, std::uint32_t version) {
  if (version != 1)
    throw Error(Status::version,
                fmt::format("{}.version is {}; this library knows version 1 (initialise the struct with its "
                            "*_init function)",
                            field, version));
}

std::string str(const char* s) { return s ? s : ""; }

double finite_at_least(double v, double lo, const std::string& field, bool strictly = false) {
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

}  // namespace

void check_version(const char* what, std::uint32_t version, std::uint32_t known_max, bool known) {
  if (!known)
    throw Error(Status::version,
                fmt::format("{} version {} is not supported (this library knows 1..{}); initialise it with its "
                            "*_init function",
                            what, version, known_max));
}

void check_nested_version(const char* what, std::uint32_t version, std::uint32_t expected,
                          std::uint32_t parent_version) {
  if (version != expected)
    throw Error(Status::version,
                fmt::format("{} version {} does not fit ks_search_options version {}, which holds version {} of it "
                            "by value; initialise the whole struct with ks_search_options_init",
                            what, version, parent_version, expected));
}

std::size_t search_options_size(std::uint32_t version) { return struct_size<ks_search_options>(version); }

// Only the bytes of the caller's version are read: an older struct is shorter.
ks_search_options search_options_in_current_layout(const ks_search_options* o) {
  const std::size_t size = struct_size<ks_search_options>(o->version);
  if (o->version >= kFirstSearchOptionsWithEvalV2) {
    ks_search_options now;
    std::memset(&now, 0, sizeof now);
    std::memcpy(&now, o, size);
    return now;
  }
  SearchOptionsV5 v5;
  std::memset(&v5, 0, sizeof v5);
  if (o->version >= kFirstSearchOptionsWithWorldModelV2) {
    std::memcpy(&v5, o, size);
  } else {
    SearchOptionsV3 v3;
    std::memset(&v3, 0, sizeof v3);
    std::memcpy(&v3, o, size);
    v5 = from_v3_layout(v3);
  }
  return from_v5_layout(v5);
}

ks_eval_options eval_options_in_current_layout(const ks_eval_options* o) {
  check_version("ks_eval_options", o->version, kLatestVersion<ks_eval_options>,
                struct_size<ks_eval_options>(o->version) != 0);
  ks_eval_options now;
  std::memset(&now, 0, sizeof now);
  std::memcpy(&now, o, struct_size<ks_eval_options>(o->version));
  return now;
}

std::uint32_t eval_options_version_in(std::uint32_t search_options_version) {
  return search_options_version >= kFirstSearchOptionsWithEvalV2 ? 2 : 1;
}

ReplayOptions replay_options_of(const ks_replay_options& o) {
  check_version("ks_replay_options", o.version, KS_REPLAY_OPTIONS_VERSION, struct_size<ks_replay_options>(o.version) != 0);
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

LlmChoice llm_choice_of(const ks_llm_options& o, double max_cost_usd, const char* prefix) {
  const std::string p = prefix;
  need_version(prefix, o.version);
  LlmChoice c;
  const bool callbacks = o.callback || o.batch_callback;
  if (callbacks && o.source != KS_LLM_CALLBACK && o.source != KS_LLM_BATCH_CALLBACK)
    throw Error(Status::invalid_argument,
                fmt::format("{0}.callback or {0}.batch_callback is set but {0}.source is \"{1}\"; set {0}.source to "
                            "KS_LLM_CALLBACK or KS_LLM_BATCH_CALLBACK",
                            p, ks_llm_source_name(o.source)));
  switch (o.source) {
    case KS_LLM_OPENAI: {
      c.kind = LlmSource::openai;
      OpenAiConfig& a = c.openai;
      a.model = str(o.model);
      if (a.model.empty())
        throw Error(Status::invalid_argument,
                    fmt::format("{0}.model is required with KS_LLM_OPENAI (or set {0}.source to KS_LLM_OFFLINE with "
                                "the tune strategy, KS_LLM_REPLAY or a callback)",
                                p));
      if (o.base_url) a.base_url = o.base_url;
      if (o.api != KS_API_CHAT && o.api != KS_API_RESPONSES)
        throw Error(Status::invalid_argument, fmt::format("{}.api is {}, not a ks_api_kind", p, static_cast<int>(o.api)));
      a.api = o.api == KS_API_RESPONSES ? OpenAiApi::responses : OpenAiApi::chat;
      a.reasoning_effort = str(o.reasoning_effort);
      if (std::isnan(o.temperature)) throw Error(Status::invalid_argument, p + ".temperature is NaN");
      if (o.temperature >= 0) a.temperature = o.temperature;
      if (o.max_output_tokens < 0)
        throw Error(Status::invalid_argument, fmt::format("{}.max_output_tokens must be >= 0", p));
      a.max_output_tokens = o.max_output_tokens;
      if (o.api_key_env) a.api_key_env = o.api_key_env;
      a.api_key = str(o.api_key);
      for (const std::string& h : string_array(o.headers, o.header_count, p + ".headers")) {
        auto colon = h.find(':');
        if (colon == std::string::npos || colon == 0)
          throw Error(Status::invalid_argument, fmt::format("{}.headers: \"{}\" must look like \"Name: value\"", p, h));
        std::string value = h.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        a.extra_headers[h.substr(0, colon)] = value;
      }
      a.request_timeout_s = finite_at_least(o.request_timeout_s, 0, p + ".request_timeout_s", true);
      a.connect_timeout_s = finite_at_least(o.connect_timeout_s, 0, p + ".connect_timeout_s", true);
      a.proxy = str(o.proxy);
      if (o.max_retries < 0) throw Error(Status::invalid_argument, p + ".max_retries must be >= 0");
      a.max_retries = o.max_retries;
      if (o.max_concurrency < 1) throw Error(Status::invalid_argument, p + ".max_concurrency must be >= 1");
      a.max_concurrency = o.max_concurrency;
      a.max_cost_usd = max_cost_usd;  // the CLI's --max-cost also stops requests at the source
      a.price_file = str(o.price_file);
      if (o.extra_body_json) a.extra_body = json_object_field(o.extra_body_json, p + ".extra_body_json");
      break;
    }
    case KS_LLM_OFFLINE: c.kind = LlmSource::offline; break;
    case KS_LLM_REPLAY:
      c.kind = LlmSource::replay;
      if (!o.replay_path || !*o.replay_path)
        throw Error(Status::invalid_argument, p + ".replay_path is required with KS_LLM_REPLAY");
      c.replay_path = o.replay_path;
      c.on_divergence = divergence_of(o.replay_on_divergence, (p + ".replay_on_divergence").c_str());
      break;
    case KS_LLM_COMMAND:
      c.kind = LlmSource::command;
      c.command.argv = string_array(o.command_argv, o.command_argc, p + ".command_argv");
      if (c.command.argv.empty() || c.command.argv[0].empty())
        throw Error(Status::invalid_argument, p + ".command_argv must name a program (command_argc >= 1)");
      c.command.timeout_s = finite_at_least(o.command_timeout_s, 0, p + ".command_timeout_s", true);
      if (o.command_input != KS_COMMAND_INPUT_PLAIN && o.command_input != KS_COMMAND_INPUT_JSON)
        throw Error(Status::invalid_argument, p + ".command_input is not a ks_command_input");
      c.command.input = o.command_input == KS_COMMAND_INPUT_JSON ? CommandConfig::Input::json : CommandConfig::Input::plain;
      break;
    case KS_LLM_CALLBACK:
      if (!o.callback) throw Error(Status::invalid_argument, p + ".source is KS_LLM_CALLBACK but " + p + ".callback is NULL");
      c.kind = LlmSource::custom;
      c.custom = llm_callback_policy(o.callback, o.user_data);
      break;
    case KS_LLM_BATCH_CALLBACK:
      if (!o.batch_callback)
        throw Error(Status::invalid_argument,
                    p + ".source is KS_LLM_BATCH_CALLBACK but " + p + ".batch_callback is NULL");
      c.kind = LlmSource::custom;
      c.custom = llm_batch_callback_policy(o.batch_callback, o.user_data);
      break;
    default:
      throw Error(Status::invalid_argument,
                  fmt::format("{}.source is {}, which is not a ks_llm_source", p, static_cast<int>(o.source)));
  }
  return c;
}

void apply_eval_options(const ks_eval_options& o, EvaluatorConfig& e, const char* prefix) {
  const std::string p = prefix;
  check_version(prefix, o.version, kLatestVersion<ks_eval_options>, struct_size<ks_eval_options>(o.version) != 0);
  e.backend = backend_of(o.backend, (p + ".backend").c_str());
  if (o.device_count > 0 && !o.devices)
    throw Error(Status::invalid_argument, fmt::format("{}.devices is NULL but device_count is {}", p, o.device_count));
  e.devices.assign(o.devices, o.devices + o.device_count);
  for (int d : e.devices)
    if (d < 0) throw Error(Status::invalid_argument, fmt::format("{}.devices holds {}, not a GPU ordinal", p, d));
  e.in_process = o.in_process != 0;
  e.cache_dir = str(o.cache_dir);
  e.cuda_arch = str(o.cuda_arch);
  e.sandbox = sandbox_of(o.sandbox, (p + ".sandbox").c_str());
  e.memory_limit_bytes = o.memory_limit_bytes;
  e.worker_path = str(o.worker_path);
  if (o.compile_workers < 0) throw Error(Status::invalid_argument, p + ".compile_workers must be >= 0");
  e.compile_workers = o.compile_workers;
  EvalOptions& x = e.options;
  x.max_time_per_workload_s = finite_at_least(o.timing_cap_s, 0, p + ".timing_cap_s", true);
  if (o.seeds < 2 || o.seeds > 64)
    throw Error(Status::invalid_argument,
                fmt::format("{}.seeds must be between 2 and 64 (two input sets are checked per workload), is {}", p,
                            o.seeds));
  x.seeds_per_workload = o.seeds;
  x.compile_timeout_s = finite_at_least(o.compile_timeout_s, 0, p + ".compile_timeout_s", true);
  x.run_timeout_s = finite_at_least(o.run_timeout_s, 0, p + ".run_timeout_s", true);
  if (o.version >= 2) x.timing = timing_of(o.timing, (p + ".timing").c_str());
  if (o.baseline_latencies_path) {
    const std::string where = p + ".baseline_latencies_path";
    std::string text;
    try {
      text = util::read_file(o.baseline_latencies_path, std::size_t{64} << 20);
    } catch (const Error& err) {
      throw Error(Status::not_found, fmt::format("{}: {}", where, err.what()));
    }
    Json b = json_object_field(text.c_str(), fmt::format("{} ({})", where, o.baseline_latencies_path));
    x.baseline_latencies = std::move(b);
  }
  if (o.options_json) {
    Json extra = json_object_field(o.options_json, p + ".options_json");
    Json merged = x.to_json();
    for (const auto& [k, v] : extra.as_object()) {
      if (!merged.contains(k)) {
        std::string names;
        for (const auto& [n, unused] : merged.as_object()) names += (names.empty() ? "" : ", ") + n;
        throw Error(Status::invalid_argument,
                    fmt::format("{}.options_json: unknown setting \"{}\" (known: {})", p, k, names));
      }
      merged[k] = v;
    }
    try {
      x = EvalOptions::from_json(merged);
    } catch (const Error& err) {
      throw Error(Status::invalid_argument, fmt::format("{}.options_json: {}", p, err.what()));
    }
  }
}

// Version 5's dataset and feedback fields (the CLI's --dataset, ...).
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
  if (ks_status s = init_struct("ks_budget_options_init", o, version); s != KS_OK) return s;
  ks::SearchConfig d;
  o->max_rounds = d.max_rounds;
  o->max_cost_usd = d.max_cost_usd;
  o->max_wall_s = d.max_wall_s;
  o->max_answer_bytes = d.max_answer_bytes;
  return KS_OK;
}

ks_status ks_world_model_options_init(ks_world_model_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_world_model_options_init", o, version); s != KS_OK) return s;
  ks::SearchConfig d;
  o->stagnation_window = d.world_model.stagnation_window;
  o->max_difficulty = d.world_model.max_difficulty;
  o->edit_retries = d.world_model.edit_retries;
  o->max_chars = d.world_model.max_chars;
  if (version >= 2) o->lenient_edits = d.world_model.lenient_edits ? 1 : 0;
  return KS_OK;
}

ks_status ks_tune_options_init(ks_tune_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_tune_options_init", o, version); s != KS_OK) return s;
  o->rounds = ks::SearchConfig{}.tune.rounds;
  return KS_OK;
}

ks_status ks_evolve_options_init(ks_evolve_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_evolve_options_init", o, version); s != KS_OK) return s;
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

ks_status ks_eval_options_init(ks_eval_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_eval_options_init", o, version); s != KS_OK) return s;
  ks::EvaluatorConfig d;
  o->backend = static_cast<ks_backend>(static_cast<int>(d.backend));
  o->in_process = d.in_process ? 1 : 0;
  o->sandbox = static_cast<ks_sandbox_mode>(static_cast<int>(d.sandbox));
  o->memory_limit_bytes = d.memory_limit_bytes;
  o->timing_cap_s = d.options.max_time_per_workload_s;
  o->seeds = d.options.seeds_per_workload;
  o->compile_timeout_s = d.options.compile_timeout_s;
  o->run_timeout_s = d.options.run_timeout_s;
  o->compile_workers = d.compile_workers;
  if (version >= 2) o->timing = static_cast<ks_timing_mode>(static_cast<int>(d.options.timing));
  return KS_OK;
}

ks_status ks_llm_options_init(ks_llm_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_llm_options_init", o, version); s != KS_OK) return s;
  ks::OpenAiConfig a;
  ks::CommandConfig c;
  o->source = KS_LLM_OPENAI;
  o->api = KS_API_CHAT;
  o->temperature = -1;
  o->max_output_tokens = a.max_output_tokens;
  o->request_timeout_s = a.request_timeout_s;
  o->connect_timeout_s = a.connect_timeout_s;
  o->max_retries = a.max_retries;
  o->max_concurrency = a.max_concurrency;
  o->command_timeout_s = c.timeout_s;
  o->command_input = KS_COMMAND_INPUT_PLAIN;
  return KS_OK;
}

ks_status ks_search_options_init(ks_search_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_search_options_init", o, version); s != KS_OK) return s;
  if (version < kFirstSearchOptionsWithEvalV2) {
    // An older layout: the defaults written through it, and not a byte more.
    ks_search_options now;
    ks_status s = ks_search_options_init(&now, kLatestVersion<ks_search_options>);
    SearchOptionsV5 v5 = to_v5_layout(now);
    v5.version = version;
    if (version >= kFirstSearchOptionsWithWorldModelV2) {
      std::memcpy(static_cast<void*>(o), &v5, struct_size<ks_search_options>(version));
    } else {
      SearchOptionsV3 v3 = to_v3_layout(v5);
      std::memcpy(static_cast<void*>(o), &v3, struct_size<ks_search_options>(version));
    }
    return s;
  }
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
  if (version >= 2) o->weak_check = ks::SearchOptions{}.weak_check ? 1 : 0;
  if (version >= 3) o->continue_from_solution = nullptr;
  if (version >= 4) {
    o->continue_from_world_model = nullptr;
    o->start_from_starting_point = d.start_from_starting_point ? 1 : 0;
    o->remeasure = d.remeasure ? 1 : 0;
  }
  if (version >= 5) o->feedback_count = ks::FeedbackSelection{}.count;
  if (s == KS_OK && version >= 6) s = ks_evolve_options_init(&o->evolve, KS_EVOLVE_OPTIONS_VERSION);
  return s;
}

ks_status ks_replay_options_init(ks_replay_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_replay_options_init", o, version); s != KS_OK) return s;
  o->on_divergence = KS_REPLAY_STOP;
  o->allow_prompt_changes = ks::ReplayOptions{}.check_prompts ? 0 : 1;
  return KS_OK;
}

ks_status ks_resume_options_init(ks_resume_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_resume_options_init", o, version); s != KS_OK) return s;
  o->max_rounds = ks::ResumeOptions{}.max_rounds;
  return KS_OK;
}

}  // extern "C"
