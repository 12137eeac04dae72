// Solution ids are content hashes over, among others, the launch plan's JSON
// (Solution::compute_id). Run folders resume and replay by id and recorded
// transcripts quote ids in prompts, so a change to how plans are read or
// written must leave every existing id as it was. This test gathers every
// solution the repository holds - built-in tasks, example and fixture task
// files, candidate answers, the answers of recorded transcripts - and checks
// each id against tests/fixtures/plan_ids.tsv, pinned before the launch plan
// became a typed ks::LaunchPlan, and that each plan writes back as read.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "core/response/parse.hpp"
#include "ksearch/error.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

struct Entry {
  std::string label;
  Solution solution;
  Json plan_as_read;  // the plan's JSON as the file holds it (null where it is not at hand)
};

std::vector<fs::path> files_in(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string rel(const fs::path& p) { return fs::relative(p, ks::test::source_dir()).generic_string(); }

// `file`: the task file, whose inline plans are compared with what the solutions write back.
void add_spec(std::vector<Entry>& out, const std::string& where, const TaskSpec& spec, const fs::path& file = {}) {
  Json raw = file.empty() ? Json() : Json::parse(util::read_file(file));
  auto plan_in = [](const Json* s) {
    const Json* p = s ? s->find("launch_plan") : nullptr;
    return p && !p->contains("file") ? *p : Json();
  };
  for (const auto& [lang, s] : spec.references)
    out.push_back({where + " reference " + to_string(lang), s, plan_in(raw["references"].find(to_string(lang)))});
  for (std::size_t i = 0; i < spec.starting_points.size(); ++i) {
    const Json& sp = raw["starting_points"];
    out.push_back({where + " starting_point[" + std::to_string(i) + "]", spec.starting_points[i],
                   plan_in(sp.is_array() && i < sp.size() ? &sp[i] : nullptr)});
  }
  for (const auto& [lang, s] : spec.baselines) out.push_back({where + " baseline " + to_string(lang), s, Json()});
}

// A candidate answer parses for one of the languages, or is not a candidate
// (a world-model answer).
std::optional<Solution> parse_answer(const std::string& text) {
  for (Language lang : {Language::cuda, Language::cpp}) {
    try {
      return core::parse_candidate(text, lang);
    } catch (const Error&) {
    }
  }
  return std::nullopt;
}

std::vector<Entry> collect() {
  std::vector<Entry> out;
  const fs::path src = ks::test::source_dir();
  for (const TaskInfo& info : list_tasks({src / "examples" / "tasks"})) {
    if (info.name.rfind("test/", 0) == 0) continue;  // registered by another test of this program
    std::unique_ptr<Task> t = load_task(info.name);
    fs::path file = info.source == "built-in" ? fs::path() : fs::path(info.source);
    if (!file.empty() && fs::is_directory(file)) file /= "task.json";
    add_spec(out, "task " + t->name(), t->spec(), file);
  }
  for (const char* dir : {"tests/fixtures/tasks/scale3", "tests/fixtures/tasks/scale3_feedback"})
    add_spec(out, std::string("task ") + dir, load_task_file(src / dir), src / dir / "task.json");
  for (const auto& op : fs::directory_iterator(src / "tests/fixtures/flashinfer_trace/definitions")) {
    for (const auto& def : files_in(op.path(), ".json")) {
      try {
        add_spec(out, "task " + rel(def), load_task(def.string())->spec());
      } catch (const Error&) {
        // A definition without a native reference (rmsnorm, on purpose): no solution to pin.
      }
    }
  }
  {
    fs::path file = src / "tests/fixtures/kernels/softmax_variants.json";
    TaskSpec softmax = load_task_file(src / "examples/tasks/softmax");
    Json j = Json::parse(util::read_file(file));
    out.push_back({"solution " + rel(file), load_solution_file(file, softmax), j.at("launch_plan")});
  }
  for (const char* dir : {"examples/trimul/candidates", "examples/flashinfer/candidates",
                          "tests/fixtures/kernelbench/candidates"}) {
    for (const auto& md : files_in(src / dir, ".md")) {
      if (md.filename() == "README.md") continue;
      auto s = parse_answer(util::read_file(md));
      REQUIRE_MESSAGE(s, rel(md));
      out.push_back({"candidate " + rel(md), *s, Json()});
    }
  }
  for (const char* file : {"examples/trimul/demo-transcript.jsonl", "examples/flashinfer/demo-transcript.jsonl",
                           "examples/kernelbench/demo-transcript.jsonl", "tests/fixtures/wm_e2e/transcript.jsonl"}) {
    std::istringstream lines(util::read_file(src / file));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      Json j = Json::parse(line);
      if (auto s = parse_answer(j.at("response").get_string("text")))
        out.push_back({std::string("answer ") + file + " seq " + std::to_string(j.get_int("seq")), *s, Json()});
    }
  }
  return out;
}

std::map<std::string, std::string> pinned() {
  std::map<std::string, std::string> out;
  std::istringstream lines(util::read_file(ks::test::source_dir() / "tests/fixtures/plan_ids.tsv"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::size_t tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    out[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return out;
}

}  // namespace

TEST_CASE("solution ids: every plan in the repository keeps the id pinned before plans were typed") {
  std::vector<Entry> entries = collect();
  std::map<std::string, std::string> pins = pinned();
  CHECK(entries.size() == pins.size());
  std::size_t with_plan = 0;
  for (const auto& e : entries) {
    CAPTURE(e.label);
    auto it = pins.find(e.label);
    REQUIRE_MESSAGE(it != pins.end(), "not pinned: " << e.label);
    CHECK(e.solution.id == it->second);
    CHECK(e.solution.compute_id() == it->second);
    with_plan += e.solution.launch_plan.empty() ? 0 : 1;
  }
  CHECK(with_plan > 100);
}

TEST_CASE("solution ids: every plan in the repository reads, and writes back byte for byte") {
  std::size_t compared_with_file = 0;
  for (const auto& e : collect()) {
    CAPTURE(e.label);
    const LaunchPlan& plan = e.solution.launch_plan;
    CHECK(plan.readable());
    const Json j = plan.to_json();
    CHECK(LaunchPlan::from_json(j, e.solution.language).to_json().dump() == j.dump());
    if (!e.plan_as_read.is_null()) {
      CHECK(j.dump() == e.plan_as_read.dump());
      ++compared_with_file;
    }
    // The canonical form (the same fields in a fresh plan) reads back to the same fields.
    LaunchPlan fresh;
    fresh.kernels = plan.kernels;
    fresh.calls = plan.calls;
    fresh.scratch = plan.scratch;
    fresh.variants = plan.variants;
    CHECK(LaunchPlan::from_json(fresh.to_json(), e.solution.language) == plan);
  }
  CHECK(compared_with_file >= 7);
}
