// TaskSources and FeedbackSelection: how a loaded task is set up (a
// dataset's baselines, the feedback subset), and their JSON for manifests.
#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <set>

#include "ksearch/error.hpp"
#include "ksearch/tasks.hpp"
#include "util/json_fields.hpp"

KS_NAMESPACE_BEGIN

Json FeedbackSelection::to_json() const {
  return Json::obj({{"workloads", util::string_array(workloads)},
                    {"policy", policy},
                    {"count", count},
                    {"seed", static_cast<std::int64_t>(seed)}});
}

FeedbackSelection FeedbackSelection::from_json(const Json& j) {
  FeedbackSelection f;
  if (j.is_null()) return f;
  if (!j.is_object()) throw Error(Status::invalid_argument, "feedback selection: must be a JSON object");
  util::FieldReader r(j, "feedback selection");
  f.workloads = util::string_list(j.find("workloads"), "feedback selection: \"workloads\"");
  f.policy = j.get_string("policy");
  f.count = static_cast<int>(r.optional_int("count", 5));
  f.seed = static_cast<std::uint64_t>(r.optional_int("seed", 0));
  r.allow({"workloads", "policy", "count", "seed"});
  return f;
}

std::vector<std::string> select_feedback_workloads(const TaskSpec& task, const FeedbackSelection& s) {
  if (!s.workloads.empty()) {
    if (!s.policy.empty())
      throw Error(Status::invalid_argument,
                  "feedback workloads are either pinned or chosen by a policy (first, random), not both");
    std::vector<std::string> unknown, out;
    for (const auto& w : s.workloads) {
      if (!task.find_workload(w)) unknown.push_back(w);
      else if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
    }
    if (!unknown.empty()) {
      std::string bad, valid;
      for (const auto& w : unknown) bad += (bad.empty() ? "\"" : ", \"") + w + "\"";
      for (const auto& w : task.workloads) valid += (valid.empty() ? "" : ", ") + w.name;
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\" has no workload {} (feedback workloads are named by UUID for a dataset's "
                              "definitions); its workloads: {}",
                              task.name, bad, valid));
    }
    return out;
  }
  if (s.policy.empty()) return {};
  if (s.policy != "first" && s.policy != "random")
    throw Error(Status::invalid_argument,
                fmt::format("feedback policy \"{}\" is not first or random (or pinned workloads)", s.policy));
  if (s.count < 1) throw Error(Status::invalid_argument, fmt::format("feedback count {} must be at least 1", s.count));
  // Timed workloads only: a subset without one has no latency to compare.
  std::vector<std::string> timed;
  for (const auto& w : task.workloads)
    if (w.benchmark) timed.push_back(w.name);
  const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(s.count), timed.size());
  if (s.policy == "first") return {timed.begin(), timed.begin() + static_cast<std::ptrdiff_t>(k)};
  // A partial Fisher-Yates on mt19937_64, whose output the standard fixes,
  // so a seed picks the same workloads on every platform; kept in task order.
  std::mt19937_64 rng(s.seed);
  std::vector<std::size_t> idx(timed.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  for (std::size_t i = 0; i < k; ++i) std::swap(idx[i], idx[i + rng() % (idx.size() - i)]);
  std::sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < k; ++i) out.push_back(timed[idx[i]]);
  return out;
}

Json TaskSources::to_json() const {
  Json j = Json::object();
  if (!kernelbench_dir.empty()) j["kernelbench_dir"] = kernelbench_dir.string();
  if (!dataset.empty()) j["dataset"] = dataset.string();
  if (!baseline_solution.empty()) j["baseline_solution"] = baseline_solution;
  if (measure_baseline) j["measure_baseline"] = true;
  if (!feedback.empty()) j["feedback"] = feedback.to_json();
  return j;
}

TaskSources TaskSources::from_json(const Json& j) {
  TaskSources t;
  if (j.is_null()) return t;
  if (!j.is_object()) throw Error(Status::invalid_argument, "task sources: must be a JSON object");
  util::FieldReader r(j, "task sources");
  t.kernelbench_dir = j.get_string("kernelbench_dir");
  t.dataset = j.get_string("dataset");
  t.baseline_solution = j.get_string("baseline_solution");
  t.measure_baseline = j.get_bool("measure_baseline");
  if (const Json* f = j.find("feedback")) t.feedback = FeedbackSelection::from_json(*f);
  r.allow({"kernelbench_dir", "dataset", "baseline_solution", "measure_baseline", "feedback"});
  return t;
}

KS_NAMESPACE_END
