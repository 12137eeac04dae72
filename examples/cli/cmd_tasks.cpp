// ksearch tasks: the built-in tasks and the example task files.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

#include "args.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/weak_check.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace ks::cli {

namespace {

std::string languages_text(const std::vector<Language>& langs) {
  std::string s;
  for (auto l : langs) s += (s.empty() ? "" : ",") + std::string(to_string(l));
  return s.empty() ? "-" : s;
}

// What the cheapest of a task's languages needs to be evaluated: only the
// host's C++ compiler (CPU), an NVIDIA GPU, or a Python with PyTorch.
std::string needs_text(const std::vector<Language>& langs) {
  auto has = [&](Language l) { return std::find(langs.begin(), langs.end(), l) != langs.end(); };
  if (has(Language::cpp)) return "CPU";
  if (has(Language::cuda) || has(Language::triton)) return "GPU";
  if (has(Language::python)) return "PyTorch";
  return "-";
}

// Names in the order a person counts: "level1/2_x" before "level1/10_y"
// (runs of digits compare as numbers, the rest byte by byte).
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t i2 = i, j2 = j;
      while (i2 < a.size() && a[i2] == '0') ++i2;  // leading zeros do not count
      while (j2 < b.size() && b[j2] == '0') ++j2;
      std::size_t ie = i2, je = j2;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      if (ie - i2 != je - j2) return ie - i2 < je - j2;  // fewer digits: smaller
      if (int c = a.compare(i2, ie - i2, b, j2, je - j2); c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// One line of the table, cut to `width` bytes with "..." (a description
// may be long; --long and --json print it whole).
std::string fit(std::string line, std::size_t width) {
  if (line.size() > width && width > 3) {
    line.resize(width - 3);
    while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xC0) == 0x80) line.pop_back();
    if (!line.empty() && static_cast<unsigned char>(line.back()) >= 0xC0) line.pop_back();  // a cut UTF-8 lead
    line += "...";
  }
  return line;
}

// Published numbers to beat, in one line: plain fields as they are, nested
// ones summarised (--json prints everything).
std::string targets_text(const Json& targets) {
  if (!targets.is_object() || targets.empty()) return "";
  std::string s;
  for (const auto& [k, v] : targets.as_object()) {
    std::string value = v.is_string() ? v.as_string()
                        : v.is_array()  ? fmt::format("{} entries", v.size())
                        : v.is_object() ? fmt::format("{} fields", v.size())
                                        : v.dump();
    if (value.size() > 100) value = value.substr(0, 97) + "...";
    s += fmt::format("{}{}: {}", s.empty() ? "" : "; ", k, value);
  }
  return s;
}

// ksearch tasks --check TASK: the weak-check detection in each language of
// the task that can be evaluated here (or the one --language names).
int check_task(const Args& a) {
  std::unique_ptr<Task> task = load_task(a.get("check"));
  std::vector<Language> languages;
  if (a.has("language")) {
    auto l = language_from_string(a.get("language"));
    if (!l) throw Error(Status::invalid_argument, "--language must be cuda, cpp, triton or python");
    // A Python language's candidates meet the check of the backend they run
    // on, which the native candidates of that backend probe.
    if (*l == Language::triton) l = Language::cuda;
    if (*l == Language::python) l = cuda_available() ? Language::cuda : Language::cpp;
    languages.push_back(*l);
  } else {
    for (Language l : task->spec().languages)
      if (!language_is_python(l)) languages.push_back(l);
  }
  EvaluatorConfig ec;
  ec.cache_dir = a.get("cache-dir");
  ec.sandbox = ks::parse_sandbox_mode(a.get("sandbox", "auto"), "--sandbox");
  std::unique_ptr<Evaluator> evaluator;
  WeakCheckOptions options;
  options.suggest_fixes = !a.has("no-fix");
  if (a.has("workloads")) {
    const std::string w = a.get("workloads");
    if (w == "all")
      for (const auto& x : task->spec().workloads) options.workloads.push_back(x.name);
    else if (w != "feedback")
      throw Error(Status::invalid_argument, "--workloads must be feedback or all");
  }
  Json reports = Json::array();
  bool weak = false;
  bool checked = false;  // at least one version was checked, not skipped
  for (Language lang : languages) {
    WeakCheckReport r;
    std::string why;
    if (std::find(task->spec().languages.begin(), task->spec().languages.end(), lang) ==
        task->spec().languages.end()) {
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\" has no {} version", task->name(), to_string(lang)));
    } else if (lang == Language::cuda && !cuda_available(&why)) {
      r = weak_check_skipped(*task, lang, fmt::format("the task's cuda version needs a GPU, and CUDA is not usable "
                                                      "here: {}", why));
    } else {
      if (!evaluator) evaluator = make_evaluator(ec);
      r = check_weak(*task, lang, *evaluator, options);
    }
    weak = weak || r.weak();
    checked = checked || r.status != "skipped";
    if (json_output()) {
      reports.push_back(r.to_json());
    } else {
      std::printf("%s\n", r.text().c_str());
      if (r.status != "skipped" && r.status != "ok")
        std::printf("  (%d evaluations, %.1f s)\n", r.evaluations, r.wall_s);
    }
  }
  if (json_output()) std::printf("%s\n", reports.dump(2).c_str());
  if (weak) return kExitWeakCheck;
  if (!checked) {
    // Nothing was checked: not a pass. The same status as a CUDA run without a GPU.
    std::fprintf(stderr, "ksearch tasks: error: no version of task \"%s\" could be checked here (see above)\n",
                 task->name().c_str());
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

int cmd_tasks(int argc, char** argv) {
  Args a("tasks", "ksearch tasks [--long] [--kernelbench DIR] [--dataset DIR] [--spec NAME] [--check NAME] [--json]",
         "Lists the built-in tasks (suite/name) and the example task files (examples/name, from the installed "
         "share/ksearch/tasks or $KSEARCH_TASKS_DIR) as a table sorted by name (numbers in order: 2 before 10): "
         "each task's languages and what it needs (CPU, GPU, PyTorch); --long adds the published numbers to beat; "
         "every listed name works as --task from any directory. With --dataset, the definitions of a "
         "FlashInfer-Trace checkout (run one with --task DIR/definitions/<op_type>/<name>.json).\n\n"
         "With --check, the weak-check detection (docs/evaluation.md, \"Weak checks\"), which `ksearch run` also "
         "does before its first LLM request: candidates that do not compute the task - zeros, ones, an input echoed "
         "into the outputs, and the task's \"weakened_references\" (the reference with a term dropped) - are "
         "checked against the task's reference on its feedback workloads (correctness only: two input seeds, the reference not timed). "
         "When one passes, it says which on which workloads, what the reference's outputs look like (the share of "
         "exact zeros and of the most common value), and a fix where trying other input distributions finds one. "
         "A CUDA version on a machine without a GPU is skipped with a note. Exit status: 0 the check tells every "
         "candidate apart in every version checked, 6 a candidate passes on every checked workload, 1 error (also "
         "when every version was skipped, so nothing was checked).",
         {{"json", "", "Print the list as JSON (with --check: the reports, as manifest.json records them).", "",
           false},
          {"long", "", "List each task in full: its languages, needs, source, whole description and published "
                       "targets, instead of one table row.", "", false},
          {"check", "NAME", "Run the weak-check detection on this task (a name or a task file or folder).", "",
           false},
          {"language", "cuda|cpp|triton|python", "With --check: only this version of the task (triton: cuda; python: cuda on a GPU, else cpp).", "every version of the task",
           false},
          {"workloads", "feedback|all", "With --check: the task's feedback workloads (what a search checks each "
                                        "round) or all of them.", "feedback", false},
          {"no-fix", "", "With --check: do not try other input distributions for a fix.", "", false},
          {"cache-dir", "DIR", "With --check: compiled kernels and reference outputs.", "~/.cache/ksearch", false},
          {"sandbox", "auto|on|off", "With --check: confine the candidates and their compilers (docs/security.md).",
           "auto", false},
          {"spec", "NAME", "Print one task's full specification as JSON (tensors, workloads, references, starting "
                           "points, prompt) instead of the list.", "", false},
          {"kernelbench", "DIR", "Also list the problems of this KernelBench checkout (run by a PyTorch reference "
                                 "oracle).", "$KSEARCH_KERNELBENCH", false},
          {"dataset", "DIR", "A FlashInfer-Trace dataset checkout to list instead.", "", false}});
  if (!a.parse(argc, argv)) {
    throw UsageError(a.error());
  }
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (a.has("kernelbench")) ::setenv("KSEARCH_KERNELBENCH", a.get("kernelbench").c_str(), 1);
  if (a.has("check")) return check_task(a);
  if (a.has("spec")) {
    std::printf("%s\n", load_task(a.get("spec"))->spec().to_json().dump(2).c_str());
    return 0;
  }
  std::vector<std::filesystem::path> dirs;
  if (auto d = example_tasks_dir(); !d.empty()) dirs.push_back(d);
  const bool dataset = a.has("dataset");
  auto tasks = dataset ? list_dataset_tasks(a.get("dataset")) : list_tasks(dirs);
  const char* kb_env = std::getenv("KSEARCH_KERNELBENCH");
  std::string kb = kb_env ? kb_env : "";
  if (!kb.empty() && !dataset)
    for (auto& t : list_kernelbench_tasks(kb)) tasks.push_back(std::move(t));
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const TaskInfo& x, const TaskInfo& y) { return natural_less(x.name, y.name); });
  if (a.has("json")) {
    Json arr = Json::array();
    for (const auto& t : tasks) {
      Json langs = Json::array();
      for (auto l : t.languages) langs.push_back(to_string(l));
      arr.push_back(Json::obj({{"name", t.name},
                               {"description", t.description},
                               {"source", t.source},
                               {"languages", langs},
                               {"targets", t.targets.is_null() ? Json::object() : t.targets}}));
    }
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  if (tasks.empty()) {
    std::printf("No tasks found.\n");
    return 0;
  }
  std::size_t w = 4, lw = 9, nw = 5;
  for (const auto& t : tasks) {
    w = std::max(w, std::min<std::size_t>(t.name.size(), 48));  // a longer name pushes its own row only
    lw = std::max(lw, languages_text(t.languages).size());
    nw = std::max(nw, needs_text(t.languages).size());
  }
  if (a.has("long")) {
    for (const auto& t : tasks) {
      fmt::print("{}\n  languages: {}; needs: {}; source: {}\n", t.name, languages_text(t.languages),
                 needs_text(t.languages), t.source);
      fmt::print("  {}\n", t.description);
      if (std::string tg = targets_text(t.targets); !tg.empty()) fmt::print("  targets: {}\n", tg);
    }
  } else {
    const char* cols = std::getenv("COLUMNS");
    const long width = cols ? std::strtol(cols, nullptr, 10) : 0;
    // Cut to $COLUMNS, else on a terminal to 120; into a pipe or a file,
    // whole lines (a script reads the descriptions whole).
    const std::size_t line_width = width >= 40               ? static_cast<std::size_t>(width)
                                   : ::isatty(STDOUT_FILENO) ? 120
                                                             : std::string::npos;
    fmt::print("{:<{}}  {:<{}}  {:<{}}  {}\n", "TASK", w, "LANGUAGES", lw, "NEEDS", nw, "WHAT");
    for (const auto& t : tasks)
      fmt::print("{}\n", fit(fmt::format("{:<{}}  {:<{}}  {:<{}}  {}", t.name, w, languages_text(t.languages), lw,
                                         needs_text(t.languages), nw, t.description),
                             line_width));
    fmt::print("\n{} tasks. NEEDS, for the task's cheapest language: CPU runs anywhere (the host's C++\n"
               "compiler), GPU an NVIDIA GPU, PyTorch a Python with PyTorch ($KSEARCH_PYTHON).\n"
               "--long adds sources and published targets; --spec NAME prints one task in full.\n",
               tasks.size());
  }
  if (!dataset && dirs.empty()) fmt::print("\n(no example task folder found; set $KSEARCH_TASKS_DIR)\n");
  return 0;
}

}  // namespace ks::cli
