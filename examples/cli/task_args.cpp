// The options `run` and `eval` share for finding and setting up a task: a
// FlashInfer-Trace dataset, the baseline solution whose traces give the
// scores, and the feedback subset (K-Search's --feedback-workloads).
#include <fmt/format.h>

#include <sstream>

#include "search_cli.hpp"
#include "ksearch/error.hpp"

namespace ks::cli {

std::vector<OptionSpec> task_source_options() {
  return {
      {"dataset", "DIR", "A FlashInfer-Trace checkout: --task flashinfer/<definition> is that definition of it, with "
                         "its workloads (named by UUID) and baselines from its traces.", "", false},
      {"baseline-solution", "NAME|none",
       "For a dataset's definition: the solution whose PASSED traces give each workload's baseline latency on this "
       "card (the fastest); none: no traces (the task's own baseline kernel).",
       "the definition's flashinfer_wrapper* solution, when the dataset has one", false},
      {"measure-baseline", "",
       "Measure the baseline solution (DIR/solutions; python, triton, cpp or cuda) here where its traces lack this "
       "card or a workload.", "", false},
      {"feedback-workloads", "NAME,...", "The workloads the search evaluates each round (UUIDs for a dataset), "
                                         "comma-separated or repeated; the best kernel is then evaluated on all.",
       "the task's own subset", true},
      {"feedback-policy", "first|random", "Without --feedback-workloads: the first --feedback-count timed workloads, "
                                          "or that many drawn with --feedback-seed (recorded in the run).",
       "the task's own subset", false},
      {"feedback-trace-policy", "first|random",
       "K-Search's flag name, read as --feedback-policy (in K-Search it picks which trace's log the prompt shows; "
       "libksearch shows every workload's outcome, and picks the feedback workloads with it).",
       "", false},
      {"feedback-count", "N", "Workloads --feedback-policy picks.", "5", false},
      {"feedback-seed", "N", "Seed of --feedback-policy random.", "--seed, else 0", false},
  };
}

TaskSources task_sources_from_args(const Args& a, std::uint64_t default_seed) {
  TaskSources s;
  s.dataset = a.get("dataset");
  if (a.has("dataset") && s.dataset.empty()) throw Error(Status::invalid_argument, "--dataset needs a folder");
  s.baseline_solution = a.get("baseline-solution");
  s.measure_baseline = a.has("measure-baseline");
  for (const auto& v : a.get_all("feedback-workloads")) {
    std::stringstream in(v);
    std::string name;
    while (std::getline(in, name, ','))
      if (!name.empty()) s.feedback.workloads.push_back(name);
  }
  if (a.has("feedback-workloads") && s.feedback.workloads.empty())
    throw Error(Status::invalid_argument, "--feedback-workloads needs workload names");
  // --feedback-trace-policy: K-Search's name, so its scripts run unchanged.
  const char* policy_flag = a.has("feedback-trace-policy") ? "feedback-trace-policy" : "feedback-policy";
  if (a.has("feedback-trace-policy") && a.has("feedback-policy") &&
      a.get("feedback-trace-policy") != a.get("feedback-policy"))
    throw Error(Status::invalid_argument, "--feedback-policy and --feedback-trace-policy (its other name) disagree");
  s.feedback.policy = a.get(policy_flag);
  if (a.has(policy_flag) && s.feedback.policy != "first" && s.feedback.policy != "random")
    throw Error(Status::invalid_argument,
                fmt::format("--{} must be first or random, found \"{}\"", policy_flag, s.feedback.policy));
  if (!s.feedback.workloads.empty() && !s.feedback.policy.empty())
    throw Error(Status::invalid_argument, "--feedback-workloads and --feedback-policy cannot be combined");
  if ((a.has("feedback-count") || a.has("feedback-seed")) && s.feedback.policy.empty())
    throw Error(Status::invalid_argument, "--feedback-count and --feedback-seed go with --feedback-policy");
  s.feedback.count = a.get_int("feedback-count", 5);
  if (s.feedback.count < 1) throw Error(Status::invalid_argument, "--feedback-count must be at least 1");
  s.feedback.seed = a.has("feedback-seed") ? static_cast<std::uint64_t>(a.get_int("feedback-seed", 0)) : default_seed;
  return s;
}

}  // namespace ks::cli
