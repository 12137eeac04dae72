// The task registry: built-in suites by name, task files by path, and the
// example task folders.
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "ksearch/error.hpp"
#include "ksearch/tasks.hpp"
#include "util/text.hpp"
#if KS_HAVE_GPUMODE_SUITE
#include "tasks/gpumode/gpumode.hpp"
#endif
#if KS_HAVE_KERNELBENCH_SUITE
#include "tasks/kernelbench/level1.hpp"
#include "tasks/kernelbench/oracle_task.hpp"
#endif
#if KS_HAVE_FLASHINFER_SUITE
#include "tasks/flashinfer/dataset.hpp"
#include "tasks/flashinfer/flashinfer.hpp"
#endif

KS_NAMESPACE_BEGIN
namespace {

namespace fs = std::filesystem;

struct Entry {
  std::string description;
  TaskFactory factory;
};

struct Registry {
  std::mutex m;
  std::map<std::string, Entry> entries;
};

Registry& registry() {
  static Registry r;
  return r;
}

// Set while the built-in suites register, so a task the program registered
// earlier under the same name keeps precedence.
thread_local bool t_registering_builtins = false;

// Suites register on first use, not from static initialisers: objects in a
// static library that nothing references are dropped by the linker.
void ensure_builtin_suites() {
  static std::once_flag once;
  std::call_once(once, [] {
    t_registering_builtins = true;
#if KS_HAVE_GPUMODE_SUITE
    tasks::gpumode::register_gpumode_suite();
#endif
#if KS_HAVE_KERNELBENCH_SUITE
    tasks::kernelbench::register_kernelbench_suite();
#endif
#if KS_HAVE_FLASHINFER_SUITE
    tasks::flashinfer::register_flashinfer_suite();
#endif
    t_registering_builtins = false;
  });
}

std::vector<std::pair<std::string, Entry>> builtin_entries() {
  ensure_builtin_suites();
  Registry& r = registry();
  std::lock_guard lock(r.m);
  return {r.entries.begin(), r.entries.end()};
}

std::optional<Entry> find_builtin(const std::string& name) {
  ensure_builtin_suites();
  Registry& r = registry();
  std::lock_guard lock(r.m);
  auto it = r.entries.find(name);
  if (it == r.entries.end()) return std::nullopt;
  return it->second;
}

bool is_task_path(const fs::path& p) {
  std::error_code ec;
  // Any existing non-folder counts, so a device or a FIFO given as a task is
  // refused by the loader with its reason rather than called an unknown name.
  return (fs::exists(p, ec) && !fs::is_directory(p, ec)) || fs::is_regular_file(p / "task.json", ec);
}

// Example folders (each holding task.json) under `dir`, sorted by name.
std::vector<fs::path> example_folders(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && fs::is_regular_file(e.path() / "task.json", ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

void register_builtin_task(const std::string& name, const std::string& description, TaskFactory factory) {
  if (name.empty()) throw Error(Status::invalid_argument, "register_builtin_task: empty task name");
  if (!factory) throw Error(Status::invalid_argument, fmt::format("register_builtin_task(\"{}\"): no factory", name));
  Registry& r = registry();
  std::lock_guard lock(r.m);
  if (t_registering_builtins && r.entries.count(name)) return;
  r.entries[name] = Entry{description, std::move(factory)};
}

fs::path example_tasks_dir() {
  std::error_code ec;
  if (const char* env = std::getenv("KSEARCH_TASKS_DIR"); env && *env) return env;
  // Installed: <prefix>/lib/libksearch.so -> <prefix>/share/ksearch/tasks.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&example_tasks_dir), &info) && info.dli_fname) {
    fs::path lib = fs::absolute(info.dli_fname).parent_path();
    for (const fs::path& p : {lib / ".." / "share" / "ksearch" / "tasks", lib / ".." / ".." / "share" / "ksearch" / "tasks"})
      if (fs::is_directory(p, ec)) return fs::weakly_canonical(p, ec);
  }
#ifdef KS_SOURCE_TASKS_DIR
  if (fs::is_directory(KS_SOURCE_TASKS_DIR, ec)) return KS_SOURCE_TASKS_DIR;
#endif
  return {};
}

std::unique_ptr<Task> load_task(const std::string& name_or_path) { return load_task(name_or_path, TaskSources{}); }

namespace {

// A task whose spec differs from another's in its feedback subset only; its
// prompts (which a task may compute) stay the other's.
class ReselectedTask final : public Task {
 public:
  ReselectedTask(std::unique_ptr<Task> inner, std::vector<std::string> feedback)
      : inner_(std::move(inner)), spec_(inner_->spec()) {
    spec_.feedback_workloads = std::move(feedback);
    spec_.validate();
  }
  const TaskSpec& spec() const override { return spec_; }
  std::string prompt(Language lang) const override { return inner_->prompt(lang); }

 private:
  std::unique_ptr<Task> inner_;
  TaskSpec spec_;
};

bool is_dataset_setting(const TaskSources& s) { return !s.baseline_solution.empty() || s.measure_baseline; }

std::unique_ptr<Task> find_task(const std::string& name_or_path, const TaskSources& sources);

}  // namespace

std::unique_ptr<Task> load_task(const std::string& name_or_path, const TaskSources& sources) {
  auto task = find_task(name_or_path, sources);
  if (sources.feedback.empty()) return task;
  auto feedback = select_feedback_workloads(task->spec(), sources.feedback);
  if (auto* plain = dynamic_cast<SpecTask*>(task.get())) {
    TaskSpec spec = plain->spec();
    spec.feedback_workloads = std::move(feedback);
    return std::make_unique<SpecTask>(std::move(spec));
  }
  return std::make_unique<ReselectedTask>(std::move(task), std::move(feedback));
}

namespace {

std::unique_ptr<Task> find_task(const std::string& name_or_path, const TaskSources& sources) {
  if (name_or_path.empty()) throw Error(Status::invalid_argument, "load_task: empty task name");
#if KS_HAVE_FLASHINFER_SUITE
  const tasks::flashinfer::DatasetOptions dataset_options{sources.baseline_solution, sources.measure_baseline};
  // A definition of a FlashInfer-Trace checkout, by name in the given
  // dataset or by its path (DIR/definitions/<op_type>/<name>.json).
  if (!sources.dataset.empty()) {
    if (name_or_path.rfind(tasks::flashinfer::kPrefix, 0) != 0)
      throw Error(Status::invalid_argument,
                  fmt::format("a dataset ({}) gives flashinfer/<definition> tasks, not \"{}\"",
                              sources.dataset.string(), name_or_path));
    const auto file = tasks::flashinfer::find_definition(
        sources.dataset, name_or_path.substr(std::string_view(tasks::flashinfer::kPrefix).size()));
    return std::make_unique<SpecTask>(tasks::flashinfer::load_definition(file, dataset_options));
  }
  if (tasks::flashinfer::is_definition_file(name_or_path))
    return std::make_unique<SpecTask>(tasks::flashinfer::load_definition(name_or_path, dataset_options));
#else
  if (!sources.dataset.empty())
    throw Error(Status::not_found,
                fmt::format("this build of libksearch has no flashinfer suite to read {}", sources.dataset.string()));
#endif
  if (is_dataset_setting(sources))
    throw Error(Status::invalid_argument,
                fmt::format("a baseline solution from traces applies to definitions of a FlashInfer-Trace dataset "
                            "(--dataset DIR, or DIR/definitions/<op_type>/<name>.json), not to \"{}\"",
                            name_or_path));
#if KS_HAVE_KERNELBENCH_SUITE
  // With a KernelBench checkout configured, its problems take precedence
  // over the native tasks of the same names.
  if (auto task = tasks::kernelbench::load_kernelbench_oracle_task(name_or_path, sources.kernelbench_dir)) return task;
#else
  (void)sources;
#endif
  if (auto e = find_builtin(name_or_path)) {
    auto task = e->factory();
    if (!task) throw Error(Status::internal, fmt::format("built-in task \"{}\" could not be created", name_or_path));
    return task;
  }
  if (is_task_path(name_or_path)) return std::make_unique<SpecTask>(load_task_file(name_or_path));
  // An example by its folder name ("matmul") or task name ("examples/matmul").
  fs::path examples = example_tasks_dir();
  if (!examples.empty()) {
    std::string short_name = name_or_path;
    if (short_name.rfind("examples/", 0) == 0) short_name = short_name.substr(9);
    if (short_name.find("..") == std::string::npos && is_task_path(examples / short_name))
      return std::make_unique<SpecTask>(load_task_file(examples / short_name));
  }
  // Not the whole list (dozens of names on one line): the names it was
  // probably meant to be, each as `--task` takes it, and where the list is.
  std::vector<std::string> known;
  for (const auto& [name, e] : builtin_entries()) known.push_back(name);
  for (const auto& f : example_folders(examples)) known.push_back("examples/" + f.filename().string());
  const auto close = util::closest_names(name_or_path, known);
  std::string guess;
  for (const auto& c : close) guess += (guess.empty() ? "" : " or ") + c;
  throw Error(Status::not_found,
              fmt::format("unknown task \"{}\": not a built-in task, an example task or a task file{} (`ksearch "
                          "tasks` lists the {} known tasks; a task file is a path to a task.json or a folder "
                          "holding one)",
                          name_or_path, guess.empty() ? "" : fmt::format("; did you mean {}?", guess),
                          known.size()));
}

}  // namespace

std::vector<TaskInfo> list_dataset_tasks(const fs::path& dataset_dir) {
#if KS_HAVE_FLASHINFER_SUITE
  return tasks::flashinfer::list_dataset(dataset_dir);
#else
  throw Error(Status::not_found,
              fmt::format("this build of libksearch has no flashinfer suite to read {}", dataset_dir.string()));
#endif
}

std::vector<TaskInfo> list_kernelbench_tasks(const fs::path& kernelbench_dir) {
#if KS_HAVE_KERNELBENCH_SUITE
  return tasks::kernelbench::list_kernelbench_problems(kernelbench_dir);
#else
  throw Error(Status::not_found, fmt::format("this build of libksearch has no kernelbench suite to read {}",
                                             kernelbench_dir.string()));
#endif
}

std::vector<TaskInfo> list_tasks(const std::vector<fs::path>& example_dirs) {
  std::vector<TaskInfo> out;
  for (const auto& [name, e] : builtin_entries()) {
    TaskInfo info;
    info.name = name;
    info.description = e.description;
    info.source = "built-in";
    try {
      auto task = e.factory();
      info.languages = task->spec().languages;
      info.targets = task->spec().targets;
    } catch (const std::exception& ex) {
      info.description += fmt::format(" (cannot be created here: {})", ex.what());
    }
    out.push_back(std::move(info));
  }
  for (const auto& dir : example_dirs) {
    for (const auto& folder : example_folders(dir)) {
      TaskInfo info;
      info.source = (folder / "task.json").string();
      try {
        TaskSpec spec = load_task_file(folder);
        // Listed under the name `load_task` takes from any directory: one
        // scheme for every example, whatever its file calls it.
        info.name = "examples/" + folder.filename().string();
        info.description = spec.description;
        info.languages = spec.languages;
        info.targets = spec.targets;
      } catch (const Error& ex) {
        // A broken example is listed with its error rather than hidden.
        info.name = "examples/" + folder.filename().string();
        info.description = fmt::format("(invalid task file: {})", ex.what());
      }
      out.push_back(std::move(info));
    }
  }
  return out;
}

KS_NAMESPACE_END
