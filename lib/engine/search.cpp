// run_search / resume_search: wiring a task, an evaluator, an LLM policy, the
// world model and a strategy to a run folder, and recording what was used.
#include "ksearch/search.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
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

// Before the first LLM call: the backend the task's language needs must be
// usable here, so a CUDA run on a machine without a GPU ends in seconds
// instead of after its first paid answers.
void check_backend(const EvaluatorConfig& ec, bool custom_evaluator, const Task& task, Language lang) {
  if (custom_evaluator) return;  // the host's evaluator knows what it can run
  if (lang == Language::cuda) {
    if (ec.backend == "host")
      throw Error(Status::invalid_argument, fmt::format("task \"{}\" in cuda cannot be evaluated by the host backend; "
                                                        "use --backend auto or cuda, or --language cpp", task.name()));
    std::string why;
    if (!cuda_available(&why))
      throw Error(Status::no_device,
                  fmt::format("task \"{}\" in cuda needs a GPU, but CUDA is not usable here: {}. Nothing was sent to "
                              "the LLM{}", task.name(), why,
                              std::find(task.spec().languages.begin(), task.spec().languages.end(), Language::cpp) !=
                                      task.spec().languages.end()
                                  ? "; --language cpp runs the task's host version"
                                  : ""));
  } else if (ec.backend == "cuda") {
    throw Error(Status::invalid_argument, fmt::format("task \"{}\" in {} cannot be evaluated by the cuda backend; use "
                                                      "--backend auto or host", task.name(), to_string(lang)));
  }
}

// Before the first LLM call: the policy must be able to answer (the endpoint
// is up and takes the key, the program exists). A check that could not be
// made is a warning.
void check_llm(LlmPolicy& llm) {
  std::string warning = llm.check_ready();
  if (!warning.empty()) std::fprintf(stderr, "ksearch: warning: %s\n", warning.c_str());
}

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
SearchOutcome execute(Parts& parts, RunStore& store, const SearchConfig& config, const ProgressCallback& progress) {
  try {
    return execute_session(parts, store, config, progress);
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
  auto wm = make_tree_world_model();
  detail::Session session(*parts.task, *parts.evaluator, *parts.llm, *wm, store, config, progress);
  auto strategy = make_strategy(config.strategy);
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
  options.config.validate();
  detail::register_environment_secrets(options.llm.openai.api_key_env);
  Parts parts;
  parts.task = options.custom_task ? options.custom_task : std::shared_ptr<Task>(load_task(options.task));
  SearchConfig config = options.config;
  if (options.infer_language && parts.task->spec().languages.size() == 1)
    config.language = parts.task->spec().languages.front();
  check_language(*parts.task, config.language);
  if (options.llm.kind == "offline" && options.config.strategy != "tune")
    throw Error(Status::invalid_argument,
                fmt::format("--llm offline needs --strategy tune (the {} strategy asks an LLM)", options.config.strategy));
  parts.llm = options.llm.kind == "custom"
                  ? options.llm.custom
                  : std::shared_ptr<LlmPolicy>(
                        make_llm_policy(with_transport_caps(options.llm, options.config.max_answer_bytes)));
  if (!parts.llm) throw Error(Status::invalid_argument, "LLM kind \"custom\" needs a policy object");
  check_backend(options.evaluator, options.custom_evaluator != nullptr, *parts.task, config.language);
  parts.evaluator = options.custom_evaluator ? options.custom_evaluator
                                             : std::shared_ptr<Evaluator>(make_evaluator(options.evaluator));
  check_llm(*parts.llm);
  if (config.model.empty()) config.model = parts.llm->describe();

  fs::path dir = options.run_dir.empty() ? default_run_dir(parts.task->name()) : options.run_dir;
  Json manifest = Json::obj({{"format", "ksearch-run"},
                             {"format_version", 1},
                             {"library_version", KS_VERSION_STRING},
                             {"created", utc_timestamp()},
                             {"host", hostname()},
                             {"task", Json::obj({{"name", parts.task->name()},
                                                 {"reference", options.custom_task ? "" : task_reference(options.task)},
                                                 {"custom", static_cast<bool>(options.custom_task)},
                                                 {"fingerprint", task_fingerprint(*parts.task)}})},
                             {"config", config.to_json()},
                             {"llm", options.llm.kind == "custom"
                                         ? Json::obj({{"kind", "custom"}, {"describe", parts.llm->describe()}})
                                         : options.llm.to_json()},
                             {"evaluator", evaluator_config_json(options.evaluator)},
                             {"device", parts.evaluator->device().to_json()},
                             {"status", "running"}});
  RunStore store = RunStore::create(dir, manifest);
  if (options.on_start) options.on_start(SearchStart{store.dir(), parts.task->name(), config, parts.llm->describe(), 0});
  return execute(parts, store, config, options.progress);
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
  parts.task = std::shared_ptr<Task>(load_task(tj.get_string("reference")));
  if (task_fingerprint(*parts.task) != tj.get_string("fingerprint"))
    throw Error(Status::state, fmt::format("task \"{}\" changed since the run started (its specification differs); "
                                           "resuming would mix results of two different tasks", parts.task->name()));
  // max_rounds is the run's total round budget: it may grow or shrink, but
  // not below the rounds already done (they cannot be undone).
  if (options.max_rounds < 0)
    throw Error(Status::invalid_argument, fmt::format("max_rounds {} is negative", options.max_rounds));
  if (options.max_rounds > 0 && options.max_rounds != config.max_rounds) {
    int done = 0;
    for (const auto& a : store.attempts()) done = std::max(done, a.round);
    if (options.max_rounds < done)
      throw Error(Status::invalid_argument,
                  fmt::format("--max-rounds {} is below the {} rounds this run has already done; it is the run's total "
                              "round budget (recorded: {}), so give {} or more (or leave it out to keep {})",
                              options.max_rounds, done, config.max_rounds, done, config.max_rounds));
    if (config.tune_rounds > 0)
      throw Error(Status::invalid_argument,
                  "this run has a tune phase after its search; its round budget cannot change on resume");
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
  check_backend(ec, options.custom_evaluator != nullptr, *parts.task, config.language);
  parts.evaluator = options.custom_evaluator ? options.custom_evaluator
                                             : std::shared_ptr<Evaluator>(make_evaluator(ec));
  check_llm(*parts.llm);
  m["config"] = config.to_json();
  m["status"] = "running";
  if (m.contains("error")) m.erase("error");  // an earlier attempt's failure
  m["resumed"] = m.get_int("resumed") + 1;
  m["last_resumed"] = utc_timestamp();
  store.write_manifest(m);
  if (options.on_start) {
    int done = 0;
    for (const auto& a : store.attempts()) done = std::max(done, a.round);
    options.on_start(SearchStart{store.dir(), parts.task->name(), config, parts.llm->describe(), done});
  }
  return execute(parts, store, config, options.progress);
}

}  // namespace ks
