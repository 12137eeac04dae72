// flashinfer/gqa_paged_decode_h32_kv4_d128_ps1 without a GPU: the spec, the
// CPU reference against hand-computed values, NVRTC compilation of the
// shipped kernels, and the kernels on the host emulation against the CPU
// reference (wrong variants must fail).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "core/elements.hpp"
#include "core/response/parse.hpp"
#include "emu/kernel_table.hpp"
#include "flashinfer_test_util.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"
#include "tasks/flashinfer/flashinfer.hpp"
#include "util/fs.hpp"

using namespace ks;
using namespace ks::tasks::flashinfer;

namespace {

const TaskSpec& spec() {
  static const TaskSpec s = [] {
    TaskSpec t = make_gqa_decode_spec();
    t.validate();
    return t;
  }();
  return s;
}

std::uint16_t bf(double v) { return core::double_to_bf16(v); }

// A small workload of the task: same generators, fewer and shorter requests
// and a small page pool.
WorkloadSpec small(const char* name, std::int64_t batch, std::int64_t entries, std::int64_t pages, std::uint64_t seed,
                   double sm_scale = 0) {
  WorkloadSpec w = test::with_dims(spec().workloads[0],
                                   {{"batch_size", batch}, {"len_indptr", batch + 1}, {"num_kv_indices", entries},
                                    {"num_pages", pages}},
                                   name);
  w.seed = seed;
  w.dist_overrides.clear();
  if (sm_scale > 0) {
    Distribution d;
    d.kind = Distribution::Kind::constant;
    d.p0 = std::to_string(sm_scale);
    w.dist_overrides["sm_scale"] = d;
  }
  return w;
}

}  // namespace

TEST_CASE("gqa decode: the task follows the definition") {
  const TaskSpec& t = spec();
  CHECK(t.name == "flashinfer/gqa_paged_decode_h32_kv4_d128_ps1");
  std::vector<std::string> names;
  for (const auto& ts : t.tensors) names.push_back(ts.name);
  CHECK(names == std::vector<std::string>{"q", "k_cache", "v_cache", "kv_indptr", "kv_indices", "sm_scale", "output", "lse"});
  CHECK(t.find_tensor("sm_scale")->scalar);
  CHECK(t.find_tensor("q")->dtype == DType::bf16);
  CHECK(t.find_tensor("lse")->dtype == DType::f32);
  CHECK(t.tolerance.rule == Tolerance::Rule::abs_or_rel);
  CHECK(t.tolerance.nan_policy == Tolerance::NanPolicy::forbid);
  CHECK(t.score == ScoreMode::vs_baseline);
  CHECK(t.baselines.count(Language::cuda));
  CHECK(t.feedback_workloads.size() >= 5);
  CHECK(t.feedback_workloads.size() <= 8);
  for (const auto& w : t.workloads) {
    CAPTURE(w.name);
    CHECK(w.dims.at("num_qo_heads") == 32);
    CHECK(w.dims.at("num_kv_heads") == 4);
    CHECK(w.dims.at("head_dim") == 128);
    CHECK(w.dims.at("page_size") == 1);
    CHECK(w.dims.at("len_indptr") == w.dims.at("batch_size") + 1);
    CHECK(w.dims.at("num_pages") >= w.dims.at("num_kv_indices"));
  }
  // Some workloads use another sm_scale, so a kernel cannot hard-code it.
  int other_scale = 0;
  for (const auto& w : t.workloads) other_scale += w.dist_overrides.count("sm_scale") ? 1 : 0;
  CHECK(other_scale >= 2);
  CHECK(load_task("flashinfer/gqa_paged_decode_h32_kv4_d128_ps1")->spec().to_json() == t.to_json());
}

TEST_CASE("gqa decode: the CPU reference against hand-computed values") {
  // One request of two entries read through a reversed page table; two q
  // heads sharing one KV head; head_dim 2.
  const std::uint16_t q[] = {bf(1), bf(0), bf(0), bf(2)};
  const std::uint16_t k[] = {bf(0), bf(1), bf(1), bf(0)};  // pages 0 and 1
  const std::uint16_t v[] = {bf(3), bf(4), bf(1), bf(2)};
  const std::int32_t indptr[] = {0, 2};
  const std::int32_t indices[] = {1, 0};  // entry 0 is page 1
  PagedDecodeGqa p;
  p.batch_size = 1, p.num_qo_heads = 2, p.num_kv_heads = 1, p.head_dim = 2;
  p.q = q, p.k_cache = k, p.v_cache = v, p.kv_indptr = indptr, p.kv_indices = indices;
  p.sm_scale = 0.5f;
  std::uint16_t out[4];
  float lse[2];
  gqa_decode_cpu(p, out, lse);
  // Head 0: q = (1, 0); entry 0 reads page 1: k = (1, 0), v = (1, 2), logit 0.5;
  // entry 1 reads page 0: k = (0, 1), v = (3, 4), logit 0.
  const double w0 = std::exp(0.5) / (std::exp(0.5) + 1), w1 = 1 - w0;
  CHECK(core::bf16_to_float(out[0]) == core::bf16_to_float(bf(w0 * 1 + w1 * 3)));
  CHECK(core::bf16_to_float(out[1]) == core::bf16_to_float(bf(w0 * 2 + w1 * 4)));
  CHECK(lse[0] == doctest::Approx(std::log2(std::exp(0.5) + 1)).epsilon(1e-6));
  // Head 1: q = (0, 2); logits 0 (page 1) and 1 (page 0).
  const double u0 = 1 / (1 + std::exp(1.0)), u1 = 1 - u0;
  CHECK(core::bf16_to_float(out[2]) == core::bf16_to_float(bf(u0 * 1 + u1 * 3)));
  CHECK(core::bf16_to_float(out[3]) == core::bf16_to_float(bf(u0 * 2 + u1 * 4)));
  CHECK(lse[1] == doctest::Approx(std::log2(1 + std::exp(1.0))).epsilon(1e-6));
  // An empty request: output 0 and lse -inf, as FlashInfer's reference.
  const std::int32_t empty[] = {0, 0};
  p.kv_indptr = empty;
  gqa_decode_cpu(p, out, lse);
  CHECK(out[0] == 0);
  CHECK(std::isinf(lse[0]));
  CHECK(lse[0] < 0);
}

TEST_CASE("gqa decode: the shipped kernels compile with NVRTC for sm_90a") {
  const TaskSpec& t = spec();
  test::check_compiles(t, t.references.at(Language::cuda));
  test::check_compiles(t, t.baselines.at(Language::cuda));
  for (const auto& s : t.starting_points) test::check_compiles(t, s);
}

TEST_CASE("gqa decode: reference, starting kernel and baseline agree with the CPU reference (emulated)") {
  const TaskSpec& t = spec();
  ks_emu::KernelTable ref, start, base;
  ks_emu_register_gqa_reference(ref);
  ks_emu_register_gqa_start(start);
  ks_emu_register_gqa_baseline(base);
  const WorkloadSpec cases[] = {
      small("tiny", 3, 7, 40, 11),
      small("one_entry", 1, 1, 3, 12, 0.3),
      small("ragged", 5, 180, 400, 13),
      // One long request: the baseline splits it across blocks.
      small("long", 1, 1100, 1500, 14, 0.05),
  };
  // FP32 against double: tighter than the task's 1e-2, but a bf16 output may
  // round to the neighbouring value (2^-8 relative) when the two sit on
  // either side of a rounding boundary.
  Tolerance fp32 = t.tolerance;
  fp32.atol = 1e-3;
  fp32.rtol = 8e-3;
  for (const auto& w : cases) {
    INFO("workload " << w.name);
    for (std::uint64_t seed = 0; seed < 2; ++seed) {
      const auto want = test::cpu_outputs(t, w, seed);
      CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, ref, t.references.at(Language::cuda).launch_plan, seed), want, fp32) == "",
                    "reference");
      CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, start, t.starting_points[0].launch_plan, seed), want, t.tolerance) == "",
                    "starting kernel");
      CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, base, t.baselines.at(Language::cuda).launch_plan, seed), want, t.tolerance) == "",
                    "baseline");
    }
  }
}

TEST_CASE("gqa decode: wrong kernels fail (emulated): pages read in order, lse in natural log") {
  const TaskSpec& t = spec();
  ks_emu::KernelTable in_order, natural;
  ks_emu_register_gqa_pages_in_order(in_order);
  ks_emu_register_gqa_natural_lse(natural);
  const WorkloadSpec w = small("ragged", 5, 180, 400, 13);
  const auto want = test::cpu_outputs(t, w);
  const LaunchPlan& plan = t.starting_points[0].launch_plan;
  CHECK(test::compare_outputs(t, test::run_emulated(t, w, in_order, plan), want, t.tolerance).find("output:") != std::string::npos);
  CHECK(test::compare_outputs(t, test::run_emulated(t, w, natural, plan), want, t.tolerance).find("lse:") != std::string::npos);
}

TEST_CASE("gqa decode: the demonstration's hand-written answers compile and agree with the CPU reference (emulated)") {
  const TaskSpec& t = spec();
  struct Answer {
    const char* file;
    void (*reg)(ks_emu::KernelTable&);
  };
  const Answer answers[] = {{"v1_warp_per_head.md", ks_emu_register_demo_v1_warp_per_head},
                            {"v2_group_shared.md", ks_emu_register_demo_v2_group_shared},
                            {"v3_split_kv_wide.md", ks_emu_register_demo_v3_split_kv_wide}};
  const WorkloadSpec cases[] = {small("tiny", 3, 7, 40, 11), small("ragged", 5, 180, 400, 13, 0.2),
                                small("long", 1, 1100, 1500, 14, 0.05)};
  for (const auto& a : answers) {
    INFO("answer " << a.file);
    Solution s = core::parse_candidate(
        util::read_file(test::source_dir() / "examples" / "flashinfer" / "candidates" / a.file), Language::cuda);
    s.name = a.file;
    test::check_compiles(t, s);
    ks_emu::KernelTable table;
    a.reg(table);
    for (const auto& w : cases) {
      INFO("workload " << w.name);
      CHECK(test::compare_outputs(t, test::run_emulated(t, w, table, s.launch_plan), test::cpu_outputs(t, w), t.tolerance) == "");
    }
  }
}
