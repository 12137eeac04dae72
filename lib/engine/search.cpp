// run_search / resume_search / replay_search: wiring a task, an evaluator,
// an LLM policy, the world model and a strategy to a run folder, and
// recording what was used. The pieces live beside it: the LLM choice
// (llm_choice.hpp), the wrappers around the evaluator and policy
// (wrappers.hpp), the recordings a replay follows (recording.hpp) and the
// manifest's type and codec (run_manifest.hpp).
#include "ksearch/search.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>

#include "core/run_events.hpp"
#include "search/session.hpp"
#include "engine/llm_choice.hpp"
#include "engine/recording.hpp"
#include "engine/resume_guard.hpp"
#include "engine/run_manifest.hpp"
#include "engine/wandb_logger.hpp"
#include "engine/warm_start.hpp"
#include "engine/wrappers.hpp"
#include "eval/host/host_device.hpp"
#include "eval/python/python_program.hpp"
#include "search/tune/tune_strategy.hpp"
#include "ksearch/error.hpp"
#include "ksearch/log.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/version.h"
#include "ksearch/weak_check.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/world_model.hpp"
#include "util/json_fields.hpp"
#include "util/secrets.hpp"
#include "util/text.hpp"

KS_NAMESPACE_BEGIN

namespace fs = std::filesystem;

namespace {

// Wraps a shared policy for the Session, which takes a reference.
struct Parts {
  std::shared_ptr<Task> task;
  std::shared_ptr<Evaluator> evaluator;
  std::shared_ptr<LlmPolicy> llm;
  std::shared_ptr<WorldModel> world_model;  // null: a fresh tree world model
  std::shared_ptr<SearchStrategy> strategy;  // null: the configured built-in one
  std::optional<core::Recording> recording;
  // What Python candidates run with, for the prompts' device line ("" when
  // the language is native or a custom evaluator runs them).
  std::string environment;
};

// What the host observes and controls a run with.
struct Hooks {
  ProgressCallback progress;
  EventCallback on_event;
  std::shared_ptr<CancelToken> cancel;
};

std::string task_fingerprint(const Task& t) { return engine::task_fingerprint(t.spec()); }

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

fs::path default_run_dir(const std::string& task_name) {
  std::string safe;
  for (char c : task_name) safe.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_');
  std::string ts = utc_timestamp();  // 2026-11-26T01:23:45.678Z
  std::string compact;
  for (char c : ts.substr(0, 19))
    if (c != '-' && c != ':') compact.push_back(c == 'T' ? '-' : c);
  return fs::path("runs") / fmt::format("{}-{}", safe, compact);
}

// A task given by path is recorded by its absolute path so a resume from
// another working directory finds it.
std::string task_reference(const std::string& task) {
  std::error_code ec;
  if (!task.empty() && fs::exists(task, ec)) return fs::absolute(task).string();
  return task;
}

void check_language(const Task& task, Language lang) {
  for (auto l : task.spec().languages)
    if (l == lang) return;
  std::string langs;
  for (auto l : task.spec().languages) langs += (langs.empty() ? "" : ", ") + std::string(to_string(l));
  throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no \"{}\" version (it supports: {}); use --language",
                                                    task.name(), to_string(lang), langs));
}

SearchOutcome execute_session(Parts& parts, RunStore& store, const SearchConfig& config,
                              const ProgressCallback& progress);

// How the task was set up, for resume and replay: the dataset by its
// absolute path, and a chosen feedback subset as the workloads it chose (a
// random draw is not made again).
Json recorded_sources(TaskSources s, const Task& task) {
  std::error_code ec;
  if (!s.dataset.empty()) s.dataset = fs::absolute(s.dataset, ec);
  if (!s.feedback.empty()) {
    s.feedback = FeedbackSelection{};
    s.feedback.workloads = task.spec().feedback_workloads;
  }
  return s.to_json();
}

// Which workloads the search evaluates each round and which the final
// evaluation covers (every one; it runs only when the first are a subset),
// and how the first were chosen.
Json workloads_record(const TaskSpec& spec, const FeedbackSelection& selection) {
  std::vector<std::string> all;
  for (const auto& w : spec.workloads) all.push_back(w.name);
  const bool subset = spec.has_feedback_subset();
  Json j = Json::obj({{"feedback", util::string_array(subset ? spec.feedback_workloads : all)},
                      {"final", util::string_array(all)},
                      {"final_evaluation", subset},
                      {"chosen_by", !selection.workloads.empty() ? "pinned"
                                    : !selection.policy.empty()  ? selection.policy
                                                                 : "task"}});
  if (!selection.empty()) j["selection"] = selection.to_json();
  return j;
}

// The name of the device candidates in `lang` run on (EvalResult::device).
std::string evaluation_device(const EvaluatorConfig& ec, Evaluator& ev, Language lang) {
  return evaluates_on_gpu(lang, ec.backend) ? ev.device().name : eval::host::host_device_info().name;
}

// Whether the world-model search of a new run starts from the task's
// starting point: the built-in strategy building its own tree, nothing else
// to start from, a starting point in the run's language, and a budget that
// leaves a round for the search after it.
bool uses_starting_point(const SearchConfig& config, const Parts& parts) {
  if (parts.strategy || config.strategy != StrategyKind::world_model) return false;
  if (config.continue_from_solution || config.continue_from_world_model) return false;
  if (parts.world_model && parts.world_model->initialized()) return false;
  if (config.max_rounds < 2) return false;
  for (const auto& sp : parts.task->spec().starting_points)
    if (sp.language == config.language) return true;
  return false;
}

// Connects the host's hooks to the run's parts for the length of the run.
class HookedRun {
 public:
  HookedRun(Parts& parts, RunStore& store, const Hooks& hooks) : store_(store) {
    if (hooks.on_event) store.set_event_listener(hooks.on_event);
    if (!hooks.cancel) return;
    parts.llm = engine::cancellable_llm(parts.llm, hooks.cancel);
    parts.evaluator = engine::cancellable_evaluator(parts.evaluator, hooks.cancel);
    // Unsubscribed (waiting for a handler that is running) before the parts go.
    sub_.emplace(hooks.cancel.get(), [llm = parts.llm, ev = parts.evaluator] {
      llm->cancel();
      ev->cancel();
    });
  }
  ~HookedRun() { store_.set_event_listener({}); }

 private:
  RunStore& store_;
  std::optional<CancelToken::Subscription> sub_;
};

// What Python candidates run with, for the prompts' device line.
std::string python_environment(Language lang) {
  if (!language_is_python(lang)) return {};
  const auto& f = eval::python::python_facts();
  std::string env = fmt::format("candidates run with Python {}, PyTorch {}", f.version, f.torch);
  if (lang == Language::triton) env += ", Triton " + f.triton;
  return env;
}

// Before the first LLM call: the backend the task's language needs must be
// usable here, so a CUDA run on a machine without a GPU ends in seconds
// instead of after its first paid answers.
void check_backend(const EvaluatorConfig& ec, bool custom_evaluator, const Task& task, Language lang) {
  if (custom_evaluator) return;  // the host's evaluator knows what it can run
  bool gpu = false;
  try {
    gpu = evaluates_on_gpu(lang, ec.backend);
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("task \"{}\": {}", task.name(), e.what()));
  }
  std::string why;
  if (gpu && !cuda_available(&why))
    throw Error(Status::no_device,
                fmt::format("task \"{}\" in {} needs a GPU, but CUDA is not usable here: {}. Nothing was sent to the "
                            "LLM{}",
                            task.name(), to_string(lang), why,
                            lang == Language::cuda && std::find(task.spec().languages.begin(),
                                                                task.spec().languages.end(),
                                                                Language::cpp) != task.spec().languages.end()
                                ? "; --language cpp runs the task's host version"
                                : ""));
  // The interpreter must have what the language needs where it runs.
  if (language_is_python(lang))
    if (std::string problem = eval::python::python_problem(lang, gpu); !problem.empty())
      throw Error(Status::not_found, problem + ". Nothing was sent to the LLM");
}

// Before the first LLM request: whether the task's check tells a kernel that
// computes nothing from the reference (ksearch/weak_check.hpp). A weak check
// is said, not refused (the task's author may know), and recorded in the
// manifest. A check that cannot run is a warning, never the run's end: the
// search then meets the same problem itself and says so.
WeakCheckReport weak_check_before_run(const SearchOptions& options, Parts& parts, Language lang) {
  const Task& task = *parts.task;
  // Python candidates are checked like the native ones of the backend they
  // run on: the weakness is the task's (its workloads and tolerance), and
  // the trivial candidates are written in the backend's language.
  if (language_is_python(lang)) {
    lang = evaluates_on_gpu(lang, options.evaluator.backend) ? Language::cuda : Language::cpp;
    if (std::find(task.spec().languages.begin(), task.spec().languages.end(), lang) == task.spec().languages.end())
      return weak_check_skipped(task, lang, fmt::format("the task has no {} version to probe its check with",
                                                        to_string(lang)));
  }
  if (!options.weak_check) return weak_check_skipped(task, lang, "turned off (--no-weak-check)");
  if (options.custom_evaluator)
    return weak_check_skipped(task, lang, "the host's own evaluator evaluates the candidates");
  std::optional<CancelToken::Subscription> sub;
  if (options.cancel) sub.emplace(options.cancel.get(), [ev = parts.evaluator] { ev->cancel(); });
  // The workloads the search will evaluate: those the evaluator was told to
  // evaluate, else the task's feedback workloads (check_weak's default).
  WeakCheckOptions wo;
  wo.workloads = parts.evaluator->options().only_workloads;
  wo.every_workload = false;  // whether one passes everywhere is what matters here, at one evaluation
  WeakCheckReport r;
  try {
    r = check_weak(task, lang, *parts.evaluator, wo);
  } catch (const Error& e) {
    if (e.status() == Status::cancelled) throw;
    r = weak_check_skipped(task, lang, fmt::format("it could not run: {}", e.what()));
    log_message(LogLevel::warning, fmt::format("the weak-check detection could not run: {}", e.what()));
    return r;
  }
  if (r.weak())
    log_message(LogLevel::warning, fmt::format("{}\n  (--no-weak-check skips this check)", r.text()));
  else if (r.flagged())
    log_message(LogLevel::info, fmt::format("note: {}", r.text()));
  return r;
}

// Runs the strategy (and the tune phase) in a session and records the end.
// A run that ends in an error says so in its manifest: left "running", it
// would look like a run still going (or killed) to `ksearch show`.
// A resume's `guard`: one that fails before it records anything new leaves
// the folder as it found it instead (engine/resume_guard.hpp).
SearchOutcome execute(Parts& parts, RunStore& store, const SearchConfig& config, const Hooks& hooks,
                      const engine::ResumeGuard* guard = nullptr) {
  try {
    HookedRun hooked(parts, store, hooks);
    return execute_session(parts, store, config, hooks.progress);
  } catch (const std::exception& e) {
    try {
      if (guard && guard->nothing_new()) {
        guard->restore();
      } else {
        auto m = engine::RunManifest::from_json(store.manifest());
        m.status = "failed";
        m.error = e.what();
        m.finished = utc_timestamp();
        store.write_manifest(m.to_json());
      }
    } catch (const std::exception&) {
      // The folder itself is the problem; the first error is the one to report.
    }
    throw;
  }
}

// The best kernel on every workload of a task whose search saw only its
// The evaluator's options changed for a while (the workloads of the final
// evaluation, the feedback subset of a search), and as they were again when
// it ends, by an exception too.
class ScopedEvalOptions {
 public:
  explicit ScopedEvalOptions(Evaluator& ev) : ev_(ev), saved_(ev.options()) {}
  ~ScopedEvalOptions() { restore(); }
  ScopedEvalOptions(const ScopedEvalOptions&) = delete;
  ScopedEvalOptions& operator=(const ScopedEvalOptions&) = delete;
  EvalOptions* operator->() { return &ev_.options(); }
  void restore() { ev_.options() = saved_; }

 private:
  Evaluator& ev_;
  const EvalOptions saved_;
};

// feedback workloads (K-Search's final evaluation). A resumed run whose best
// was already evaluated keeps that result.
std::optional<EvalResult> final_evaluation(Parts& parts, RunStore& store, const std::optional<BestSolution>& best,
                                           StopReason reason) {
  const TaskSpec& spec = parts.task->spec();
  if (!best || reason == StopReason::cancelled || !spec.has_feedback_subset()) return std::nullopt;
  if (auto done = store.final_eval(); done && done->solution_id == best->solution.id) {
    store.write_final_eval(*done);  // best/ may have been rebuilt since
    return done;
  }
  const core::events::FinalEvaluationStarted started{best->solution.id,
                                                      static_cast<std::int64_t>(spec.workloads.size())};
  store.append_event(std::string(started.kName), core::events::fields_of(started));
  EvalResult r;
  {
    ScopedEvalOptions all(*parts.evaluator);
    all->only_workloads.clear();
    for (const auto& w : spec.workloads) all->only_workloads.push_back(w.name);
    r = parts.evaluator->evaluate(*parts.task, best->solution);
  }
  r.solution_id = best->solution.id;
  store.write_final_eval(r);
  const core::events::FinalEvaluation done{r.solution_id, std::string(to_string(r.status)), r.latency_ms,
                                             r.speedup, r.vs_baseline, r.summary()};
  store.append_event(std::string(done.kName), core::events::fields_of(done));
  return r;
}

SearchOutcome execute_session(Parts& parts, RunStore& store, const SearchConfig& config,
                              const ProgressCallback& progress) {
  // A task with feedback workloads is searched on those only (unless the
  // evaluator was told otherwise); the final evaluation covers the rest.
  const TaskSpec& spec = parts.task->spec();
  ScopedEvalOptions eo(*parts.evaluator);
  const bool feedback_only = spec.has_feedback_subset() && eo->only_workloads.empty();
  if (feedback_only) eo->only_workloads = spec.feedback_workloads;
  std::shared_ptr<WorldModel> wm = parts.world_model ? parts.world_model : make_tree_world_model();
  core::Session session(*parts.task, *parts.evaluator, *parts.llm, *wm, store, config, progress);
  session.set_environment(parts.environment);
  if (parts.recording) session.follow(std::move(*parts.recording));
  std::shared_ptr<SearchStrategy> strategy = parts.strategy ? parts.strategy : make_strategy(config.strategy);
  StopReason reason = session.run(*strategy);
  if (config.tune.rounds > 0 && config.strategy != StrategyKind::tune &&
      (reason == StopReason::max_rounds || reason == StopReason::strategy_done)) {
    session.add_rounds(config.tune.rounds);
    auto tune = make_strategy(StrategyKind::tune);
    reason = session.run(*tune);
  }
  eo.restore();
  SearchOutcome out;
  if (feedback_only) out.feedback_workloads = spec.feedback_workloads;
  out.run_dir = store.dir();
  out.stop_reason = reason;
  out.best = session.best();
  out.rounds = session.rounds_used();
  out.replayed_rounds = session.replayed_evaluations();
  out.recorded_rounds = session.recording_evaluations_used();
  out.recorded_answers = session.recording_answers_used();
  out.divergence = session.divergence();
  out.usage = session.usage();
  out.wall_s = session.elapsed_s();
  out.device = parts.evaluator->device();
  out.final_eval = final_evaluation(parts, store, out.best, reason);
  auto m = engine::RunManifest::from_json(store.manifest());
  out.weak_check = m.weak_check;
  for (const auto& a : store.attempts()) {
    // A counted round, or the evaluation a warm start adopted (round 0): the
    // improvement is then the one over the kernel the run was given.
    const bool adopted = a.round == 0 && a.eval.metrics.find("recorded_from");
    if ((a.round > 0 || adopted) && a.eval.passed() && a.eval.latency_ms > 0) {
      out.first_pass_round = a.round;
      out.first_pass_latency_ms = a.eval.latency_ms;
      break;
    }
  }
  m = engine::RunManifest::from_json(store.manifest());  // the session has updated it
  bool stopped = reason == StopReason::cancelled || reason == StopReason::replay_diverged ||
                 reason == StopReason::recording_ended;
  m.status = stopped ? "stopped" : "finished";
  m.stop_reason = to_string(reason);
  if (!out.divergence.is_null()) m.replay_divergence = out.divergence;
  m.finished = utc_timestamp();
  m.totals = session.totals();
  store.write_manifest(m.to_json());
  return out;
}

}  // namespace

Json SearchOutcome::to_json() const {
  Json j = Json::obj({{"run_dir", run_dir.string()},
                      {"stop_reason", to_string(stop_reason)},
                      {"rounds", rounds},
                      {"replayed_rounds", replayed_rounds},
                      {"recorded_rounds", recorded_rounds},
                      {"recorded_answers", recorded_answers},
                      {"llm_usage", usage.to_json()},
                      {"wall_s", wall_s},
                      {"first_pass_round", first_pass_round},
                      {"first_pass_latency_ms", first_pass_latency_ms},
                      {"device", device.to_json()}});
  if (best) {
    j["best"] = Json::obj({{"round", best->round}, {"solution", best->solution.to_json()}, {"eval", best->eval.to_json()}});
  }
  if (final_eval) j["final_eval"] = final_eval->to_json();
  if (!feedback_workloads.empty()) j["feedback_workloads"] = util::string_array(feedback_workloads);
  if (!divergence.is_null()) j["divergence"] = divergence;
  if (!weak_check.is_null()) j["weak_check"] = weak_check;
  return j;
}

SearchOutcome run_search(const SearchOptions& options) {
  if (options.custom_strategy) {
    SearchConfig checked = options.config;  // a custom strategy's name need not be a built-in one
    checked.strategy = StrategyKind::world_model;
    checked.validate();
    if (checked.continue_from_solution)
      throw Error(Status::invalid_argument,
                  "continue_from_solution is read by the built-in world_model strategy, not by a custom one");
    if (checked.continue_from_world_model || !options.continue_from_world_model.empty())
      throw Error(Status::invalid_argument,
                  "continue_from_world_model is read by the built-in world_model strategy, not by a custom one");
  } else {
    options.config.validate();
  }
  engine::check_wandb_options(options.wandb);
  util::register_environment_secrets(options.llm.openai.api_key_env);
  Parts parts;
  TaskSources sources = options.task_sources;
  if (!options.kernelbench_dir.empty()) sources.kernelbench_dir = options.kernelbench_dir;
  parts.task = options.custom_task ? options.custom_task : std::shared_ptr<Task>(load_task(options.task, sources));
  SearchConfig config = options.config;
  if (options.infer_language) {
    // A task written in one native language (cuda or cpp) runs in it; the
    // Python languages every task file also takes are asked for by name.
    std::vector<Language> native;
    for (Language l : parts.task->spec().languages)
      if (!language_is_python(l)) native.push_back(l);
    if (native.size() == 1) config.language = native.front();
  }
  if (config.continue_from_solution && options.infer_language) {
    // The given kernel's language is the run's (a Python kernel on a task
    // whose native language is another).
    config.language = config.continue_from_solution->language;
  }
  if (!options.continue_from_world_model.empty()) {
    if (config.continue_from_world_model)
      throw Error(Status::invalid_argument,
                  "continue_from_world_model is given twice (SearchOptions and SearchConfig); give one");
    if (config.strategy != StrategyKind::world_model)
      throw Error(Status::invalid_argument, fmt::format("continue_from_world_model is read by the world_model "
                                                        "strategy, not by {}",
                                                        to_string(config.strategy)));
    // "auto" looks beside where this run's folder is made.
    const fs::path dir = options.run_dir.empty() ? default_run_dir(parts.task->name()) : options.run_dir;
    const fs::path runs = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    try {
      config.continue_from_world_model =
          engine::load_world_model_import(options.continue_from_world_model, parts.task->spec(), config.language,
                                          task_fingerprint(*parts.task), runs);
    } catch (const Error& e) {
      throw Error(e.status(), fmt::format("continue_from_world_model: {}", e.what()));
    }
  }
  config.validate();  // again: the language may have changed above
  check_language(*parts.task, config.language);
  if (options.llm.kind == LlmSource::offline && options.config.strategy != StrategyKind::tune)
    throw Error(Status::invalid_argument, fmt::format("--llm offline needs --strategy tune (the {} strategy asks an LLM)",
                                                      to_string(options.config.strategy)));
  if (options.llm.kind == LlmSource::replay) {
    // The session answers from the transcript itself, so that where the
    // search leaves it, it can say where and why.
    parts.recording =
        engine::recording_from_transcript(options.llm.replay_path, options.llm.on_divergence, 0);
    parts.llm = engine::recording_only_policy(options.llm.replay_path.string());
  } else {
    parts.llm = options.llm.kind == LlmSource::custom
                    ? options.llm.custom
                    : std::shared_ptr<LlmPolicy>(
                          make_llm_policy(engine::with_transport_caps(options.llm, options.config.max_answer_bytes)));
  }
  if (!parts.llm) throw Error(Status::invalid_argument, "LLM kind \"custom\" needs a policy object");
  check_backend(options.evaluator, options.custom_evaluator != nullptr, *parts.task, config.language);
  if (!options.custom_evaluator) parts.environment = python_environment(config.language);
  parts.evaluator = options.custom_evaluator ? options.custom_evaluator
                                             : std::shared_ptr<Evaluator>(make_evaluator(options.evaluator));
  parts.world_model = options.custom_world_model;
  parts.strategy = options.custom_strategy;
  // Scores against a dataset's traces need them for this card: said before
  // anything is spent (the evaluator says so again at the first score).
  Json baseline = Json();
  if (!options.custom_evaluator) {
    const std::string device = evaluation_device(options.evaluator, *parts.evaluator, config.language);
    check_baseline_coverage(parts.task->spec(), parts.evaluator->options(), device, config.language);
    baseline = baseline_sources(parts.task->spec(), parts.evaluator->options(), device, config.language);
  }
  engine::check_llm(*parts.llm);
  fs::path dir = options.run_dir.empty() ? default_run_dir(parts.task->name()) : options.run_dir;
  // A folder that holds a run is refused before the weak check spends
  // anything on it (create says why).
  if (RunStore::exists(dir)) RunStore::create(dir, Json::object());
  const WeakCheckReport weak = weak_check_before_run(options, parts, config.language);
  if (config.model.empty()) config.model = parts.llm->describe();
  if (parts.strategy) config.custom_strategy_name = parts.strategy->name();
  // Decided once, here, and kept in the manifest: resume and replay start
  // the same way whatever machine they run on.
  engine::decide_recorded_evaluations(config, task_fingerprint(*parts.task), parts.evaluator->device());
  config.start_from_starting_point = config.start_from_starting_point && uses_starting_point(config, parts);

  engine::RunManifest manifest;
  manifest.library_version = KS_VERSION_STRING;
  manifest.created = utc_timestamp();
  manifest.host = hostname();
  manifest.task = engine::TaskRecord{
      parts.task->name(),
      options.custom_task ? "" : task_reference(options.task),
      static_cast<bool>(options.custom_task),
      options.kernelbench_dir.empty() ? std::string() : fs::absolute(options.kernelbench_dir).string(),
      task_fingerprint(*parts.task),
      recorded_sources(sources, *parts.task)};
  manifest.workloads = workloads_record(parts.task->spec(), sources.feedback);
  manifest.config = config.to_json();
  manifest.llm = options.llm.kind == LlmSource::custom ? Json::obj({{"kind", "custom"}, {"describe", parts.llm->describe()}})
                                              : options.llm.to_json();
  manifest.evaluator = options.evaluator;
  manifest.device = parts.evaluator->device().to_json();
  manifest.software = parts.environment;
  manifest.weak_check = weak.to_json();
  manifest.status = "running";
  manifest.baseline = baseline;
  manifest.custom_strategy = static_cast<bool>(parts.strategy);
  manifest.custom_world_model = static_cast<bool>(parts.world_model);
  RunStore store = RunStore::create(dir, manifest.to_json());
  // Declared after the store: it finishes (the run's last rounds logged) before the lock is released.
  auto wandb = engine::start_wandb_logger(options.wandb, store.dir(), options.llm.openai.api_key_env);
  if (options.on_start) options.on_start(SearchStart{store.dir(), parts.task->name(), config, parts.llm->describe(), 0});
  return execute(parts, store, config, Hooks{options.progress, options.on_event, options.cancel});
}

namespace {

int rounds_done(const RunStore& store) {
  int done = 0;
  for (const auto& a : store.attempts()) done = std::max(done, a.round);
  return done;
}

std::shared_ptr<Task> load_recorded_task(const engine::TaskRecord& tr) {
  TaskSources sources = TaskSources::from_json(tr.sources);
  sources.kernelbench_dir = tr.kernelbench_dir;
  auto task = std::shared_ptr<Task>(load_task(tr.reference, sources));
  if (task_fingerprint(*task) != tr.fingerprint)
    throw Error(Status::state, fmt::format("task \"{}\" changed since the run started (its specification differs); "
                                           "replaying it would mix results of two different tasks", task->name()));
  return task;
}

std::shared_ptr<Evaluator> lazy_evaluator(const EvaluatorConfig& ec, const Json& recorded_device,
                                          std::shared_ptr<Evaluator> custom) {
  return engine::lazy_evaluator(
      [ec, custom]() { return custom ? custom : std::shared_ptr<Evaluator>(make_evaluator(ec)); },
      DeviceInfo::from_json(recorded_device));
}

// max_rounds is the run's total round budget: it may grow or shrink, but
// not below the rounds already done (they cannot be undone), and not where
// the strategy could not follow the new budget: refused here, before the
// resume writes anything. A built-in tune run keeps the plan it made for
// the budget it began with (recorded_tune_plan) and stops early under a
// lower one; a budget above that plan would be rounds its tuner never uses.
void change_round_budget(const RunStore& store, SearchConfig& config, bool custom_strategy, int max_rounds) {
  if (max_rounds < 0) throw Error(Status::invalid_argument, fmt::format("max_rounds {} is negative", max_rounds));
  if (max_rounds == 0 || max_rounds == config.max_rounds) return;
  const int done = rounds_done(store);
  std::optional<int> plan;
  if (!custom_strategy && config.strategy == StrategyKind::tune)
    if (const auto state = store.state()) plan = core::recorded_tune_plan(*state);
  const std::string allowed = plan ? fmt::format("between {} and {}", done, *plan) : fmt::format("{} or more", done);
  if (max_rounds < done)
    throw Error(Status::invalid_argument,
                fmt::format("--max-rounds {} is below the {} rounds this run has already done; it is the run's total "
                            "round budget (recorded: {}), so give {} (or leave it out to keep {})",
                            max_rounds, done, config.max_rounds, allowed, config.max_rounds));
  if (plan && max_rounds > *plan)
    throw Error(Status::invalid_argument,
                fmt::format("--max-rounds {} is above the {} rounds this tune run planned its search for when it "
                            "began (how many configurations it seeds with, how it sizes its last batches), and a "
                            "resume keeps that plan: give {}, or start a new run to tune for longer",
                            max_rounds, *plan, allowed));
  if (config.tune.rounds > 0 && config.strategy != StrategyKind::tune)
    throw Error(Status::invalid_argument,
                fmt::format("this run has a tune phase of {} rounds after its search, which begins where the search's "
                            "budget ends; its round budget cannot change on resume: leave --max-rounds out (the "
                            "budget stays {})",
                            config.tune.rounds, config.max_rounds));
  config.max_rounds = max_rounds;
}

// A run made with the host's own strategy records that strategy's name,
// which no built-in answers to: the rest of the configuration is checked as
// usual.
SearchConfig recorded_config(const engine::RunManifest& manifest) {
  if (!manifest.custom_strategy) return SearchConfig::from_json(manifest.config);
  Json j = manifest.config;
  const std::string name = j.get_string("strategy");
  j["strategy"] = "world_model";
  SearchConfig config = SearchConfig::from_json(j);
  config.custom_strategy_name = name;
  return config;
}

}  // namespace

SearchOutcome resume_search(const fs::path& run_dir, const ResumeOptions& options) {
  engine::check_wandb_options(options.wandb);
  RunStore store = RunStore::open(run_dir);
  const Json recorded_manifest = store.manifest();
  auto m = engine::RunManifest::from_json(recorded_manifest);
  m.check_replayable(run_dir, "resumes");
  SearchConfig config = recorded_config(m);
  engine::check_recorded_decisions(config, recorded_manifest, run_dir);
  Parts parts;
  parts.task = load_recorded_task(m.task);
  change_round_budget(store, config, m.custom_strategy, options.max_rounds);
  const EvaluatorConfig& ec = m.evaluator;
  const bool new_model = options.custom_llm || options.llm;
  if (m.replay) {
    // A reproduction of another run folder goes on following it; a model
    // given now lets it continue live where it left the recording.
    engine::ReplayRecord& rr = *m.replay;
    fs::path source = rr.source;
    RunStore src = [&] {
      try {
        return RunStore::open_read_only(source);
      } catch (const Error& e) {
        throw Error(Status::not_found, fmt::format("{} reproduces the run {}, which cannot be read now: {}",
                                                   run_dir.string(), source.string(), e.what()));
      }
    }();
    auto mode = rr.on_divergence;
    if (new_model && mode == ReplayDivergence::stop) {
      mode = ReplayDivergence::live;
      rr.on_divergence = ReplayDivergence::live;
    }
    parts.recording = engine::recording_from_run(src, mode, rr.check_prompts);
    if (options.llm) m.llm = options.llm->to_json();
    LlmChoice choice = options.llm ? *options.llm : LlmChoice::from_json(m.llm);
    util::register_environment_secrets(choice.openai.api_key_env);
    if (options.custom_llm) parts.llm = options.custom_llm;
    else if (choice.kind == LlmSource::custom)
      throw Error(Status::invalid_argument,
                  "this run continued with an LLM policy supplied by the host program; pass it again to resume");
    else parts.llm = make_llm_policy(engine::with_transport_caps(choice, config.max_answer_bytes));
    parts.evaluator = lazy_evaluator(ec, m.device, options.custom_evaluator);
  } else {
    LlmChoice recorded = LlmChoice::from_json(m.llm);
    LlmChoice choice = options.llm ? *options.llm : recorded;
    util::register_environment_secrets(choice.openai.api_key_env);
    // Later resumes go on with the policy given now (a replay that went on
    // skipping must not go back to stopping where it diverged).
    if (options.llm && choice.kind != LlmSource::custom) m.llm = choice.to_json();
    if (options.custom_llm) {
      parts.llm = options.custom_llm;
    } else if (choice.kind == LlmSource::custom) {
      throw Error(Status::invalid_argument,
                  "this run used an LLM policy supplied by the host program; pass it again to resume");
    } else if (choice.kind == LlmSource::replay) {
      // The run's own recording is followed from its start, in step with
      // the journal; a transcript given only now answers after the journal.
      bool same = recorded.kind == LlmSource::replay && fs::absolute(recorded.replay_path) == fs::absolute(choice.replay_path);
      parts.recording =
          engine::recording_from_transcript(choice.replay_path, choice.on_divergence, same ? 0 : store.transcript().size());
      parts.llm = engine::recording_only_policy(choice.replay_path.string());
    } else {
      parts.llm = make_llm_policy(engine::with_transport_caps(choice, config.max_answer_bytes));
    }
    check_backend(ec, options.custom_evaluator != nullptr, *parts.task, config.language);
    // The run's prompts keep the software line they started with.
    if (!options.custom_evaluator) parts.environment = m.software.empty() ? python_environment(config.language) : m.software;
    parts.evaluator = options.custom_evaluator ? options.custom_evaluator
                                               : std::shared_ptr<Evaluator>(make_evaluator(ec));
  }
  parts.strategy = options.custom_strategy;
  parts.world_model = options.custom_world_model;
  if (m.custom_strategy && !parts.strategy)
    throw Error(Status::invalid_argument,
                "this run used a search strategy supplied by the host program; pass it again to resume");
  if (m.custom_world_model && !parts.world_model)
    throw Error(Status::invalid_argument,
                "this run used a world model supplied by the host program; pass it again to resume");
  engine::check_llm(*parts.llm);
  // Everything is checked: from here the folder changes, and until the
  // resume records something new, a failure puts it back as it was.
  const engine::ResumeGuard guard(store.dir());
  m.config = config.to_json();
  m.status = "running";
  m.error.clear();  // an earlier attempt's failure
  m.resumed += 1;
  m.last_resumed = utc_timestamp();
  std::unique_ptr<engine::WandbLogger> wandb;
  try {
    store.write_manifest(m.to_json());
    wandb = engine::start_wandb_logger(options.wandb, store.dir(), LlmChoice::from_json(m.llm).openai.api_key_env);
    if (options.on_start)
      options.on_start(SearchStart{store.dir(), parts.task->name(), config, parts.llm->describe(), rounds_done(store)});
  } catch (...) {
    try {
      guard.restore();
    } catch (const std::exception&) {
      // The folder itself is the problem; the first error is the one to report.
    }
    throw;
  }
  return execute(parts, store, config, Hooks{options.progress, options.on_event, options.cancel}, &guard);
}

SearchOutcome replay_search(const fs::path& recorded_run, const ReplayOptions& options) {
  RunStore src = RunStore::open_read_only(recorded_run);
  const Json recorded_manifest = src.manifest();
  const auto sm = engine::RunManifest::from_json(recorded_manifest);
  sm.check_replayable(recorded_run, "replays");
  // The recorded configuration, with the changes asked for.
  Json cj = sm.config;
  if (!options.config_changes.is_object())
    throw Error(Status::invalid_argument, "replay: config_changes must be a JSON object of search settings");
  for (const auto& [key, value] : options.config_changes.as_object()) {
    if (!SearchConfig().to_json().contains(key))
      throw Error(Status::invalid_argument, fmt::format("replay: \"{}\" is not a search setting", key));
    cj[key] = value;
  }
  // A continued run replayed with another strategy: only world_model reads
  // the given kernel, the imported tree and the starting point.
  if (cj.get_string("strategy", "world_model") != "world_model") {
    for (const char* key : {"continue_from_solution", "continue_from_solution_eval", "continue_from_world_model"})
      if (cj.contains(key)) cj[key] = Json();
    if (cj.contains("start_from_starting_point")) cj["start_from_starting_point"] = false;
  }
  SearchConfig config = SearchConfig::from_json(cj);
  engine::check_recorded_decisions(config, recorded_manifest, recorded_run);
  const ReplayDivergence mode = options.on_divergence;
  const bool has_model = options.custom_llm || options.llm;
  if (mode == ReplayDivergence::live && !has_model)
    throw Error(Status::invalid_argument,
                "on_divergence live needs a model to continue with where the run leaves its recording (--llm ...)");
  Parts parts;
  parts.task = load_recorded_task(sm.task);
  parts.recording = engine::recording_from_run(src, mode, options.check_prompts);
  LlmChoice choice;
  choice.kind = LlmSource::offline;  // a replay without a model never asks one
  if (options.llm) choice = *options.llm;
  util::register_environment_secrets(choice.openai.api_key_env);
  if (options.custom_llm) parts.llm = options.custom_llm;
  else if (choice.kind == LlmSource::custom || choice.kind == LlmSource::replay)
    throw Error(Status::invalid_argument,
                fmt::format("replay: a model to continue with cannot be of kind {}", to_string(choice.kind)));
  else parts.llm = make_llm_policy(engine::with_transport_caps(choice, config.max_answer_bytes));
  // Measured only where the run leaves its recording (lazily): no backend check.
  parts.evaluator = lazy_evaluator(sm.evaluator, sm.device, options.custom_evaluator);
  parts.environment = sm.software;  // as the recorded prompts showed it
  engine::check_llm(*parts.llm);

  engine::RunManifest m = sm;
  // What the recorded run's end and resumes wrote is not this run's.
  m.totals = Json();
  m.stop_reason.clear();
  m.finished.clear();
  m.error.clear();
  m.resumed = 0;
  m.last_resumed.clear();
  m.replay_divergence = Json();
  m.library_version = KS_VERSION_STRING;
  m.created = utc_timestamp();
  m.host = hostname();
  m.config = config.to_json();
  m.llm = options.custom_llm ? Json::obj({{"kind", "custom"}, {"describe", parts.llm->describe()}})
                             : choice.to_json();
  m.status = "running";
  m.replay = engine::ReplayRecord{fs::absolute(recorded_run).lexically_normal().string(),
                                  sm.created,
                                  sm.config,
                                  options.config_changes,
                                  mode,
                                  options.check_prompts};
  fs::path dir = options.run_dir.empty() ? default_run_dir(parts.task->name()) : options.run_dir;
  RunStore store = RunStore::create(dir, m.to_json());
  if (options.on_start) options.on_start(SearchStart{store.dir(), parts.task->name(), config, parts.llm->describe(), 0});
  return execute(parts, store, config, Hooks{options.progress, options.on_event, options.cancel});
}

KS_NAMESPACE_END
