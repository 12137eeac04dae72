// ksearch tasks: the built-in tasks and the example task files.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "args.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "ksearch/tasks.hpp"

namespace ks::cli {

namespace {

std::string languages_text(const std::vector<Language>& langs) {
  std::string s;
  for (auto l : langs) s += (s.empty() ? "" : ",") + std::string(to_string(l));
  return s.empty() ? "-" : s;
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

}  // namespace

int cmd_tasks(int argc, char** argv) {
  Args a("tasks", "ksearch tasks [--kernelbench DIR] [--dataset DIR] [--spec NAME] [--json]",
         "Lists the built-in tasks (suite/name) and the example task files (examples/name, from the installed "
         "share/ksearch/tasks or $KSEARCH_TASKS_DIR), with their languages and the published numbers to beat; "
         "every listed name works as --task from any directory. With --dataset, the definitions of a "
         "FlashInfer-Trace checkout (run one with --task DIR/definitions/<op_type>/<name>.json).",
         {{"json", "", "Print the list as JSON.", "", false},
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
  std::size_t w = 24;
  for (const auto& t : tasks) w = std::max(w, t.name.size());
  for (const auto& t : tasks) {
    fmt::print("{:<{}} {:<9} {}\n", t.name, w, languages_text(t.languages), t.description);
    fmt::print("{:<{}} {:<9} source: {}\n", "", w, "", t.source);
    if (std::string tg = targets_text(t.targets); !tg.empty())
      fmt::print("{:<{}} {:<9} targets: {}\n", "", w, "", tg);
  }
  if (!dataset && dirs.empty()) fmt::print("\n(no example task folder found; set $KSEARCH_TASKS_DIR)\n");
  return 0;
}

}  // namespace ks::cli
