// run_search / resume_search: wiring a task, an evaluator, an LLM policy, the
// world model and a strategy to a run folder, and recording what was used.
#include "ksearch/search.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <sstream>

#include "core/json_fields.hpp"
#include "core/search/session.hpp"
#include "core/secrets.hpp"
#include "core/sha256.hpp"
#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/version.h"
#include "ksearch/world_model.hpp"

namespace ks {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// LLM choice

namespace {

// Answers nothing: the tune strategy needs no model, and any other strategy
// learns at its first prompt that none is configured.
class OfflinePolicy final : public LlmPolicy {
 public:
  LlmResponse complete(const LlmRequest& req) override {
    LlmResponse r;
    r.ok = false;
    r.error = fmt::format("no LLM is configured (--llm offline) but the strategy asked for a {} answer; "
                          "use --strategy tune or configure a model", to_string(req.kind));
    return r;
  }
  std::string describe() const override { return "offline"; }
};

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace

LlmChoice LlmChoice::parse(const std::string& spec) {
  LlmChoice c;
  if (spec == "openai" || spec.empty()) {
    c.kind = "openai";
  } else if (spec == "offline") {
    c.kind = "offline";
  } else if (spec.rfind("replay:", 0) == 0) {
    c.kind = "replay";
    c.replay_path = spec.substr(7);
    if (c.replay_path.empty()) throw Error(Status::invalid_argument, "--llm replay: needs a transcript path (replay:PATH)");
  } else if (spec.rfind("command:", 0) == 0) {
    c.kind = "command";
    c.command.argv = split_words(spec.substr(8));
    if (c.command.argv.empty())
      throw Error(Status::invalid_argument, "--llm command: needs a program (command:PROGRAM ARGS)");
  } else {
    throw Error(Status::invalid_argument,
                fmt::format("unknown --llm \"{}\" (expected openai, offline, replay:PATH or command:PROGRAM ARGS)", spec));
  }
  return c;
}

Json LlmChoice::to_json() const {
  Json j = Json::obj({{"kind", kind}});
  if (kind == "openai") j["openai"] = openai.to_json();
  if (kind == "replay") j["replay_path"] = fs::absolute(replay_path).string();
  if (kind == "command") {
    Json argv = Json::array();
    for (const auto& a : command.argv) argv.push_back(a);
    j["command"] = Json::obj({{"argv", argv}, {"timeout_s", command.timeout_s},
                              {"input", command.input == CommandConfig::Input::json ? "json" : "plain"}});
  }
  if (kind == "custom" && custom) j["describe"] = custom->describe();
  return j;
}

LlmChoice LlmChoice::from_json(const Json& j) {
  LlmChoice c;
  c.kind = j.get_string("kind", "openai");
  if (c.kind == "openai" && j.contains("openai")) c.openai = OpenAiConfig::from_json(j["openai"]);
  if (c.kind == "replay") c.replay_path = j.get_string("replay_path");
  if (c.kind == "command") {
    const Json& cmd = j["command"];
    for (const auto& a : cmd["argv"].is_array() ? cmd["argv"].as_array() : Json::Array{})
      c.command.argv.push_back(a.as_string());
    c.command.timeout_s = cmd.get_number("timeout_s", 600);
    c.command.input = cmd.get_string("input", "plain") == "json" ? CommandConfig::Input::json
                                                                 : CommandConfig::Input::plain;
  }
  return c;
}

std::unique_ptr<LlmPolicy> make_llm_policy(const LlmChoice& choice) {
  if (choice.kind == "openai") return make_openai_policy(choice.openai);
  if (choice.kind == "replay") return make_replay_policy(choice.replay_path);
  if (choice.kind == "command") return make_command_policy(choice.command);
  if (choice.kind == "offline") return std::make_unique<OfflinePolicy>();
  if (choice.kind == "custom")
    throw Error(Status::invalid_argument, "a custom LLM policy must be passed as an object, not made by name");
  throw Error(Status::invalid_argument, fmt::format("unknown LLM kind \"{}\"", choice.kind));
}

// ---------------------------------------------------------------------------
// Manifest helpers

namespace {

// Wraps a shared policy for the Session, which takes a reference.
struct Parts {
  std::shared_ptr<Task> task;
  std::shared_ptr<Evaluator> evaluator;
  std::shared_ptr<LlmPolicy> llm;
  std::shared_ptr<WorldModel> world_model;  // null: a fresh tree world model
  std::shared_ptr<SearchStrategy> strategy;  // null: the configured built-in one
};

// What the host observes and controls a run with.
struct Hooks {
  ProgressCallback progress;
  EventCallback on_event;
  std::shared_ptr<CancelToken> cancel;
};

// With a cancel token, every LLM call and evaluation is checked against it
// before and after: one that was cut short (or returned after the cancel)
// throws Status::cancelled, so the session journals nothing of it.
void check_cancel(const CancelToken& t, const char* what) {
  if (t.cancelled()) throw Error(Status::cancelled, fmt::format("the run was cancelled ({})", what));
}

class CancellableLlm final : public LlmPolicy {
 public:
  CancellableLlm(std::shared_ptr<LlmPolicy> inner, std::shared_ptr<CancelToken> token)
      : inner_(std::move(inner)), token_(std::move(token)) {}
  LlmResponse complete(const LlmRequest& r) override {
    check_cancel(*token_, "before an LLM call");
    LlmResponse out = inner_->complete(r);
    check_cancel(*token_, "during an LLM call");
    return out;
  }
  std::vector<LlmResponse> complete_batch(const std::vector<LlmRequest>& r) override {
    check_cancel(*token_, "before an LLM call");
    auto out = inner_->complete_batch(r);
    check_cancel(*token_, "during an LLM call");
    return out;
  }
  std::string describe() const override { return inner_->describe(); }
  bool exhausted() const override { return inner_->exhausted(); }
  LlmUsage total_usage() const override { return inner_->total_usage(); }
  void cancel() override { inner_->cancel(); }

 private:
  std::shared_ptr<LlmPolicy> inner_;
  std::shared_ptr<CancelToken> token_;
};

class CancellableEvaluator final : public Evaluator {
 public:
  CancellableEvaluator(std::shared_ptr<Evaluator> inner, std::shared_ptr<CancelToken> token)
      : inner_(std::move(inner)), token_(std::move(token)) {}
  EvalResult evaluate(const Task& task, const Solution& s) override {
    check_cancel(*token_, "before an evaluation");
    EvalResult r = inner_->evaluate(task, s);
    check_cancel(*token_, "during an evaluation");
    return r;
  }
  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& s) override {
    check_cancel(*token_, "before an evaluation");
    auto r = inner_->evaluate_batch(task, s);
    check_cancel(*token_, "during an evaluation");
    return r;
  }
  DeviceInfo device() const override { return inner_->device(); }
  EvalOptions& options() override { return inner_->options(); }
  void cancel() override { inner_->cancel(); }

 private:
  std::shared_ptr<Evaluator> inner_;
  std::shared_ptr<CancelToken> token_;
};

Json evaluator_config_json(const EvaluatorConfig& e) {
  Json devices = Json::array();
  for (int d : e.devices) devices.push_back(d);
  return Json::obj({{"backend", e.backend},
                    {"devices", devices},
                    {"in_process", e.in_process},
                    {"cache_dir", e.cache_dir.string()},
                    {"compile_workers", e.compile_workers},
                    {"cuda_arch", e.cuda_arch},
                    {"sandbox", e.sandbox},
                    {"memory_limit_bytes", static_cast<std::int64_t>(e.memory_limit_bytes)},
                    {"options", e.options.to_json()}});
}

EvaluatorConfig evaluator_config_from_json(const Json& j) {
  EvaluatorConfig e;
  e.backend = j.get_string("backend", "auto");
  if (j["devices"].is_array())
    for (const auto& d : j["devices"].as_array()) e.devices.push_back(static_cast<int>(d.as_int()));
  e.in_process = j.get_bool("in_process");
  e.cache_dir = j.get_string("cache_dir");
  e.compile_workers = static_cast<int>(j.get_int("compile_workers"));
  e.cuda_arch = j.get_string("cuda_arch");
  e.sandbox = j.get_string("sandbox", "auto");
  e.memory_limit_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, j.get_int("memory_limit_bytes")));
  if (j["options"].is_object()) e.options = EvalOptions::from_json(j["options"]);
  return e;
}

std::string task_fingerprint(const Task& t) { return detail::sha256_hex(t.spec().to_json().dump()).substr(0, 16); }

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

// Connects the host's hooks to the run's parts for the length of the run.
class HookedRun {
 public:
  HookedRun(Parts& parts, RunStore& store, const Hooks& hooks) : store_(store) {
    if (hooks.on_event) store.set_event_listener(hooks.on_event);
    if (!hooks.cancel) return;
    parts.llm = std::make_shared<CancellableLlm>(parts.llm, hooks.cancel);
    parts.evaluator = std::make_shared<CancellableEvaluator>(parts.evaluator, hooks.cancel);
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

// The transports must carry an answer of max_answer_bytes (JSON escaping can
// double it); the session then refuses anything longer, whoever sent it.
LlmChoice with_transport_caps(LlmChoice c, std::size_t max_answer_bytes) {
  c.openai.max_response_bytes = std::max(c.openai.max_response_bytes, 2 * max_answer_bytes + (std::size_t{1} << 20));
  c.command.max_output_bytes = std::max(c.command.max_output_bytes, max_answer_bytes + 1);
  return c;
}

// Runs the strategy (and the tune phase) in a session and records the end.
// A run that ends in an error says so in its manifest: left "running", it
// would look like a run still going (or killed) to `ksearch show`.
SearchOutcome execute(Parts& parts, RunStore& store, const SearchConfig& config, const Hooks& hooks) {
  try {
    HookedRun hooked(parts, store, hooks);
    return execute_session(parts, store, config, hooks.progress);
  } catch (const std::exception& e) {
    try {
      Json m = store.manifest();
      m["status"] = "failed";
      m["error"] = e.what();
      m["finished"] = utc_timestamp();
      store.write_manifest(m);
    } catch (const std::exception&) {
      // The folder itself is the problem; the first error is the one to report.
    }
    throw;
  }
}

SearchOutcome execute_session(Parts& parts, RunStore& store, const SearchConfig& config,
                              const ProgressCallback& progress) {
  std::shared_ptr<WorldModel> wm = parts.world_model ? parts.world_model : make_tree_world_model();
  detail::Session session(*parts.task, *parts.evaluator, *parts.llm, *wm, store, config, progress);
  std::shared_ptr<SearchStrategy> strategy = parts.strategy ? parts.strategy : make_strategy(config.strategy);
  std::string reason = session.run(*strategy);
  if (config.tune_rounds > 0 && config.strategy != "tune" && (reason == "max_rounds" || reason == "strategy_done")) {
    session.add_rounds(config.tune_rounds);
    auto tune = make_strategy("tune");
    reason = session.run(*tune);
  }
  SearchOutcome out;
  out.run_dir = store.dir();
  out.stop_reason = reason;
  out.best = session.best();
  out.rounds = session.rounds_used();
  out.replayed_rounds = session.replayed_evaluations();
  out.usage = session.usage();
  out.wall_s = session.elapsed_s();
  out.device = parts.evaluator->device();
  for (const auto& a : store.attempts()) {
    if (a.round > 0 && a.eval.passed() && a.eval.latency_ms > 0) {
      out.first_pass_round = a.round;
      out.first_pass_latency_ms = a.eval.latency_ms;
      break;
    }
  }
  Json m = store.manifest();
  m["status"] = reason == "cancelled" ? "stopped" : "finished";
  m["stop_reason"] = reason;
  m["finished"] = utc_timestamp();
  m["totals"] = session.totals();
  store.write_manifest(m);
  return out;
}

}  // namespace

Json SearchOutcome::to_json() const {
  Json j = Json::obj({{"run_dir", run_dir.string()},
                      {"stop_reason", stop_reason},
                      {"rounds", rounds},
                      {"replayed_rounds", replayed_rounds},
                      {"llm_usage", usage.to_json()},
                      {"wall_s", wall_s},
                      {"first_pass_round", first_pass_round},
                      {"first_pass_latency_ms", first_pass_latency_ms},
                      {"device", device.to_json()}});
  if (best) {
    j["best"] = Json::obj({{"round", best->round}, {"solution", best->solution.to_json()}, {"eval", best->eval.to_json()}});
  }
  return j;
}

SearchOutcome run_search(const SearchOptions& options) {
  if (options.custom_strategy) {
    SearchConfig checked = options.config;  // a custom strategy's name need not be a built-in one
    checked.strategy = "world_model";
    checked.validate();
  } else {
    options.config.validate();
  }
  detail::register_environment_secrets(options.llm.openai.api_key_env);
  Parts parts;
  parts.task = options.custom_task ? options.custom_task
                                   : std::shared_ptr<Task>(load_task(options.task, {options.kernelbench_dir}));
  check_language(*parts.task, options.config.language);
  if (options.llm.kind == "offline" && options.config.strategy != "tune")
    throw Error(Status::invalid_argument,
                fmt::format("--llm offline needs --strategy tune (the {} strategy asks an LLM)", options.config.strategy));
  parts.llm = options.llm.kind == "custom"
                  ? options.llm.custom
                  : std::shared_ptr<LlmPolicy>(
                        make_llm_policy(with_transport_caps(options.llm, options.config.max_answer_bytes)));
  if (!parts.llm) throw Error(Status::invalid_argument, "LLM kind \"custom\" needs a policy object");
  parts.evaluator = options.custom_evaluator ? options.custom_evaluator
                                             : std::shared_ptr<Evaluator>(make_evaluator(options.evaluator));
  parts.world_model = options.custom_world_model;
  parts.strategy = options.custom_strategy;
  SearchConfig config = options.config;
  if (config.model.empty()) config.model = parts.llm->describe();
  if (parts.strategy) config.strategy = parts.strategy->name();

  fs::path dir = options.run_dir.empty() ? default_run_dir(parts.task->name()) : options.run_dir;
  Json manifest = Json::obj({{"format", "ksearch-run"},
                             {"format_version", 1},
                             {"library_version", KS_VERSION_STRING},
                             {"created", utc_timestamp()},
                             {"host", hostname()},
                             {"task", Json::obj({{"name", parts.task->name()},
                                                 {"reference", options.custom_task ? "" : task_reference(options.task)},
                                                 {"custom", static_cast<bool>(options.custom_task)},
                                                 {"kernelbench_dir", options.kernelbench_dir.empty()
                                                                         ? std::string()
                                                                         : fs::absolute(options.kernelbench_dir).string()},
                                                 {"fingerprint", task_fingerprint(*parts.task)}})},
                             {"config", config.to_json()},
                             {"llm", options.llm.kind == "custom"
                                         ? Json::obj({{"kind", "custom"}, {"describe", parts.llm->describe()}})
                                         : options.llm.to_json()},
                             {"evaluator", evaluator_config_json(options.evaluator)},
                             {"device", parts.evaluator->device().to_json()},
                             {"status", "running"}});
  if (parts.strategy) manifest["custom_strategy"] = true;
  if (parts.world_model) manifest["custom_world_model"] = true;
  RunStore store = RunStore::create(dir, manifest);
  return execute(parts, store, config, Hooks{options.progress, options.on_event, options.cancel});
}

SearchOutcome resume_search(const fs::path& run_dir, const ResumeOptions& options) {
  RunStore store = RunStore::open(run_dir);
  Json m = store.manifest();
  if (m.get_string("format") != "ksearch-run")
    throw Error(Status::invalid_argument, fmt::format("{}: manifest.json is not a ksearch run", run_dir.string()));
  // A later format may record the run differently; replaying it with this
  // library's rules could mix two runs' meanings.
  if (m.get_int("format_version", 1) != 1)
    throw Error(Status::invalid_argument,
                fmt::format("{}: manifest.json has run format_version {}; this libksearch resumes format 1",
                            run_dir.string(), m["format_version"].dump()));
  SearchConfig config = SearchConfig::from_json(m["config"]);
  const Json& tj = m["task"];
  if (tj.get_bool("custom"))
    throw Error(Status::invalid_argument,
                fmt::format("{} was made with a task object supplied by the host program; resume it through the "
                            "same program's API", run_dir.string()));
  Parts parts;
  parts.task = std::shared_ptr<Task>(load_task(tj.get_string("reference"), {tj.get_string("kernelbench_dir")}));
  if (task_fingerprint(*parts.task) != tj.get_string("fingerprint"))
    throw Error(Status::state, fmt::format("task \"{}\" changed since the run started (its specification differs); "
                                           "resuming would mix results of two different tasks", parts.task->name()));
  // A budget can only grow: a value at or below the recorded one keeps it.
  if (options.max_rounds > config.max_rounds) {
    if (config.tune_rounds > 0)
      throw Error(Status::invalid_argument,
                  "this run has a tune phase after its search; its round budget cannot grow on resume");
    config.max_rounds = options.max_rounds;
  }
  LlmChoice choice = options.llm ? *options.llm : LlmChoice::from_json(m["llm"]);
  detail::register_environment_secrets(choice.openai.api_key_env);
  if (options.custom_llm) parts.llm = options.custom_llm;
  else if (choice.kind == "custom")
    throw Error(Status::invalid_argument,
                "this run used an LLM policy supplied by the host program; pass it again to resume");
  else if (choice.kind == "replay")
    // The run's own journal answers the calls made so far; the recording
    // continues from there.
    parts.llm = make_replay_policy(choice.replay_path, store.transcript().size());
  else parts.llm = make_llm_policy(with_transport_caps(choice, config.max_answer_bytes));
  EvaluatorConfig ec = evaluator_config_from_json(m["evaluator"]);
  parts.evaluator = options.custom_evaluator ? options.custom_evaluator
                                             : std::shared_ptr<Evaluator>(make_evaluator(ec));
  parts.strategy = options.custom_strategy;
  parts.world_model = options.custom_world_model;
  if (m.get_bool("custom_strategy") && !parts.strategy)
    throw Error(Status::invalid_argument,
                "this run used a search strategy supplied by the host program; pass it again to resume");
  if (m.get_bool("custom_world_model") && !parts.world_model)
    throw Error(Status::invalid_argument,
                "this run used a world model supplied by the host program; pass it again to resume");
  m["config"] = config.to_json();
  m["status"] = "running";
  if (m.contains("error")) m.erase("error");  // an earlier attempt's failure
  m["resumed"] = m.get_int("resumed") + 1;
  m["last_resumed"] = utc_timestamp();
  store.write_manifest(m);
  return execute(parts, store, config, Hooks{options.progress, options.on_event, options.cancel});
}

}  // namespace ks
