// What travels between the evaluator and its workers, as JSON: options,
// compile requests and artifacts, and prepared (compiled) solutions. The
// messages that carry them are in protocol.hpp (ks::eval::msg).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "eval/backend.hpp"
#include "ksearch/evaluator.hpp"
#include "ksearch/json.hpp"
#include "util/expr.hpp"

namespace ks::eval {

// A solution ready to run: one build per distinct set of tunable parameter
// values, and which build each workload uses.
struct PreparedSolution {
  struct Build {
    util::Vars params;
    Artifact artifact;
  };
  Solution solution;
  std::vector<std::string> flags;             // the extra compile flags every build used
  std::vector<Build> builds;
  std::map<std::string, int> workload_build;  // workload name -> index into builds

  const Build* build_for(const std::string& workload) const;
  Json to_json() const;
  static PreparedSolution from_json(const Json& j);
};

// One input seed of a workload whose inputs and reference outputs come from
// a reference oracle instead of the generators and the task's reference.
struct OracleSeed {
  std::uint64_t seed = 0;        // ks_rng_derive_seed(workload seed, index): the flow's name for it
  int index = 0;                 // 0 .. seeds_per_workload (the last: the re-check after timing)
  std::uint64_t trial_seed = 0;  // the oracle's own seed for it (KernelBench's trial seed)
  std::vector<ExternalTensor> inputs;   // the task's inputs, in task order
  std::vector<ExternalTensor> outputs;  // the reference outputs, in task order

  Json to_json() const;
  static OracleSeed from_json(const Json& j);
};

// One evaluation as the flow sees it.
struct RunRequest {
  PreparedSolution candidate;
  PreparedSolution reference;
  EvalOptions options;
  std::vector<std::string> workloads;       // in the order to evaluate
  std::vector<std::string> time_reference;  // benchmark workloads whose reference latency is wanted
  // Oracle tasks (TaskSpec::oracle): every seed of every workload; `reference` is then empty.
  std::map<std::string, std::vector<OracleSeed>> oracle;
};

// Throws ks::Error(Status::invalid_argument) naming the first option out of range.
void validate_options(const EvalOptions& o);

Json artifact_to_json(const Artifact& a);
Artifact artifact_from_json(const Json& j);

Json compile_request_to_json(const CompileRequest& r);
CompileRequest compile_request_from_json(const Json& j);

Json vars_to_json(const util::Vars& v);
util::Vars vars_from_json(const Json& j);

}  // namespace ks::eval
