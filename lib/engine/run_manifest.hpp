// A run folder's manifest.json as a type, with its one codec. RunStore
// (ksearch/run_store.hpp) keeps the file; this says what is in it. Only the
// engine writes it whole; the session updates "totals" and "status" as
// rounds end, and readers elsewhere (show, report, compare, export) read
// fields by these names, so the names and values here are a file format.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "ksearch/eval.hpp"
#include "ksearch/json.hpp"
#include "ksearch/vocabulary.hpp"

namespace ks::engine {

// "task": which task the run searched, and how to load it again.
struct TaskRecord {
  std::string name;
  std::string reference;        // a built-in name or an absolute path; "" for the host's task object
  bool custom = false;          // a task object supplied by the host program
  std::string kernelbench_dir;  // absolute, or ""
  std::string fingerprint;      // task_fingerprint of its specification
  Json sources;                 // TaskSources::to_json, a feedback subset as the workloads chosen
};

// "replay": the run folder a reproduction follows.
struct ReplayRecord {
  std::string source;           // absolute
  std::string source_created;
  Json source_config;           // its "config"
  Json config_changes;          // ReplayOptions::config_changes
  ReplayDivergence on_divergence = ReplayDivergence::stop;
  bool check_prompts = true;
};

struct RunManifest {
  std::string format = "ksearch-run";
  std::int64_t format_version = 1;
  std::string library_version;
  std::string created;
  std::string host;
  TaskRecord task;
  Json workloads;               // feedback, final, final_evaluation, chosen_by[, selection]
  Json config;                  // SearchConfig::to_json (a custom strategy's name in "strategy")
  Json llm;                     // LlmChoice::to_json, or {"kind": "custom", "describe"}
  EvaluatorConfig evaluator;
  Json device;                  // DeviceInfo::to_json
  // The software line of the prompts' device section ("candidates run with
  // Python 3.11.2, PyTorch 1.13.0"); "" where none (a run made before it
  // was recorded). A replay and a resume show the recorded one.
  std::string software;
  Json weak_check;              // WeakCheckReport::to_json; null in runs made before it
  std::string status = "running";  // running | finished | stopped | failed
  Json baseline;                // baseline_sources(); null when not scored against a baseline
  bool custom_strategy = false;
  bool custom_world_model = false;
  std::optional<ReplayRecord> replay;
  // Written as the run is resumed and ends; empty until then.
  std::int64_t resumed = 0;
  std::string last_resumed;
  std::string stop_reason;      // to_string(StopReason)
  Json replay_divergence;
  std::string finished;
  Json totals;
  std::string error;            // a failed run's error
  // Members this type does not name (a later library's), kept as read.
  Json other = Json::object();

  Json to_json() const;
  // Fields absent (a run made by an earlier version) keep their defaults.
  static RunManifest from_json(const Json& j);

  // Before anything is resumed or replayed from `dir`: a ksearch run of
  // format 1, made with a task this library can load again. `verb` is
  // "resumes" or "replays". Throws ks::Error(invalid_argument).
  void check_replayable(const std::filesystem::path& dir, const char* verb) const;
};

// The evaluator settings as the manifest records them (worker_path is not:
// it is this machine's).
Json evaluator_config_to_json(const EvaluatorConfig& e);
EvaluatorConfig evaluator_config_from_json(const Json& j);

}  // namespace ks::engine
