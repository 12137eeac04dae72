// ksearch export: a solution as a file another harness runs (docs/export.md):
// a GPUMode submission, a KernelBench ModelNew, a FlashInfer-Bench Solution,
// or the bare manifest, each running the cubin libksearch evaluated.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "ksearch/error.hpp"
#include "ksearch/io.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/solution_export.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/tasks.hpp"

namespace ks::cli {

namespace fs = std::filesystem;

int cmd_export(int argc, char** argv) {
  Args a("export",
         "ksearch export --format gpumode|kernelbench|flashinfer|bundle --solution FILE|RUN [--task TASK] [-o FILE]",
         "Writes a solution as a file another harness runs: a GPUMode submission (custom_kernel(data), gpumode/trimul), "
         "a KernelBench ModelNew module, a FlashInfer-Bench Solution JSON (python entry point, destination-passing "
         "style), or the bundle manifest. Each embeds the cubin(s) libksearch's NVRTC build produced - taken from the "
         "evaluator's cache when an evaluation built them, else built the same way - and a small Python runtime that "
         "loads them through the CUDA driver and launches the launch plan on PyTorch's current stream "
         "(docs/export.md). RUN is a run folder: its best solution, task, architecture and compile flags.",
         {{"format", "NAME", "gpumode, kernelbench, flashinfer or bundle.", "", false},
          {"solution", "FILE|RUN", "A solution file (JSON or an answer in the candidate format) or a run folder.", "",
           false},
          {"task", "NAME|PATH", "The task (needed with a solution file; a run folder names its own).", "", false},
          {"output", "FILE", "Where to write, atomically: a temporary file beside it renamed into "
                          "place. A symbolic link there is refused (it is not written through) unless "
                          "--follow-symlinks; - writes to standard output.",
           "submission.py, model_new.py, <name>.json or bundle.json", false, 'o'},
          {"follow-symlinks", "", "With --output naming a symbolic link: write the file it leads to.", "", false},
          {"arch", "ARCH", "NVRTC target of the embedded cubins.", "the run's device, else sm_90a", false},
          {"cache-dir", "DIR", "The evaluator's cache folder, where an evaluation left its cubins.",
           "the run's, else ~/.cache/ksearch", false},
          {"flag", "FLAG", "An extra NVRTC flag the evaluation used (EvalOptions::extra_compile_flags).",
           "the run's", true},
          {"kernelbench", "DIR", "A KernelBench checkout: kernelbench/... tasks are its problems (oracle tasks).",
           "$KSEARCH_KERNELBENCH", false},
          {"problem-file", "FILE", "kernelbench: the problem file whose Model builds the module's parameters.",
           "an oracle task's own", false},
          {"name", "NAME", "flashinfer: the Solution's name.", "<definition>_ksearch_<id>", false},
          {"author", "NAME", "flashinfer: the Solution's author.", "libksearch", false},
          {"target-hardware", "NAME", "flashinfer: a target_hardware entry.", "from --arch, e.g. NVIDIA_H100",
           true}});
  a.alias("out", "output");  // its name before one vocabulary (report's --output)
  if (!a.parse(argc, argv)) {
    std::fprintf(stderr, "ksearch export: %s\n", a.error().c_str());
    return 2;
  }
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (!a.has("format") || !a.has("solution") || !a.positional().empty()) {
    std::fprintf(stderr, "ksearch export: give --format and --solution (see ksearch export --help)\n");
    return 2;
  }
  if (a.has("kernelbench")) ::setenv("KSEARCH_KERNELBENCH", a.get("kernelbench").c_str(), 1);

  ExportOptions o;
  try {
    o.format = parse_export_format(a.get("format"));
  } catch (const Error& e) {
    std::fprintf(stderr, "ksearch export: %s\n", e.what());
    return 2;
  }
  o.author = a.get("author", o.author);
  o.name = a.get("name");
  o.target_hardware = a.get_all("target-hardware");
  const fs::path source = a.get("solution");
  std::unique_ptr<Task> task;
  Solution solution;
  std::string arch = "sm_90a";
  std::string cache_dir;
  std::vector<std::string> flags;
  std::error_code ec;
  if (fs::is_directory(source, ec)) {
    RunStore run = RunStore::open_read_only(source);
    Json m = run.manifest();
    auto best = run.best();
    if (!best)
      throw Error(Status::not_found, fmt::format("run {} has no best solution yet (nothing passed)", source.string()));
    const std::string task_ref = a.get("task", m["task"].get_string("reference", m["task"].get_string("name")));
    if (task_ref.empty())
      throw Error(Status::invalid_argument,
                  fmt::format("run {} was made with a task supplied by a host program; give --task", source.string()));
    task = load_task(task_ref);
    solution = best->solution;
    o.evaluated = best->eval.to_json();
    o.evaluated["device"] = best->eval.device;
    const Json& ev = m["evaluator"];
    // A host run's device is the CPU (arch "x86-64"), no NVRTC target.
    if (m["device"].get_string("arch").rfind("sm_", 0) == 0) arch = m["device"].get_string("arch");
    if (!ev.get_string("cuda_arch").empty()) arch = ev.get_string("cuda_arch");
    cache_dir = ev.get_string("cache_dir");
    if (ev["options"]["extra_compile_flags"].is_array())
      for (const auto& f : ev["options"]["extra_compile_flags"].as_array()) flags.push_back(f.as_string());
  } else {
    if (!a.has("task")) {
      std::fprintf(stderr, "ksearch export: a solution file needs --task (a run folder names its own)\n");
      return 2;
    }
    task = load_task(a.get("task"));
    solution = load_solution_file(source, task->spec());
  }
  o.arch = a.get("arch", arch);
  o.cache_dir = a.get("cache-dir", cache_dir);
  o.extra_compile_flags = a.has("flag") ? a.get_all("flag") : flags;
  if (a.has("problem-file")) {
    try {
      o.problem_source = read_file(a.get("problem-file"), std::size_t{64} << 20);
    } catch (const Error& e) {
      throw Error(e.status(), fmt::format("--problem-file: {}", e.what()));
    }
  }

  ExportResult r = export_solution(*task, solution, o);
  const std::string out = a.get("output", r.default_file_name);
  if (out == "-") {
    if (std::fwrite(r.content.data(), 1, r.content.size(), stdout) != r.content.size() || std::fflush(stdout) != 0)
      throw Error(Status::io, "writing to standard output failed");
  } else {
    try {
      write_file_atomic(out, r.content, a.has("follow-symlinks"));
    } catch (const Error& e) {
      if (e.status() != Status::invalid_argument) throw;
      throw Error(e.status(), fmt::format("{} (--follow-symlinks writes the file it leads to)", e.what()));
    }
  }
  std::FILE* info = out == "-" ? stderr : stdout;
  const std::string built =
      language_is_python(solution.language)
          ? std::string("a ") + to_string(solution.language) + " module"
          : fmt::format("for {} (NVRTC {})", o.arch, r.manifest["nvrtc"].get_string("version"));
  std::fprintf(info, "ksearch export: %s: %s export of \"%s\" on %s, %s\n", out.c_str(), to_string(o.format),
               solution.name.empty() ? solution.id.c_str() : solution.name.c_str(), task->name().c_str(),
               built.c_str());
  for (const auto& n : r.notes) std::fprintf(info, "  %s\n", n.c_str());
  return 0;
}

}  // namespace ks::cli
