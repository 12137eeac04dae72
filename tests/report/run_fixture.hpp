// Pieces of synthetic run folders for the report tests: solutions,
// evaluations and events as the search session writes them.
#pragma once

#include <string>

#include "core/run_events.hpp"
#include "ksearch/run_store.hpp"

namespace ks::test {

inline Solution sol(const std::string& code) {
  Solution s;
  s.language = Language::cpp;
  s.sources = {{"kernel.cpp", code}};
  s.launch_plan = LaunchPlan::from_json(Json::parse(R"({"calls": [{"fn": "f", "args": []}]})"));
  return s.finalize();
}

// A passing evaluation on one benchmark workload.
inline EvalResult passed(double ms, double ref_ms) {
  EvalResult r;
  WorkloadResult w;
  w.name = "big";
  w.benchmark = true;
  w.timing.mean_ms = w.timing.median_ms = w.timing.min_ms = ms;
  w.timing.count = 5;
  w.reference_ms = ref_ms;
  r.workloads = {w};
  r.compute_summary();
  return r;
}

inline EvalResult failed(EvalStatus st, const std::string& log) {
  EvalResult r;
  r.status = st;
  r.log = log;
  return r;
}

// Events as the search session writes them (lib/core/run_events.hpp).
inline void append(RunStore& s, const core::events::Payload& e) {
  s.append_event(core::events::type_of(e), core::events::fields_of(e));
}

inline void llm_call(RunStore& s, int seq, const char* kind, int in, int out, double cost) {
  LlmUsage u;
  u.input_tokens = in;
  u.output_tokens = out;
  u.cost_usd = cost;
  u.attempts = 1;
  append(s, core::events::LlmCall{seq, kind, true, u, std::nullopt});
}

}  // namespace ks::test
