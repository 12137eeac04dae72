#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

TaskSpec small_spec(const std::string& name) {
  TaskSpec t = load_task_file(ks::test::source_dir() / "examples" / "tasks" / "matmul");
  t.name = name;
  return t;
}

const TaskInfo* find(const std::vector<TaskInfo>& v, const std::string& name) {
  for (const auto& t : v)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

TEST_CASE("registry: a registered built-in is found by name and listed") {
  int made = 0;
  register_builtin_task("test/registered", "a task registered by the test", [&made] {
    ++made;
    return std::make_unique<SpecTask>(small_spec("test/registered"));
  });
  auto task = load_task("test/registered");
  CHECK(task->name() == "test/registered");
  CHECK(made == 1);
  auto list = list_tasks();
  const TaskInfo* info = find(list, "test/registered");
  REQUIRE(info);
  CHECK(info->source == "built-in");
  CHECK(info->description == "a task registered by the test");
  CHECK(info->languages == std::vector<Language>{Language::cpp, Language::python});
  CHECK_THROWS_AS(register_builtin_task("", "x", [] { return std::unique_ptr<Task>(); }), Error);
}

TEST_CASE("registry: the built-in suites register themselves on first use") {
  auto list = list_tasks();
  bool has_gpumode = std::any_of(list.begin(), list.end(), [](const TaskInfo& t) {
    return t.name.rfind("gpumode/", 0) == 0 && t.source == "built-in";
  });
  if (!has_gpumode) MESSAGE("the gpumode suite is not compiled into this build");
  else CHECK(load_task("gpumode/trimul")->name() == "gpumode/trimul");
}

TEST_CASE("registry: task files by path, examples by name") {
  fs::path dir = ks::test::source_dir() / "examples" / "tasks" / "matmul";
  CHECK(load_task(dir.string())->name() == "examples/matmul");
  CHECK(load_task((dir / "task.json").string())->name() == "examples/matmul");
  fs::path examples = example_tasks_dir();
  REQUIRE_FALSE(examples.empty());
  CHECK(fs::exists(examples / "matmul" / "task.json"));
  CHECK(load_task("matmul")->name() == "examples/matmul");
  CHECK(load_task("examples/matmul")->name() == "examples/matmul");

  auto list = list_tasks({examples});
  const TaskInfo* m = find(list, "examples/matmul");
  REQUIRE(m);
  CHECK(m->source == (examples / "matmul" / "task.json").string());
  CHECK_FALSE(m->description.empty());
  // One scheme: every example is listed as examples/<folder>, and that name
  // loads from any directory.
  for (const auto& t : list) {
    if (t.source == "built-in") continue;
    CHECK(t.name.rfind("examples/", 0) == 0);
    CHECK(load_task(t.name)->name() == t.name);
  }
  CHECK(find(list, "examples/softmax"));
}

TEST_CASE("registry: an unknown name lists what exists") {
  try {
    load_task("no/such-task");
    FAIL("an unknown task loaded");
  } catch (const Error& e) {
    CHECK(e.status() == Status::not_found);
    CHECK(std::string(e.what()).find("no/such-task") != std::string::npos);
    CHECK(std::string(e.what()).find("ksearch tasks") != std::string::npos);
    CHECK(std::string(e.what()).find("did you mean") == std::string::npos);  // nothing close
  }
  CHECK_THROWS_AS(load_task(""), Error);
}

TEST_CASE("registry: a misspelled name gets a did-you-mean with the name --task takes") {
  for (const char* typed : {"examples/matmal", "matmull"}) {
    try {
      load_task(typed);
      FAIL("a misspelled task loaded: " << typed);
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(e.status() == Status::not_found);
      CHECK_MESSAGE(what.find("did you mean examples/matmul") != std::string::npos, what);
      CHECK_MESSAGE(what.find("mean matmul") == std::string::npos, what);
    }
  }
  try {
    load_task("gpumode/trimull");
    FAIL("a misspelled task loaded");
  } catch (const Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find("did you mean gpumode/trimul") != std::string::npos, e.what());
  }
}

TEST_CASE("registry: a broken example is listed with its error, not hidden") {
  fs::path root = ks::test::scratch_dir("registry_examples");
  fs::create_directories(root / "broken");
  std::ofstream(root / "broken" / "task.json") << "{\"name\": 3}";
  auto list = list_tasks({root});
  const TaskInfo* b = find(list, "examples/broken");
  REQUIRE(b);
  CHECK(b->description.find("invalid task file") != std::string::npos);
}

TEST_CASE("registry: the matmul example and its tunable starting point evaluate on the host") {
  auto task = load_task("matmul");
  EvaluatorConfig cfg;
  cfg.backend = ks::EvalBackend::host;
  cfg.cache_dir = ks::test::scratch_dir("registry_matmul_eval");
  cfg.options.max_time_per_workload_s = 0.05;
  cfg.options.min_reps = 3;
  cfg.options.max_reps = 10;
  cfg.options.flush_l2 = false;
  cfg.options.only_workloads = {"tiny_odd", "ragged", "wide_k", "sq128"};
  auto ev = make_evaluator(cfg);
  REQUIRE(task->spec().starting_points.size() == 1);
  EvalResult r = ev->evaluate(*task, task->spec().starting_points[0]);
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);
  CHECK(r.speedup > 0);
  // The reference itself passes against itself.
  EvalResult ref = ev->evaluate(*task, task->spec().references.at(Language::cpp));
  CHECK(ref.status == EvalStatus::passed);
}
