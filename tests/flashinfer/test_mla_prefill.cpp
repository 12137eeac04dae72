// flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1 without a GPU: the
// spec, the causal CPU reference against hand-computed values, NVRTC
// compilation, and the kernels on the host emulation against the CPU
// reference (wrong variants must fail).
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
    TaskSpec t = make_mla_prefill_spec();
    t.validate();
    return t;
  }();
  return s;
}

std::uint16_t bf(double v) { return core::double_to_bf16(v); }
float round_bf(double v) { return core::bf16_to_float(bf(v)); }

// A small prefill workload: requests as (q_len, prefix), a small page pool.
WorkloadSpec small(const char* name, const std::vector<std::pair<int, int>>& requests, std::int64_t pages,
                   std::uint64_t seed) {
  WorkloadSpec w = spec().workloads[0];
  w.name = name;
  w.seed = seed;
  w.dist_overrides.clear();
  InputData qo{{0}, "", ""}, kv{{0}, "", ""};
  for (auto [q, p] : requests) {
    qo.values.push_back(qo.values.back() + q);
    kv.values.push_back(kv.values.back() + q + p);
  }
  w.data = {{"qo_indptr", qo}, {"kv_indptr", kv}};
  w.dims["total_q"] = static_cast<std::int64_t>(qo.values.back());
  w.dims["num_kv_indices"] = static_cast<std::int64_t>(kv.values.back());
  w.dims["len_indptr"] = static_cast<std::int64_t>(requests.size()) + 1;
  w.dims["num_pages"] = pages;
  return w;
}

}  // namespace

TEST_CASE("mla prefill: the task follows the definition") {
  const TaskSpec& t = spec();
  CHECK(t.name == "flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1");
  std::vector<std::string> names;
  for (const auto& ts : t.tensors) names.push_back(ts.name);
  CHECK(names == std::vector<std::string>{"q_nope", "q_pe", "ckv_cache", "kpe_cache", "qo_indptr", "kv_indptr",
                                          "kv_indices", "sm_scale", "output", "lse"});
  for (const auto& w : t.workloads) {
    CAPTURE(w.name);
    const auto& qo = w.data.at("qo_indptr").values;
    const auto& kv = w.data.at("kv_indptr").values;
    REQUIRE(qo.size() == kv.size());
    CHECK(static_cast<std::int64_t>(qo.size()) == w.dims.at("len_indptr"));
    CHECK(qo.back() == w.dims.at("total_q"));
    CHECK(kv.back() == w.dims.at("num_kv_indices"));
    for (std::size_t b = 1; b < qo.size(); ++b) {
      CHECK(qo[b] - qo[b - 1] >= 1);
      CHECK(kv[b] - kv[b - 1] >= qo[b] - qo[b - 1]);  // kv_len >= q_len
    }
  }
  CHECK(load_task("flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1")->spec().to_json() == t.to_json());
}

TEST_CASE("mla prefill: the causal CPU reference against hand-computed values") {
  // One request: q_len 2 on a prefix of 1 (kv_len 3), one head, ckv and kpe
  // of width 1; the page table maps entries 0, 1, 2 to pages 2, 0, 1.
  const std::uint16_t q_nope[] = {bf(1), bf(0.5)}, q_pe[] = {bf(0), bf(0)};
  const std::uint16_t ckv[] = {bf(1), bf(2), bf(3)}, kpe[] = {bf(0), bf(0), bf(0)};
  const std::int32_t qo[] = {0, 2}, kv[] = {0, 3}, indices[] = {2, 0, 1};
  PagedMla p;
  p.num_requests = 1, p.num_qo_heads = 1, p.head_dim_ckv = 1, p.head_dim_kpe = 1;
  p.qo_indptr = qo, p.q_nope = q_nope, p.q_pe = q_pe, p.ckv_cache = ckv, p.kpe_cache = kpe;
  p.kv_indptr = kv, p.kv_indices = indices, p.sm_scale = 1, p.causal = true;
  std::uint16_t out[2];
  float lse[2];
  mla_paged_cpu(p, out, lse);
  // Query 0 sees entries 0, 1 (values 3, 1): logits 3, 1.
  const double s0 = std::exp(3.0) + std::exp(1.0);
  CHECK(core::bf16_to_float(out[0]) == round_bf((std::exp(3.0) * 3 + std::exp(1.0) * 1) / s0));
  CHECK(lse[0] == doctest::Approx(std::log2(s0)).epsilon(1e-6));
  // Query 1 sees all three (values 3, 1, 2): logits 1.5, 0.5, 1.
  const double s1 = std::exp(1.5) + std::exp(0.5) + std::exp(1.0);
  CHECK(core::bf16_to_float(out[1]) == round_bf((std::exp(1.5) * 3 + std::exp(0.5) * 1 + std::exp(1.0) * 2) / s1));
  CHECK(lse[1] == doctest::Approx(std::log2(s1)).epsilon(1e-6));
  // Without the mask query 0 would see the third entry as well.
  p.causal = false;
  mla_paged_cpu(p, out, lse);
  CHECK(lse[0] == doctest::Approx(std::log2(std::exp(3.0) + std::exp(1.0) + std::exp(2.0))).epsilon(1e-6));
}

TEST_CASE("mla prefill: the shipped kernels compile with NVRTC for sm_90a") {
  const TaskSpec& t = spec();
  test::check_compiles(t, t.references.at(Language::cuda));
  test::check_compiles(t, t.baselines.at(Language::cuda));
  for (const auto& s : t.starting_points) test::check_compiles(t, s);
}

TEST_CASE("mla prefill: reference, starting kernel and baseline agree with the CPU reference (emulated)") {
  const TaskSpec& t = spec();
  ks_emu::KernelTable ref, start, base;
  ks_emu_register_mla_prefill_reference(ref);
  ks_emu_register_mla_prefill_start(start);
  ks_emu_register_mla_prefill_baseline(base);
  const WorkloadSpec cases[] = {
      small("single", {{1, 0}}, 4, 31),
      small("ragged", {{3, 0}, {1, 5}, {6, 2}}, 40, 32),
      small("tiles", {{20, 37}, {40, 0}}, 150, 33),  // several tiles, diagonal and full ones
  };
  Tolerance fp32 = t.tolerance;
  fp32.atol = 1e-3;
  fp32.rtol = 8e-3;  // a bf16 output may round to the neighbouring value
  for (const auto& w : cases) {
    INFO("workload " << w.name);
    const auto want = test::cpu_outputs(t, w);
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, ref, t.references.at(Language::cuda).launch_plan), want, fp32) == "",
                  "reference");
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, start, t.starting_points[0].launch_plan), want, t.tolerance) == "",
                  "starting kernel");
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, base, t.baselines.at(Language::cuda).launch_plan), want, t.tolerance) == "",
                  "baseline");
  }
}

TEST_CASE("mla prefill: wrong kernels fail (emulated): pages read in order, no causal mask") {
  const TaskSpec& t = spec();
  ks_emu::KernelTable in_order, no_mask;
  ks_emu_register_mla_prefill_pages_in_order(in_order);
  ks_emu_register_mla_prefill_no_mask(no_mask);
  const WorkloadSpec w = small("ragged", {{3, 0}, {1, 5}, {6, 2}}, 40, 32);
  const auto want = test::cpu_outputs(t, w);
  const LaunchPlan& plan = t.starting_points[0].launch_plan;
  CHECK(test::compare_outputs(t, test::run_emulated(t, w, in_order, plan), want, t.tolerance) != "");
  CHECK(test::compare_outputs(t, test::run_emulated(t, w, no_mask, plan), want, t.tolerance) != "");
}
