// ksearch compare: runs of one task side by side (an HTML page, a text table
// or JSON).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "args.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "ksearch/io.hpp"
#include "ksearch/report.hpp"

namespace ks::cli {

namespace fs = std::filesystem;

namespace {

// "LABEL=RUN_DIR" gives the run a label; a plain RUN_DIR (or a path that
// exists as given, '=' and all) is labelled by its strategy.
CompareRun parse_run(const std::string& arg) {
  std::error_code ec;
  const auto eq = arg.find('=');
  if (eq == std::string::npos || fs::exists(arg, ec)) return CompareRun{arg, ""};
  if (eq == 0) throw UsageError(fmt::format("\"{}\": the label before '=' is empty", arg));
  if (eq + 1 == arg.size()) throw UsageError(fmt::format("\"{}\": no run folder after '='", arg));
  return CompareRun{arg.substr(eq + 1), arg.substr(0, eq)};
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  Args a("compare", "ksearch compare [LABEL=]RUN_DIR... [-o FILE] [--at-least X] [--json]",
         "Puts runs of one task side by side: each run's best latency so far over rounds (and best score, 100 x the "
         "mean over workloads of baseline / kernel latency, for tasks with baselines), the rounds it took to come "
         "within 90 % of its final best (latency <= final best / 0.9), its LLM calls and tokens and its wall time; "
         "runs with the same label (by default their strategy; LABEL=RUN_DIR gives one) are repeats, shown as their "
         "mean and spread. Writes one self-contained HTML page (inline SVG plots, nothing loaded) and prints a table. "
         "Runs of different tasks are refused. See docs/search.md, \"Comparing runs\".",
         {{"output", "FILE", "Where to write the HTML page.", "compare.html", false, 'o'},
          {"at-least", "X",
           "For tasks with per-workload baselines: count the workloads where the best kernel is at least X times as "
           "fast as the baseline.", "1.0", false},
          {"json", "", "Print the comparison's data as JSON (the data the page embeds) instead of the table.", "", false}});
  a.alias("out", "output");
  if (!a.parse(argc, argv)) throw UsageError(a.error());
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return kExitOk;
  }
  if (a.positional().empty()) throw UsageError("give one or more run folders");
  CompareOptions options;
  options.at_least = a.get_double("at-least", 1.0);
  if (!(options.at_least > 0)) throw UsageError(fmt::format("--at-least must be a number > 0, is {}", a.get("at-least")));
  std::vector<CompareRun> runs;
  for (const auto& p : a.positional()) runs.push_back(parse_run(p));
  const Json data = compare_runs_data(runs, options);
  const std::string page = render_compare_report(data);
  const std::string out = a.get("output", "compare.html");
  write_file_atomic(out, page);
  if (a.has("json")) std::printf("%s\n", data.dump(2).c_str());
  else std::printf("%s", terminal_text(render_compare_text(data)).c_str());
  fmt::print(stderr, "ksearch compare: wrote {} ({} KiB)\n", out, (page.size() + 1023) / 1024);
  return kExitOk;
}

}  // namespace ks::cli
