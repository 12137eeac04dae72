// Human-readable output of the CLI: the start banner, one status line per
// round, and the final summary.
#pragma once

#include <cstdio>

#include "ksearch/search.hpp"

namespace ks::cli {

void print_start(std::FILE* out, const SearchStart& s, const std::string& llm);
// How a new world-model run starts when it does not start from the task
// alone: the given kernel (its recorded evaluation used, or measured again,
// and why), the imported tree, or the task's starting point.
void print_warm_start(std::FILE* out, const SearchConfig& c);
void print_round(std::FILE* out, const RoundReport& r);
void print_summary(std::FILE* out, const SearchOutcome& o);
// Said before a --llm replay: run starts: the candidates are measured again.
void print_replay_notice(std::FILE* out, const LlmChoice& llm);
// Where a replay left its recording and why (nothing when it did not).
void print_divergence(std::FILE* out, const SearchOutcome& o);
// Per-workload results of one evaluation as a table (with baseline columns
// when baseline latencies are known).
void print_eval_table(std::FILE* out, const EvalResult& r);
// "1.2345 ms geometric mean, 3.10x the reference, 1.20x the baseline".
std::string eval_headline(const EvalResult& r);
// Where the evaluation's time went, from metrics.phases (docs/evaluation.md,
// "Phases"): "4.89 s: compile 0.35 s (cache miss), timing 1.93 s, ...,
// other 0.00 s", the phases of at least a millisecond in their order;
// "" for a result without phases.
std::string phases_line(const EvalResult& r);
// Every phase with its seconds and share of the wall time, one per line.
void print_phases_table(std::FILE* out, const EvalResult& r);
// Reads a --baseline-latencies file (see EvalOptions::baseline_latencies).
Json read_baseline_latencies(const std::string& path);

}  // namespace ks::cli
