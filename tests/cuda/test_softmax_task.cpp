// The CUDA example task (examples/tasks/softmax): its task file loads as a
// valid task, and its reference and every configuration of its tunable starting
// kernel compile for sm_90a with launch plans that match their modules.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/param_space.hpp"
#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "ksearch/task.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::eval;

namespace {

TaskSpec softmax_spec() {
  TaskSpec spec = load_task_file(test::source_dir() / "examples" / "tasks" / "softmax" / "task.json");
  spec.validate();
  return spec;
}

// Sums ptxas's "N bytes spill stores" over the log; -1 when it has none.
long spill_bytes(const std::string& log) {
  const std::string key = " bytes spill stores";
  long total = -1;
  for (auto pos = log.find(key); pos != std::string::npos; pos = log.find(key, pos + 1)) {
    auto start = log.find_last_of(' ', pos - 1) + 1;
    total = std::max(total, 0L) + std::stol(log.substr(start, pos - start));
  }
  return total;
}

}  // namespace

TEST_CASE("softmax task: the task file is a valid task") {
  TaskSpec spec = softmax_spec();
  CHECK(spec.name == "examples/softmax");
  CHECK(spec.benchmark_workloads().size() == 4);
  CHECK(spec.test_workloads().size() == 4);
  CHECK(spec.references.at(Language::cuda).sources.at(0).content.find("softmax_reference") != std::string::npos);
  CHECK(spec.prompts.at(Language::cuda).find("row softmax") != std::string::npos);
  REQUIRE(spec.starting_points.size() == 1);
  auto space = core::ParamSpace(spec.starting_points[0].params);
  CHECK(space.grid_size() == 24);  // BLOCK x VEC, and WARP_ROWS (plan-only: no compilation of its own)
  CHECK(space.find("WARP_ROWS")->plan_only);
}

TEST_CASE("softmax task: reference and starting kernel compile in every configuration") {
  try {
    cuda::nvrtc();
  } catch (const Error& e) {
    MESSAGE("skipped: " << e.what());
    return;
  }
  TaskSpec spec = softmax_spec();
  auto dir = test::scratch_dir("softmax_task");
  CudaCompilerOptions o;
  o.use_pch = true;
  cuda::CudaCompiler compiler(o);
  CompileRequest ref;
  ref.solution = spec.references.at(Language::cuda);
  ref.arch = "sm_90a";
  ref.cache_dir = dir.string();
  Artifact a = compiler.compile(ref);
  CHECK(a.kernels == std::vector<std::string>{"softmax_reference"});

  const Solution& start = spec.starting_points[0];
  auto space = core::ParamSpace(start.params);
  int compiled = 0;
  for (auto block : space.find("BLOCK")->values)
    for (auto vec : space.find("VEC")->values) {
      CompileRequest r;
      r.solution = start;
      r.arch = "sm_90a";
      r.cache_dir = dir.string();
      r.params = {{"BLOCK", block}, {"VEC", vec}};
      Artifact s = compiler.compile(r);
      std::vector<std::string> kernels = s.kernels;
      std::sort(kernels.begin(), kernels.end());
      CHECK(kernels == std::vector<std::string>{"softmax_online", "softmax_warp_rows"});
      // __launch_bounds__(BLOCK) must leave no register spills.
      CHECK(spill_bytes(s.log) == 0);
      ++compiled;
    }
  CHECK(compiled == 12);
}
