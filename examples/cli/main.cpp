// ksearch: the command-line program.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "ksearch/error.hpp"
#include "ksearch/io.hpp"
#include "ksearch/json.hpp"
#include "ksearch/log.hpp"
#include "ksearch/ksearch.h"

namespace ks::cli {

namespace {
bool g_json_output = false;
}  // namespace

bool json_output() { return g_json_output; }
void set_json_output(bool on) { g_json_output = on; }

}  // namespace ks::cli

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "ksearch %s: LLM-driven GPU kernel search with a co-evolving world model\n\n"
               "Usage: ksearch <command> [options]   (ksearch <command> --help for its options;\n"
               "       every command also takes --quiet and --verbose)\n\n"
               "Commands:\n"
               "  run       search for a fast kernel for a task (a new run folder)\n"
               "  resume    continue a run folder after a stop or a crash\n"
               "  replay    reproduce a run folder into a new one from its recorded answers and\n"
               "            evaluations; with changed settings, say where and why it diverges\n"
               "  show      print a run's world-model tree, attempts and best results\n"
               "  report    write a run's report: one self-contained HTML page\n"
               "  compare   put runs of one task side by side: best so far over rounds, rounds to 90 %%,\n"
               "            LLM calls and tokens (an HTML page and a table)\n"
               "  eval      evaluate one solution file on a task\n"
               "  export    write a solution for GPUMode, KernelBench or FlashInfer-Bench (the evaluated cubin)\n"
               "  tasks     list the built-in and example tasks\n"
               "  devices   say whether CUDA evaluation is available here (exit 0 if so)\n"
               "  version   print the library version\n\n"
               "%s\n",
               ks_version_string(), ks::cli::kExitCodesHelp);
}

// The status as a word a script can match on.
const char* status_name(ks::Status s) {
  switch (s) {
    case ks::Status::ok: return "ok";
    case ks::Status::invalid_argument: return "invalid_argument";
    case ks::Status::not_found: return "not_found";
    case ks::Status::io: return "io";
    case ks::Status::parse: return "parse";
    case ks::Status::no_device: return "no_device";
    case ks::Status::compile: return "compile";
    case ks::Status::timeout: return "timeout";
    case ks::Status::llm: return "llm";
    case ks::Status::budget: return "budget";
    case ks::Status::cancelled: return "cancelled";
    case ks::Status::user: return "user";
    case ks::Status::version: return "version";
    case ks::Status::buffer_too_small: return "buffer_too_small";
    case ks::Status::state: return "state";
    case ks::Status::subprocess: return "subprocess";
    case ks::Status::cuda: return "cuda";
    case ks::Status::internal: return "internal";
  }
  return "unknown";
}

// An error as the command line reports it: a line on stderr, and with
// --json also one JSON document on stdout (so a script parses every outcome).
// A message may quote a log or a model's answer: the terminal gets it without
// control sequences.
int report_error(const std::string& cmd, const std::string& message, const char* status, int code, bool usage) {
  std::fprintf(stderr, "ksearch %s: %s%s\n", ks::terminal_text(cmd).c_str(), usage ? "" : "error: ",
               ks::terminal_text(message).c_str());
  if (ks::cli::json_output())
    std::printf("%s\n", ks::Json::obj({{"error", ks::Json::obj({{"message", message},
                                                                 {"status", status},
                                                                 {"exit_code", code}})}})
                            .dump(2)
                            .c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return ks::cli::kExitUsage;
  }
  std::string cmd = argv[1];
  int sub_argc = argc - 2;
  char** sub_argv = argv + 2;
  // The library's log (warnings, notes, progress of long steps) on stderr:
  // progress by default, warnings only with --quiet, everything with --verbose.
  ks::LogLevel level = ks::LogLevel::info;
  for (int i = 0; i < sub_argc; ++i) {
    if (std::strcmp(sub_argv[i], "--json") == 0) ks::cli::set_json_output(true);
    if (std::strcmp(sub_argv[i], "--verbose") == 0 && level == ks::LogLevel::info) level = ks::LogLevel::debug;
    if (std::strcmp(sub_argv[i], "--quiet") == 0) level = ks::LogLevel::warning;
  }
  ks::set_log_level(level);
  try {
    if (cmd == "run") return ks::cli::cmd_run(sub_argc, sub_argv);
    if (cmd == "resume") return ks::cli::cmd_resume(sub_argc, sub_argv);
    if (cmd == "replay") return ks::cli::cmd_replay(sub_argc, sub_argv);
    if (cmd == "show") return ks::cli::cmd_show(sub_argc, sub_argv);
    if (cmd == "report") return ks::cli::cmd_report(sub_argc, sub_argv);
    if (cmd == "compare") return ks::cli::cmd_compare(sub_argc, sub_argv);
    if (cmd == "eval") return ks::cli::cmd_eval(sub_argc, sub_argv);
    if (cmd == "export") return ks::cli::cmd_export(sub_argc, sub_argv);
    if (cmd == "tasks") return ks::cli::cmd_tasks(sub_argc, sub_argv);
    if (cmd == "devices") return ks::cli::cmd_devices(sub_argc, sub_argv);
    if (cmd == "version" || cmd == "--version") {
      std::printf("ksearch %s\n", ks_version_string());
      return ks::cli::kExitOk;
    }
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      usage(stdout);
      return ks::cli::kExitOk;
    }
    std::fprintf(stderr, "ksearch: unknown command \"%s\"\n\n", cmd.c_str());
    usage(stderr);
    return ks::cli::kExitUsage;
  } catch (const ks::cli::UsageError& e) {
    return report_error(cmd, e.what(), "usage", ks::cli::kExitUsage, true);
  } catch (const ks::Error& e) {
    const int code = e.status() == ks::Status::invalid_argument ? ks::cli::kExitUsage : ks::cli::kExitError;
    return report_error(cmd, e.what(), status_name(e.status()), code, false);
  } catch (const std::exception& e) {
    return report_error(cmd, std::string("internal error: ") + e.what(), "internal", ks::cli::kExitError, false);
  }
}
