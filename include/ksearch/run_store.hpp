// The run folder: everything a search produced, so nothing is lost and a run
// killed at any moment can be resumed (architecture decision 6).
//
//   <run>/manifest.json          configuration, versions, task, device, totals (atomic rewrite)
//   <run>/events.jsonl           one JSON object per event (append + flush)
//   <run>/transcript.jsonl       every LLM request/response pair (append + flush; no credentials)
//   <run>/attempts.jsonl         index of every attempted solution with its evaluation
//   <run>/attempts/NNNN-<id>/    solution.json, eval.json, the source files, answer.txt
//   <run>/world_model/vNNNNNN.json  versioned world-model snapshots (atomic)
//   <run>/best.json              the best solution and its evaluation (atomic; the record)
//   <run>/best/                  the same as files to read: solution.json, eval.json, sources, plan
//   <run>/final_eval.json        the best kernel evaluated on every workload of the task, when the
//                                search evaluated only its feedback workloads (copied to best/)
//   <run>/state.json             the strategy's state, for `ksearch show` (atomic)
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"
#include "ksearch/types.hpp"

KS_NAMESPACE_BEGIN

// One attempted solution (or a round whose answer held no usable candidate).
struct KS_API AttemptRecord {
  int seq = 0;               // position in the evaluation journal (0-based)
  int round = 0;             // 1-based round it counted as; 0 when not counted
  std::string action;        // what the round tried
  Solution solution;         // empty sources for generation failures
  EvalResult eval;
  std::string raw_answer;    // the LLM answer, kept for generation failures
  std::string time;          // ISO-8601 UTC

  Json to_json() const;      // index line (without sources and raw answer)
};

class KS_API RunStore {
 public:
  // Creates a run folder. Refuses a folder that already holds a run, so a
  // finished run is never overwritten (use open() to resume it).
  static RunStore create(const std::filesystem::path& dir, const Json& manifest);
  // Opens an existing run to continue it; throws ks::Error(Status::not_found)
  // when the folder holds no manifest.json. A writer holds an exclusive lock
  // on <run>/lock for as long as the store lives, so two processes never
  // append to one run (Status::state names the conflict). Under the lock it
  // repairs what a kill left: a torn last line of a log is cut, and the
  // temporary files of atomic writes that were never renamed are removed.
  static RunStore open(const std::filesystem::path& dir);
  // Opens a run for reading only (`ksearch show`): no lock, nothing written,
  // safe on a run another process is writing.
  static RunStore open_read_only(const std::filesystem::path& dir);
  static bool exists(const std::filesystem::path& dir);

  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;
  ~RunStore();

  const std::filesystem::path& dir() const;

  Json manifest() const;
  void write_manifest(const Json& manifest);  // atomic

  // Appends with "seq" and "time" added; returns the event's seq.
  int append_event(const std::string& type, Json data);
  // Called with every event appended from now on, as written (with "seq",
  // "time" and "type"), on the appending thread; what it throws is ignored.
  void set_event_listener(std::function<void(const Json& event)> listener);
  std::vector<Json> events() const;

  void append_transcript(const Json& entry);
  std::vector<Json> transcript() const;

  // Records an attempt: its folder first (atomic files), then the index line,
  // so an index line always points at complete files.
  void record_attempt(const AttemptRecord& a);
  // Reads the index and each attempt's files; a torn last index line is
  // ignored (that attempt is simply redone on resume).
  std::vector<AttemptRecord> attempts() const;

  // world_model/vNNNNNN.json; skipped when that version is already there.
  void write_world_model(std::uint64_t version, const Json& wm);
  // Removes world_model/vNNNNNN.json when it is there: a snapshot written
  // after a stop, outside the journal, which a resume replaces with its own.
  void remove_world_model(std::uint64_t version);
  // The latest snapshot; a file over 16 MiB is refused (docs/world-model.md, "Limits").
  std::optional<Json> latest_world_model() const;
  std::vector<std::uint64_t> world_model_versions() const;

  void write_best(const BestSolution& best);
  std::optional<BestSolution> best() const;

  // The final evaluation of the best solution on all workloads (atomic;
  // also copied to best/final_eval.json while that best is current).
  void write_final_eval(const EvalResult& eval);
  std::optional<EvalResult> final_eval() const;

  void write_state(const Json& state);
  std::optional<Json> state() const;

 private:
  RunStore();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "2026-11-26T01:23:45.678Z"
KS_API std::string utc_timestamp();

KS_NAMESPACE_END
