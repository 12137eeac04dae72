// Reports on a run folder (docs/search.md): a self-contained HTML page that
// shows what a search did, and the world-model tree in Graphviz. Both read
// the folder without the lock, so they work on a run that is still going
// (a torn last log line is left out, as the run store does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"

KS_NAMESPACE_BEGIN

struct KS_API ReportOptions {
  // Longest piece of the best kernel's source shown per file; a longer file
  // is cut and says so.
  std::size_t max_source_bytes = std::size_t{1} << 20;
  // Longest node text (notes, description, rationale) kept per tree node.
  std::size_t max_node_text = 2000;
};

// Everything the page plots, as one JSON object (the page embeds exactly
// this): the run's summary, every attempt with the best-so-far after it, the
// LLM calls with their usage and the round they were spent on, the
// world-model snapshots (nodes shared between snapshots stored once), the
// best kernel's per-workload timings beside the reference and baselines, and
// its source. Files a run in progress has not finished are skipped and
// listed under "warnings". Throws ks::Error(Status::not_found) when the
// folder holds no run.
KS_API Json run_report_data(const std::filesystem::path& run_dir, const ReportOptions& options = {});

// One HTML file with inline CSS, JavaScript and SVG that loads nothing from
// the network and opens in any browser (the tables and the source also
// without JavaScript).
KS_API std::string render_run_report(const std::filesystem::path& run_dir, const ReportOptions& options = {});

// A world-model snapshot (world_model/vNNNNNN.json) as a Graphviz digraph:
// nodes coloured by status, labelled with title, priority V, difficulty and
// the attached kernel's latency.
KS_API std::string world_model_dot(const Json& world_model, const std::string& title = {});
// A run's snapshot (the latest when `version` is empty) in Graphviz, with
// the nodes whose cycle ended without a passing kernel marked too_hard (from
// the event log). Throws ks::Error naming a missing run, snapshot or version.
KS_API std::string run_world_model_dot(const std::filesystem::path& run_dir,
                                       std::optional<std::uint64_t> version = std::nullopt);

// ---------------------------------------------------------------------------
// Runs side by side (`ksearch compare`, docs/search.md "Comparing runs").

// One run of a comparison: its folder, and the label it is grouped under
// (empty: the run's strategy). Runs with the same label are repeats of one
// configuration: the comparison gives their mean and spread.
struct KS_API CompareRun {
  std::filesystem::path dir;
  std::string label;
};

struct KS_API CompareOptions {
  // For tasks with per-workload baseline latencies: the fraction of
  // workloads on which the run's best kernel is at least this many times as
  // fast as the baseline (baseline latency / kernel latency >= at_least).
  double at_least = 1.0;
};

// Everything the comparison shows, as one JSON object (the page embeds
// exactly this): per run its best-so-far latency (and score, 100 x the mean
// over workloads of baseline / kernel latency, where the task has
// baselines) after each round, the rounds it took to come within 90 % of its
// final best, its LLM calls and tokens, its wall time and the fraction of
// workloads at or above `at_least` times the baseline; per label the mean,
// minimum, maximum and standard deviation of the same over its runs, round
// by round. Reads each folder without its lock (a run in progress works)
// and strictly: a missing folder, a damaged manifest, attempt or event log
// is a ks::Error naming the file; runs of different tasks, or the same
// folder twice, are refused (Status::invalid_argument).
KS_API Json compare_runs_data(const std::vector<CompareRun>& runs, const CompareOptions& options = {});

// The comparison as one self-contained HTML page in the report's style: the
// plots are inline SVG (no script, nothing loaded), the data embedded.
KS_API std::string render_compare_report(const Json& compare_data);

// The comparison as plain-text tables: runs, labels, the best so far by round.
KS_API std::string render_compare_text(const Json& compare_data);

KS_NAMESPACE_END
