// ksearch: the command-line program.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "ksearch/error.hpp"
#include "ksearch/ksearch.h"

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "ksearch %s: LLM-driven GPU kernel search with a co-evolving world model\n\n"
               "Usage: ksearch <command> [options]   (ksearch <command> --help for its options)\n\n"
               "Commands:\n"
               "  run       search for a fast kernel for a task (a new run folder)\n"
               "  resume    continue a run folder after a stop or a crash\n"
               "  replay    reproduce a run folder into a new one from its recorded answers and\n"
               "            evaluations; with changed settings, say where and why it diverges\n"
               "  show      print a run's world-model tree, attempts and best results\n"
               "  eval      evaluate one solution file on a task\n"
               "  export    write a solution for GPUMode, KernelBench or FlashInfer-Bench (the evaluated cubin)\n"
               "  tasks     list the built-in and example tasks\n"
               "  devices   say whether CUDA evaluation is available here (exit 0 if so)\n"
               "  version   print the library version\n",
               ks_version_string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  int sub_argc = argc - 2;
  char** sub_argv = argv + 2;
  try {
    if (cmd == "run") return ks::cli::cmd_run(sub_argc, sub_argv);
    if (cmd == "resume") return ks::cli::cmd_resume(sub_argc, sub_argv);
    if (cmd == "replay") return ks::cli::cmd_replay(sub_argc, sub_argv);
    if (cmd == "show") return ks::cli::cmd_show(sub_argc, sub_argv);
    if (cmd == "eval") return ks::cli::cmd_eval(sub_argc, sub_argv);
    if (cmd == "export") return ks::cli::cmd_export(sub_argc, sub_argv);
    if (cmd == "tasks") return ks::cli::cmd_tasks(sub_argc, sub_argv);
    if (cmd == "devices") return ks::cli::cmd_devices(sub_argc, sub_argv);
    if (cmd == "version" || cmd == "--version") {
      std::printf("ksearch %s\n", ks_version_string());
      return 0;
    }
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      usage(stdout);
      return 0;
    }
    std::fprintf(stderr, "ksearch: unknown command \"%s\"\n\n", cmd.c_str());
    usage(stderr);
    return 2;
  } catch (const ks::Error& e) {
    std::fprintf(stderr, "ksearch %s: error: %s\n", cmd.c_str(), e.what());
    return e.status() == ks::Status::invalid_argument ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ksearch %s: internal error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
