// flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1 without a GPU: the spec,
// the CPU reference against hand-computed values, NVRTC compilation, and the
// kernels on the host emulation against the CPU reference (wrong variants
// must fail).
#include <doctest/doctest.h>

#include <cmath>

#include "core/elements.hpp"
#include "emu/kernel_table.hpp"
#include "flashinfer_test_util.hpp"
#include "ksearch/tasks.hpp"
#include "tasks/flashinfer/flashinfer.hpp"

using namespace ks;
using namespace ks::tasks::flashinfer;

namespace {

const TaskSpec& spec() {
  static const TaskSpec s = [] {
    TaskSpec t = make_mla_decode_spec();
    t.validate();
    return t;
  }();
  return s;
}

std::uint16_t bf(double v) { return core::double_to_bf16(v); }
float round_bf(double v) { return core::bf16_to_float(bf(v)); }

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

TEST_CASE("mla decode: the task follows the definition") {
  const TaskSpec& t = spec();
  CHECK(t.name == "flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1");
  std::vector<std::string> names;
  for (const auto& ts : t.tensors) names.push_back(ts.name);
  CHECK(names == std::vector<std::string>{"q_nope", "q_pe", "ckv_cache", "kpe_cache", "kv_indptr", "kv_indices",
                                          "sm_scale", "output", "lse"});
  CHECK(t.find_tensor("sm_scale")->scalar);
  CHECK(t.score == ScoreMode::vs_baseline);
  CHECK(t.feedback_workloads.size() == 6);
  for (const auto& w : t.workloads) {
    CAPTURE(w.name);
    CHECK(w.dims.at("num_qo_heads") == 16);
    CHECK(w.dims.at("head_dim_ckv") == 512);
    CHECK(w.dims.at("head_dim_kpe") == 64);
    CHECK(w.dims.at("len_indptr") == w.dims.at("batch_size") + 1);
  }
  CHECK(load_task("flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1")->spec().to_json() == t.to_json());
}

TEST_CASE("mla decode: the CPU reference against hand-computed values") {
  // head_dim_ckv 2, head_dim_kpe 1, one head, one request of two entries
  // read through a reversed page table.
  const std::uint16_t q_nope[] = {bf(1), bf(0)}, q_pe[] = {bf(1)};
  const std::uint16_t ckv[] = {bf(0), bf(1), bf(2), bf(0)};  // page 0, page 1
  const std::uint16_t kpe[] = {bf(1), bf(0)};
  const std::int32_t indptr[] = {0, 2}, indices[] = {1, 0};
  PagedMla p;
  p.num_requests = 1, p.num_qo_heads = 1, p.head_dim_ckv = 2, p.head_dim_kpe = 1;
  p.q_nope = q_nope, p.q_pe = q_pe, p.ckv_cache = ckv, p.kpe_cache = kpe, p.kv_indptr = indptr, p.kv_indices = indices;
  p.sm_scale = 0.5f;
  std::uint16_t out[2];
  float lse[1];
  mla_paged_cpu(p, out, lse);
  // Entry 0 = page 1: (1*2 + 0*0) + 1*0 = 2, logit 1. Entry 1 = page 0: 0 + 1*1 = 1, logit 0.5.
  const double w0 = std::exp(1.0) / (std::exp(1.0) + std::exp(0.5)), w1 = 1 - w0;
  CHECK(core::bf16_to_float(out[0]) == round_bf(w0 * 2 + w1 * 0));
  CHECK(core::bf16_to_float(out[1]) == round_bf(w0 * 0 + w1 * 1));
  CHECK(lse[0] == doctest::Approx(std::log2(std::exp(1.0) + std::exp(0.5))).epsilon(1e-6));
}

TEST_CASE("mla decode: the shipped kernels compile with NVRTC for sm_90a") {
  const TaskSpec& t = spec();
  test::check_compiles(t, t.references.at(Language::cuda));
  test::check_compiles(t, t.baselines.at(Language::cuda));
  for (const auto& s : t.starting_points) test::check_compiles(t, s);
}

TEST_CASE("mla decode: reference, starting kernel and baseline agree with the CPU reference (emulated)") {
  const TaskSpec& t = spec();
  ks_emu::KernelTable ref, start, base;
  ks_emu_register_mla_decode_reference(ref);
  ks_emu_register_mla_decode_start(start);
  ks_emu_register_mla_decode_baseline(base);
  const WorkloadSpec cases[] = {
      small("tiny", 3, 7, 40, 21),
      small("one_entry", 1, 1, 3, 22, 0.3),
      small("ragged", 4, 90, 200, 23),
      small("long", 1, 600, 700, 24, 0.05),  // the baseline splits it
  };
  Tolerance fp32 = t.tolerance;
  fp32.atol = 1e-3;
  fp32.rtol = 8e-3;  // a bf16 output may round to the neighbouring value
  for (const auto& w : cases) {
    INFO("workload " << w.name);
    const auto want = test::cpu_outputs(t, w, 1);
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, ref, t.references.at(Language::cuda).launch_plan, 1), want, fp32) == "",
                  "reference");
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, start, t.starting_points[0].launch_plan, 1), want, t.tolerance) == "",
                  "starting kernel");
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, base, t.baselines.at(Language::cuda).launch_plan, 1), want, t.tolerance) == "",
                  "baseline");
  }
}

TEST_CASE("mla decode: wrong kernels fail (emulated): pages read in order, the rotary part left out") {
  const TaskSpec& t = spec();
  ks_emu::KernelTable in_order, no_pe;
  ks_emu_register_mla_decode_pages_in_order(in_order);
  ks_emu_register_mla_decode_no_pe(no_pe);
  const WorkloadSpec w = small("ragged", 4, 90, 200, 23);
  const auto want = test::cpu_outputs(t, w);
  const LaunchPlan& plan = t.starting_points[0].launch_plan;
  CHECK(test::compare_outputs(t, test::run_emulated(t, w, in_order, plan), want, t.tolerance) != "");
  CHECK(test::compare_outputs(t, test::run_emulated(t, w, no_pe, plan), want, t.tolerance) != "");
}
