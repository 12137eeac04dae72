// What `run`, `resume` and `replay` share: the LLM options, the progress
// lines, Ctrl-C handling and the exit status.
#pragma once

#include "args.hpp"
#include "ksearch/search.hpp"

namespace ks::cli {

// --llm SPEC with its openai options (--model, --base-url, ...) and --on-divergence.
LlmChoice llm_choice_from_args(const Args& a);
// Prints each round unless quiet; returns false (stop) after Ctrl-C.
ProgressCallback progress_printer(bool quiet);
// First Ctrl-C: stop after the current round; second: leave now.
void install_sigint();
// Prints the summary (and the JSON with --json) and where a replay left its
// recording; returns the exit status: 0 with a passing kernel, 3 without,
// 4 when a replay stopped where it left its recording, 130 when interrupted.
int finish(const SearchOutcome& out, const Args& a);

}  // namespace ks::cli
