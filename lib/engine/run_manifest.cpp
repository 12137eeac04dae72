// manifest.json's one codec (engine/run_manifest.hpp).
#include "engine/run_manifest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "ksearch/error.hpp"

namespace ks::engine {

namespace {

// Every member RunManifest names; the rest go to `other`.
constexpr std::string_view kNamed[] = {
    "format",  "format_version", "library_version", "created",          "host",
    "task",    "workloads",      "config",          "llm",              "evaluator",
    "device",  "software",       "weak_check",      "status",           "baseline",
    "custom_strategy",
    "custom_world_model",        "replay",          "resumed",          "last_resumed",
    "stop_reason",               "replay_divergence", "finished",       "totals",
    "error"};

bool named(std::string_view key) { return std::find(std::begin(kNamed), std::end(kNamed), key) != std::end(kNamed); }

}  // namespace

Json evaluator_config_to_json(const EvaluatorConfig& e) {
  Json devices = Json::array();
  for (int d : e.devices) devices.push_back(d);
  return Json::obj({{"backend", to_string(e.backend)},
                    {"devices", devices},
                    {"in_process", e.in_process},
                    {"cache_dir", e.cache_dir.string()},
                    {"compile_workers", e.compile_workers},
                    {"cuda_arch", e.cuda_arch},
                    {"sandbox", to_string(e.sandbox)},
                    {"memory_limit_bytes", static_cast<std::int64_t>(e.memory_limit_bytes)},
                    {"options", e.options.to_json()}});
}

EvaluatorConfig evaluator_config_from_json(const Json& j) {
  EvaluatorConfig e;
  e.backend = parse_backend(j.get_string("backend", "auto"), "evaluator backend");
  if (j["devices"].is_array())
    for (const auto& d : j["devices"].as_array()) e.devices.push_back(static_cast<int>(d.as_int()));
  e.in_process = j.get_bool("in_process");
  e.cache_dir = j.get_string("cache_dir");
  e.compile_workers = static_cast<int>(j.get_int("compile_workers"));
  e.cuda_arch = j.get_string("cuda_arch");
  e.sandbox = parse_sandbox_mode(j.get_string("sandbox", "auto"), "sandbox");
  e.memory_limit_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, j.get_int("memory_limit_bytes")));
  if (j["options"].is_object()) e.options = EvalOptions::from_json(j["options"]);
  return e;
}

Json RunManifest::to_json() const {
  Json j = Json::obj({{"format", format},
                      {"format_version", format_version},
                      {"library_version", library_version},
                      {"created", created},
                      {"host", host},
                      {"task", Json::obj({{"name", task.name},
                                          {"reference", task.reference},
                                          {"custom", task.custom},
                                          {"kernelbench_dir", task.kernelbench_dir},
                                          {"fingerprint", task.fingerprint},
                                          {"sources", task.sources}})}});
  // Absent from runs made before them: kept absent, not written as null.
  if (!workloads.is_null()) j["workloads"] = workloads;
  j["config"] = config;
  j["llm"] = llm;
  j["evaluator"] = evaluator_config_to_json(evaluator);
  j["device"] = device;
  if (!software.empty()) j["software"] = software;
  if (!weak_check.is_null()) j["weak_check"] = weak_check;
  j["status"] = status;
  if (!baseline.is_null()) j["baseline"] = baseline;
  if (custom_strategy) j["custom_strategy"] = true;
  if (custom_world_model) j["custom_world_model"] = true;
  if (replay)
    j["replay"] = Json::obj({{"source", replay->source},
                             {"source_created", replay->source_created},
                             {"source_config", replay->source_config},
                             {"config_changes", replay->config_changes},
                             {"on_divergence", to_string(replay->on_divergence)},
                             {"check_prompts", replay->check_prompts}});
  if (resumed > 0) j["resumed"] = resumed;
  if (!last_resumed.empty()) j["last_resumed"] = last_resumed;
  if (!stop_reason.empty()) j["stop_reason"] = stop_reason;
  if (!replay_divergence.is_null()) j["replay_divergence"] = replay_divergence;
  if (!finished.empty()) j["finished"] = finished;
  if (!totals.is_null()) j["totals"] = totals;
  if (!error.empty()) j["error"] = error;
  for (const auto& [key, value] : other.as_object()) j[key] = value;
  return j;
}

RunManifest RunManifest::from_json(const Json& j) {
  RunManifest m;
  m.format = j.get_string("format");
  m.format_version = j.get_int("format_version", 1);
  m.library_version = j.get_string("library_version");
  m.created = j.get_string("created");
  m.host = j.get_string("host");
  const Json& t = j["task"];
  m.task.name = t.get_string("name");
  m.task.reference = t.get_string("reference");
  m.task.custom = t.get_bool("custom");
  m.task.kernelbench_dir = t.get_string("kernelbench_dir");
  m.task.fingerprint = t.get_string("fingerprint");
  m.task.sources = t["sources"];
  m.workloads = j["workloads"];
  m.config = j["config"];
  m.llm = j["llm"];
  m.evaluator = evaluator_config_from_json(j["evaluator"]);
  m.device = j["device"];
  m.software = j.get_string("software");
  m.weak_check = j["weak_check"];
  m.status = j.get_string("status");
  m.baseline = j["baseline"];
  m.custom_strategy = j.get_bool("custom_strategy");
  m.custom_world_model = j.get_bool("custom_world_model");
  if (const Json* r = j.find("replay"); r && r->is_object()) {
    ReplayRecord rr;
    rr.source = r->get_string("source");
    rr.source_created = r->get_string("source_created");
    rr.source_config = (*r)["source_config"];
    rr.config_changes = (*r)["config_changes"];
    rr.on_divergence = parse_replay_divergence(r->get_string("on_divergence", "stop"), "replay.on_divergence");
    rr.check_prompts = r->get_bool("check_prompts", true);
    m.replay = std::move(rr);
  }
  m.resumed = j.get_int("resumed");
  m.last_resumed = j.get_string("last_resumed");
  m.stop_reason = j.get_string("stop_reason");
  m.replay_divergence = j["replay_divergence"];
  m.finished = j.get_string("finished");
  m.totals = j["totals"];
  m.error = j.get_string("error");
  if (j.is_object())
    for (const auto& [key, value] : j.as_object())
      if (!named(key)) m.other[key] = value;
  return m;
}

void RunManifest::check_replayable(const std::filesystem::path& dir, const char* verb) const {
  if (format != "ksearch-run")
    throw Error(Status::invalid_argument, fmt::format("{}: manifest.json is not a ksearch run", dir.string()));
  // A later format may record the run differently; replaying it with this
  // library's rules could mix two runs' meanings.
  if (format_version != 1)
    throw Error(Status::invalid_argument,
                fmt::format("{}: manifest.json has run format_version {}; this libksearch {} format 1", dir.string(),
                            format_version, verb));
  if (task.custom)
    throw Error(Status::invalid_argument,
                fmt::format("{} was made with a task object supplied by the host program; {} it through the same "
                            "program's API",
                            dir.string(), verb == std::string_view("resumes") ? "resume" : "replay"));
}

}  // namespace ks::engine
