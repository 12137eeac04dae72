// The shipped CUDA kernels, executed through their launch plans on the host
// emulation of the CUDA execution model (tests/trimul/emu), against the
// Eigen CPU reference on small shapes. This checks indexing, tiling,
// barriers, fragment layouts, pipelines and plans without a GPU; the GPU
// test (test_trimul_gpu) repeats the comparison on the device.
#include <doctest/doctest.h>

#include "core/response/parse.hpp"
#include "core/param_space.hpp"
#include "support/test_util.hpp"
#include "tasks/gpumode/trimul.hpp"
#include "trimul_test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
using namespace ks::tasks::gpumode;

namespace {

const TaskSpec& spec() {
  static const TaskSpec s = make_trimul_spec();
  return s;
}

// `count` of: a tiny shape (every tile partial, B = 2, random mask), then the
// three smallest upstream tests (normal, masked, Cauchy).
std::vector<WorkloadSpec> small_workloads(std::size_t count = 4) {
  std::vector<WorkloadSpec> all = {
      // tiny: every tile is partial, the batch dimension is 2, the mask is random
      test::trimul_workload_with_dims(spec(), "test_01_n32_b1_c128_normal_mask", 2, 16, 24, 128),
      test::trimul_workload(spec(), "test_00_n32_b1_c128_normal_nomask"),
      test::trimul_workload(spec(), "test_01_n32_b1_c128_normal_mask"),
      test::trimul_workload(spec(), "test_11_n32_b1_c128_cauchy_nomask"),
  };
  all.resize(std::min(count, all.size()));
  return all;
}

void check_against_cpu(const ks_emu::KernelTable& table, const Solution& solution,
                       const util::Vars& params, double atol, double rtol, std::size_t workloads = 4) {
  for (const auto& w : small_workloads(workloads)) {
    CAPTURE(w.name);
    util::Vars dims(w.dims.begin(), w.dims.end());
    if (!params.empty()) {
      std::string why;
      REQUIRE_MESSAGE(core::ParamSpace(solution.params).admissible(params, dims, &why), why);
    }
    const TrimulInputs in = generate_trimul_inputs(spec(), w);
    std::vector<float> ref(in.output_size());
    trimul_cpu_reference(in, ref.data());
    const std::vector<float> out = test::run_emulated(table, solution.launch_plan, in, params);
    const test::Agreement a = test::agreement(out, ref, atol, rtol);
    CHECK_MESSAGE(a.mismatches == 0, solution.name, " on ", w.name, ": ", a.describe());
  }
}

util::Vars point(std::int64_t proj_bm, std::int64_t proj_bn, std::int64_t tri_bm, std::int64_t tri_bn,
                   std::int64_t bk, std::int64_t stages, std::int64_t vec) {
  return {{"PROJ_GEMM", 0}, {"TRI_GEMM", 0}, {"OUT_GEMM", 0}, {"PROJ_ALGO", 0}, {"TRI_ALGO", 0},
          {"PROJ_BM", proj_bm}, {"PROJ_BN", proj_bn}, {"TRI_BM", tri_bm}, {"TRI_BN", tri_bn},
          {"BK", bk},           {"STAGES", stages},   {"VEC", vec}};
}

}  // namespace

TEST_CASE("trimul emulated: the FP32 CUDA reference matches the CPU reference closely") {
  ks_emu::KernelTable table;
  ks_emu_register_reference(table);
  // FP32 arithmetic against double: far inside the task's 2e-2 tolerance.
  check_against_cpu(table, trimul_reference_solution(), {}, 1e-4, 1e-4);
}

TEST_CASE("trimul emulated: the tunable starting kernel meets the tolerance at several parameter points") {
  const Solution start = trimul_starting_point();
  const double tol = spec().tolerance.atol;
  SUBCASE("defaults") {
    ks_emu::KernelTable table;
    ks_emu_register_tunable_default(table);
    check_against_cpu(table, start, core::ParamSpace(start.params).defaults(), tol, tol);
  }
  SUBCASE("every GEMM a cuBLASLt step (emulated), with the projection's gating kernel") {
    ks_emu::KernelTable table;
    ks_emu_register_tunable_default(table);
    util::Vars v = core::ParamSpace(start.params).defaults();
    v["PROJ_GEMM"] = v["TRI_GEMM"] = v["OUT_GEMM"] = 1;
    check_against_cpu(table, start, v, tol, tol, 2);
  }
  SUBCASE("the triangle alone a GEMM step") {
    ks_emu::KernelTable table;
    ks_emu_register_tunable_default(table);
    util::Vars v = core::ParamSpace(start.params).defaults();
    v["TRI_GEMM"] = 1;
    check_against_cpu(table, start, v, tol, tol, 2);
  }
  SUBCASE("smallest tiles, deepest pipeline, scalar loads") {
    ks_emu::KernelTable table;
    ks_emu_register_tunable_small(table);
    check_against_cpu(table, start, point(64, 64, 64, 64, 64, 4, 1), tol, tol, 2);
  }
  SUBCASE("mixed tiles, double buffering") {
    ks_emu::KernelTable table;
    ks_emu_register_tunable_mixed(table);
    check_against_cpu(table, start, point(64, 128, 128, 64, 32, 2, 2), tol, tol, 2);
  }
}

TEST_CASE("trimul emulated: the demonstration candidates meet the tolerance") {
  struct Demo {
    const char* file;
    void (*reg)(ks_emu::KernelTable&);
  };
  const Demo demos[] = {{"v1_naive_fp32.md", ks_emu_register_v1_naive_fp32},
                        {"v2_tiled_fp32.md", ks_emu_register_v2_tiled_fp32},
                        {"v3_tensor_cores_fp16.md", ks_emu_register_v3_tensor_cores_fp16},
                        {"v4_pipelined_fp16.md", ks_emu_register_v4_pipelined_fp16}};
  for (const auto& d : demos) {
    INFO("candidate " << d.file);
    Solution s = core::parse_candidate(
        util::read_file(test::source_dir() / "examples" / "trimul" / "candidates" / d.file), Language::cuda);
    s.name = d.file;
    ks_emu::KernelTable table;
    d.reg(table);
    check_against_cpu(table, s, {}, spec().tolerance.atol, spec().tolerance.rtol);
  }
}

TEST_CASE("trimul emulated: a plan naming a missing kernel or passing the wrong arguments fails clearly") {
  ks_emu::KernelTable table;
  ks_emu_register_reference(table);
  const WorkloadSpec w = test::trimul_workload_with_dims(spec(), "test_00_n32_b1_c128_normal_nomask", 1, 8, 8, 128);
  const TrimulInputs in = generate_trimul_inputs(spec(), w);
  LaunchPlan plan = trimul_reference_solution().launch_plan;
  plan.kernels[0].name = "trimul_ref_missing";
  CHECK_THROWS_WITH_AS(test::run_emulated(table, plan, in), doctest::Contains("not found"), std::runtime_error);
  plan = trimul_reference_solution().launch_plan;
  plan.kernels[0].args.pop_back();
  CHECK_THROWS_WITH_AS(test::run_emulated(table, plan, in), doctest::Contains("takes 4 arguments"),
                       std::runtime_error);
}
