// A tunable task and an evaluation of it for the tune strategy's tests: two
// benchmark shapes whose best BLOCK differs, a correctness shape whose size
// rules out the largest BLOCK, and VEC = 8 failing to compile.
#pragma once

#include <cmath>

#include "core/param_space.hpp"
#include "ksearch/error.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"

namespace ks::test {

// Two benchmark shapes whose best BLOCK differs (64 for "small", 256 for
// "large"; 128 is the best single value) and a correctness shape "tiny"
// (N = 256) that rules out BLOCK = 512 through the constraint N >= BLOCK.
inline ks::TaskSpec make_tunable_task(bool with_params = true) {
  ks::TaskSpec t;
  t.name = "test/tunable";
  t.languages = {ks::Language::cuda};
  t.dims = {"N"};
  auto workload = [](const char* name, std::int64_t n, bool bench) {
    ks::WorkloadSpec w;
    w.name = name;
    w.dims = {{"N", n}};
    w.benchmark = bench;
    return w;
  };
  t.workloads = {workload("tiny", 256, false), workload("small", 1024, true), workload("large", 65536, true)};
  ks::TensorSpec x, y;
  x.name = "x";
  x.shape = {"N"};
  y.name = "y";
  y.shape = {"N"};
  y.is_output = true;
  t.tensors = {x, y};
  ks::Solution ref;
  ref.name = "reference";
  ref.language = ks::Language::cuda;
  ref.sources = {{"ref.cu", "extern \"C\" __global__ void ref() {}"}};
  t.references[ks::Language::cuda] = ref;
  ks::Solution sp;
  sp.name = "tunable start";
  sp.language = ks::Language::cuda;
  sp.sources = {{"kernel.cu", "extern \"C\" __global__ void k() {}"}};
  sp.launch_plan = ks::LaunchPlan::from_json(ks::Json::parse(
      R"j({"kernels": [{"name": "k", "grid": ["cdiv(N, BLOCK)"], "block": ["BLOCK"], "args": []}]})j"));
  if (with_params)
    sp.params = ks::Params::from_json(ks::Json::parse(R"({
        "space": {"BLOCK": {"values": [32, 64, 128, 256, 512]}, "VEC": {"values": [1, 2, 4, 8]}},
        "constraints": ["BLOCK >= VEC * 32", "N >= BLOCK"]})"));
  t.starting_points = {sp};
  return t;
}

// Evaluates like a real backend would see it: per workload, the resolved
// values decide the latency; VEC = 8 fails to compile.
inline ks::EvalResult tunable_eval(const ks::Task& task, const ks::Solution& s) {
  ks::EvalResult r;
  for (const auto& w : task.spec().workloads) {
    ks::WorkloadResult wr;
    wr.name = w.name;
    wr.benchmark = w.benchmark;
    ks::util::Vars dims(w.dims.begin(), w.dims.end());
    ks::util::Vars v;
    try {
      v = ks::core::resolve_param_values(s.params, w.name, dims);
    } catch (const ks::Error& e) {
      r.status = ks::EvalStatus::invalid;
      r.log = e.what();
      return r;
    }
    if (v.count("VEC") && v.at("VEC") == 8) {
      r.status = ks::EvalStatus::compile_error;
      r.log = "too many registers";
      return r;
    }
    if (w.benchmark) {
      const double b = v.count("BLOCK") ? std::log2(double(v.at("BLOCK"))) : 5;
      const double vec = v.count("VEC") ? std::log2(double(v.at("VEC"))) : 0;
      const double centre = w.name == "small" ? 6 : 8, scale = w.name == "small" ? 1 : 10;
      wr.timing.mean_ms = scale * std::exp(0.3 * (b - centre) * (b - centre) + 0.1 * (vec - 1) * (vec - 1));
      wr.timing.count = 10;
    }
    r.workloads.push_back(wr);
  }
  r.status = ks::EvalStatus::passed;
  r.compute_summary();
  return r;
}

}  // namespace ks::test
