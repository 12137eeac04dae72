// What `run`, `resume` and `replay` share: the LLM options, the start and
// progress lines, Ctrl-C/SIGTERM handling and the exit status.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "interrupt.hpp"
#include "ksearch/json.hpp"
#include "ksearch/search.hpp"

namespace ks::cli {

// A solution named by what a run folder holds (cmd_eval.cpp): a solution
// file, best.json, an attempt folder, best/, or a run folder (its best
// solution); with `language` ("" for the task's order) read as that one.
Solution load_solution(const std::string& arg, const TaskSpec& spec, const std::string& language);

// --dataset, --baseline-solution, --measure-baseline and the --feedback-*
// options (task_args.cpp), and what they ask for; `default_seed` seeds
// --feedback-policy random without --feedback-seed.
std::vector<OptionSpec> task_source_options();
TaskSources task_sources_from_args(const Args& a, std::uint64_t default_seed);

// --llm SPEC with its openai options (--model, --base-url, ...) and --on-divergence.
LlmChoice llm_choice_from_args(const Args& a);
// The openai options alone, each value checked (a number where one belongs,
// in range) whatever --llm says; throws ks::Error(invalid_argument) naming the option.
OpenAiConfig openai_config_from_args(const Args& a);
// "openai:MODEL at URL", "replay:FILE", ... for the start line.
std::string llm_text(const LlmChoice& c);
// Where human progress goes: stdout, or stderr when stdout is for --json.
std::FILE* progress_stream();
// Prints each round unless quiet; returns false (stop after this round) once
// Ctrl-C or SIGTERM came.
ProgressCallback progress_printer(bool quiet, const Interrupts& interrupts);
// Prints the start line and the run folder unless quiet, and tells the
// interrupt handler the folder (a second interrupt marks it stopped).
StartCallback start_printer(bool quiet, Interrupts& interrupts, std::string llm);
// Warnings on stderr from the run's events, --quiet or not: a world-model
// fallback, with why and the likely cause.
EventCallback warning_printer();
// Prints the summary, or with --json the outcome (plus `extra`'s fields) as
// one JSON document, and where a replay left its recording; returns the exit
// status (exit_codes.hpp): 0 with a passing kernel, 3 without, 5 when a
// replay stopped where it left its recording, 130 when interrupted.
int finish(const SearchOutcome& out, Json extra = Json());

// The settings table's flags (setting_flags.cpp): every row with a flag for
// `ksearch run`, those marked for replay (default "as recorded") for `ksearch replay`.
std::vector<OptionSpec> setting_options(bool for_replay);
// Each such flag given: into `c` (checked against the row's type and bounds),
// or with `changes` into replay's config_changes by the row's name.
void apply_setting_flags(const Args& a, SearchConfig& c, Json* changes = nullptr);

// `options` with --wandb, --wandb-project and --run-name (wandb_flags.cpp).
std::vector<OptionSpec> with_wandb_options(std::vector<OptionSpec> options);
// Those flags as the run's WandbOptions; the last two without --wandb are a UsageError.
WandbOptions wandb_from_args(const Args& a);

}  // namespace ks::cli
