// The weak-check detection's CUDA candidates (lib/search/weak_check): they
// compile with NVRTC for sm_90a (no GPU needed) and their launch plans bind
// to the module on every workload, for the softmax example and for outputs
// of every element width. Running them needs a GPU; the host tests run the
// same logic (tests/tasks/test_weak_check_tasks.cpp).
#include <doctest/doctest.h>

#include "search/weak_check/candidates.hpp"
#include "eval/cuda/cubin.hpp"
#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/launch_plan.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
using namespace ks::eval;

namespace {

bool nvrtc_usable() {
  try {
    cuda::nvrtc();
    return true;
  } catch (const Error& e) {
    MESSAGE("skipped: " << e.what());
    return false;
  }
}

// Compiles every candidate and resolves its plan on every workload; returns
// how many launches were resolved.
int compile_and_bind(const TaskSpec& task, const std::string& scratch) {
  cuda::CudaCompiler compiler(CudaCompilerOptions{});
  std::set<std::string> tensors;
  for (const auto& t : task.tensors) tensors.insert(t.name);
  int launches = 0;
  for (const auto& c : core::weak::trivial_candidates(task, Language::cuda)) {
    INFO(c.name << ":\n" << c.solution.sources[0].content);
    CompileRequest r;
    r.solution = c.solution;
    r.arch = "sm_90a";
    r.cache_dir = test::scratch_dir(scratch + "_" + c.name).string();
    Artifact a = compiler.compile(r);  // also checks the plan against the module
    const auto kernels = cuda::inspect_cubin(util::read_file(a.path));
    const auto catalog = cuda::module_catalog(kernels, a.lowered_names);
    const auto plan = cuda::LaunchPlan::parse(c.solution.launch_plan);
    for (const auto& w : task.workloads) {
      auto resolved = cuda::resolve_plan(plan, util::Vars(w.dims.begin(), w.dims.end()), tensors, catalog,
                                         cuda::DeviceLimits{});
      for (const auto& l : resolved.launches) {
        CHECK(l.grid[0] >= 1);
        CHECK(l.grid[0] <= 4096);
        CHECK(l.block[0] == 256);
        CHECK(l.args.back().size == 8);  // the element count as long long
        ++launches;
      }
    }
  }
  return launches;
}

}  // namespace

TEST_CASE("weak check (cuda): the softmax example's candidates compile and bind on every workload") {
  if (!nvrtc_usable()) return;
  TaskSpec spec = load_task_file(test::source_dir() / "examples" / "tasks" / "softmax" / "task.json");
  // zeros, ones and echo (x into y), one launch each per workload.
  CHECK(compile_and_bind(spec, "weak_cuda_softmax") == 3 * static_cast<int>(spec.workloads.size()));
}

TEST_CASE("weak check (cuda): outputs of every element width") {
  if (!nvrtc_usable()) return;
  TaskSpec t;
  t.name = "t/widths";
  t.languages = {Language::cuda};
  t.dims = {"N"};
  auto tensor = [](const char* name, DType d, bool out) {
    TensorSpec s;
    s.name = name;
    s.dtype = d;
    s.shape = {"N"};
    s.is_output = out;
    return s;
  };
  t.tensors = {tensor("a", DType::f16, false), tensor("b", DType::i64, false), tensor("h", DType::f16, true),
               tensor("l", DType::i64, true),  tensor("q", DType::f8e4m3, true), tensor("m", DType::boolean, true),
               tensor("f", DType::f32, true)};
  WorkloadSpec w;
  w.name = "w";
  w.dims = {{"N", 100000}};
  w.benchmark = true;
  t.workloads = {w};
  CHECK(compile_and_bind(t, "weak_cuda_widths") == 3 * 5);
}
