// Human-readable output of the CLI: the start banner, one status line per
// round, and the final summary.
#pragma once

#include <cstdio>

#include "ksearch/search.hpp"

namespace ks::cli {

void print_start(std::FILE* out, const SearchStart& s, const std::string& llm);
void print_round(std::FILE* out, const RoundReport& r);
void print_summary(std::FILE* out, const SearchOutcome& o);
// Per-workload results of one evaluation as a table.
void print_eval_table(std::FILE* out, const EvalResult& r);

}  // namespace ks::cli
