// ksearch report: a run folder as one self-contained HTML page.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "args.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "ksearch/error.hpp"
#include "ksearch/io.hpp"
#include "ksearch/report.hpp"

namespace ks::cli {

namespace fs = std::filesystem;

int cmd_report(int argc, char** argv) {
  Args a("report", "ksearch report RUN_DIR [-o FILE] [--json]",
         "Writes a report of a run folder as one HTML file that opens in any browser and loads nothing from the "
         "network: latency and best-so-far over rounds, the world-model tree as it evolved, the best kernel per "
         "workload against the reference and baselines, LLM tokens and cost, every attempt, and the best kernel's "
         "source. Works on a run that is still going (it reads without the run's lock).",
         {{"output", "FILE", "Where to write the page; - for standard output.", "RUN_DIR/report.html", false, 'o'},
          {"json", "", "Print the report's data (the JSON the page embeds) instead of the page.", "", false}});
  a.alias("out", "output");  // as compare and export once spelled it
  if (!a.parse(argc, argv)) {
    throw UsageError(a.error());
  }
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (a.positional().size() != 1) {
    throw UsageError("give exactly one run folder");
  }
  const fs::path run = a.positional()[0];
  if (a.has("json")) {
    std::printf("%s\n", run_report_data(run).dump(2).c_str());
    return 0;
  }
  std::string page = render_run_report(run);
  const std::string out = a.get("output", (run / "report.html").string());
  if (out == "-") {
    std::fwrite(page.data(), 1, page.size(), stdout);
    return 0;
  }
  // Written next to its destination and renamed, so a browser refreshing a
  // report of a live run never reads half a page; a link there (RUN_DIR may
  // come from someone else) is refused, not written through.
  write_file_atomic(out, page);
  fmt::print(stderr, "ksearch report: wrote {} ({} KiB)\n", out, (page.size() + 1023) / 1024);
  return 0;
}

}  // namespace ks::cli
