// flashinfer/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048
// without a GPU: the spec, the routing and the MoE CPU reference against
// hand-computed values, NVRTC compilation at the real sizes, and the kernels
// compiled with smaller GEMM sizes (-DHIDDEN=256 -DINTER=256) on the host
// emulation against the CPU reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

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
    TaskSpec t = make_moe_spec();
    t.validate();
    return t;
  }();
  return s;
}

std::uint16_t bf(double v) { return core::double_to_bf16(v); }
float sigmoid(double x) { return static_cast<float>(1 / (1 + std::exp(-x))); }

// The task's generators at GEMM sizes the emulation can run (the kernels
// are compiled with the same -D sizes).
WorkloadSpec small(const char* name, std::int64_t seq_len, std::int64_t offset, std::uint64_t seed) {
  WorkloadSpec w = test::with_dims(spec().workloads[0],
                                   {{"seq_len", seq_len}, {"hidden_size", 256}, {"intermediate_size", 256},
                                    {"gemm1_out_size", 512}, {"num_hidden_blocks", 2}, {"num_intermediate_blocks", 2},
                                    {"num_gemm1_out_blocks", 4}},
                                   name);
  w.seed = seed;
  Distribution d;
  d.kind = Distribution::Kind::constant;
  d.p0 = std::to_string(offset);
  w.dist_overrides["local_expert_offset"] = d;
  return w;
}

}  // namespace

TEST_CASE("moe: the task follows the definition") {
  const TaskSpec& t = spec();
  std::vector<std::string> names;
  for (const auto& ts : t.tensors) names.push_back(ts.name);
  CHECK(names == std::vector<std::string>{"routing_logits", "routing_bias", "hidden_states", "hidden_states_scale",
                                          "gemm1_weights", "gemm1_weights_scale", "gemm2_weights",
                                          "gemm2_weights_scale", "local_expert_offset", "routed_scaling_factor",
                                          "output"});
  CHECK(t.find_tensor("hidden_states")->dtype == DType::f8e4m3);
  CHECK(t.find_tensor("hidden_states")->dist.kind == Distribution::Kind::clamped_normal);
  CHECK(t.find_tensor("local_expert_offset")->scalar);
  CHECK(t.find_tensor("local_expert_offset")->dtype == DType::i32);
  CHECK(t.tolerance.min_matched_ratio == 0.95);
  std::int64_t max_seq = 0;
  for (const auto& w : t.workloads) {
    max_seq = std::max(max_seq, w.dims.at("seq_len"));
    CHECK(w.dims.at("hidden_size") == 7168);
    CHECK(w.dims.at("num_hidden_blocks") * 128 == w.dims.at("hidden_size"));
  }
  CHECK(max_seq >= 14000);
  CHECK(load_task("flashinfer/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048")->spec().to_json() ==
        t.to_json());
}

TEST_CASE("moe: DeepSeek no-aux routing against a hand-computed case") {
  // 8 experts in 4 groups of 2; keep 2 groups, pick 2 experts.
  float logits[8] = {0, 0, 2, 0, -1, 0, 0, 0};
  const std::uint16_t bias[8] = {bf(0.125), bf(0.25), bf(0.875), bf(0), bf(0.25), bf(0.25), bf(-1), bf(0.5)};
  // sb = s + bias: 0.625, 0.75, 0.8808+0.875, 0.5, 0.2689+0.25, 0.75, -0.5, 1.0
  // groups: 1.375, 2.2558, 1.2689, 0.5 -> groups 1 and 0 -> experts 0..3: best 2, then 1.
  std::int32_t ids[2];
  float w[2];
  moe_route_cpu(logits, bias, 8, 4, 2, 2, 2.5f, ids, w);
  CHECK(ids[0] == 2);
  CHECK(ids[1] == 1);
  // Weights from s (without the bias).
  CHECK(w[0] == doctest::Approx(sigmoid(2) / (sigmoid(2) + 0.5) * 2.5));
  CHECK(w[1] == doctest::Approx(0.5 / (sigmoid(2) + 0.5) * 2.5));
  // Equal scores go to the lower index.
  float flat[8] = {};
  const std::uint16_t zero[8] = {};
  moe_route_cpu(flat, zero, 8, 4, 2, 2, 1.0f, ids, w);
  CHECK(ids[0] == 0);
  CHECK(ids[1] == 1);
  CHECK(w[0] == doctest::Approx(0.5));
}

TEST_CASE("moe: the fp8 block-scale MoE CPU reference against a hand-computed case") {
  // One token, hidden = inter = 128 (one scale block each), 8 experts as in
  // the routing case above (it picks experts 2 and 1), 2 local experts from
  // offset 1: expert 1 is local (le 0), expert 2 is local (le 1).
  const std::int64_t H = 128, I = 128;
  float logits[8] = {0, 0, 2, 0, -1, 0, 0, 0};
  const std::uint16_t bias[8] = {bf(0.125), bf(0.25), bf(0.875), bf(0), bf(0.25), bf(0.25), bf(-1), bf(0.5)};
  const std::uint8_t one = core::double_to_f8e4m3(1.0);
  std::vector<std::uint8_t> hs(H, one), w1(2 * 2 * I * H, one), w2(2 * H * I, one);
  const float hs_scale[1] = {1.f / 128};
  // gemm1 scales per expert: [2 * I / 128 = 2 blocks of n][1 block of k]; x1 block, x2 block.
  const float w1s[4] = {1.0f, 2.0f, 0.5f, 1.0f};
  // gemm2 scales per expert: [1][1].
  const float w2s[2] = {1.f / 128, 2.f / 128};
  MoeFp8 p;
  p.seq_len = 1, p.num_experts = 8, p.num_local_experts = 2, p.hidden = H, p.inter = I;
  p.n_group = 4, p.topk_group = 2, p.top_k = 2;
  p.routing_logits = logits, p.routing_bias = bias, p.hidden_states = hs.data(), p.hidden_states_scale = hs_scale;
  p.gemm1_weights = w1.data(), p.gemm1_weights_scale = w1s, p.gemm2_weights = w2.data(), p.gemm2_weights_scale = w2s;
  p.local_expert_offset = 1, p.routed_scaling_factor = 2.5f;
  std::vector<std::uint16_t> out(H);
  moe_fp8_cpu(p, out.data());
  // A = 1/128 everywhere; expert le 0: X1 = 128 * (1/128) * 1 = 1, X2 = 2, C = silu(2) * 1, O = 128 * C / 128 = C.
  // Expert le 1: X1 = 0.5, X2 = 1, C = silu(1) * 0.5, O = 128 * C * 2/128 = 2C.
  const double s2 = sigmoid(2), wsum = s2 + 0.5;
  const double o_e1 = 2 * sigmoid(2) * 1, o_e2 = 2 * (1 * sigmoid(1) * 0.5);
  const double want = (0.5 / wsum * 2.5) * o_e1 + (s2 / wsum * 2.5) * o_e2;
  for (std::int64_t h = 0; h < H; ++h) CHECK(core::bf16_to_float(out[static_cast<std::size_t>(h)]) == core::bf16_to_float(bf(want)));
  // Offset 4: neither chosen expert is local: the output is zero.
  p.local_expert_offset = 4;
  moe_fp8_cpu(p, out.data());
  CHECK(out[0] == 0);
}

TEST_CASE("moe: the shipped kernels compile with NVRTC for sm_90a") {
  const TaskSpec& t = spec();
  test::check_compiles(t, t.references.at(Language::cuda));
  test::check_compiles(t, t.baselines.at(Language::cuda));
  for (const auto& s : t.starting_points) test::check_compiles(t, s);
}

TEST_CASE("moe: reference, starting kernel and baseline agree with the CPU reference (emulated, small GEMMs)") {
  const TaskSpec& t = spec();
  ks_emu::KernelTable ref, start, base;
  ks_emu_register_moe_reference(ref);
  ks_emu_register_moe_start(start);
  ks_emu_register_moe_baseline(base);
  const WorkloadSpec cases[] = {small("one_token", 1, 224, 41), small("twelve", 12, 0, 42), small("ninety", 90, 96, 43)};
  Tolerance tight = t.tolerance;
  tight.min_matched_ratio = 1.0;  // FP32 against double on small sums: every element
  for (const auto& w : cases) {
    INFO("workload " << w.name);
    const auto want = test::cpu_outputs(t, w);
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < want.at("output").count(); ++i) nonzero += want.at("output").at(i) != 0;
    MESSAGE(w.name << ": " << nonzero << " nonzero output elements");
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, ref, t.references.at(Language::cuda).launch_plan), want, tight) == "",
                  "reference");
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, start, t.starting_points[0].launch_plan), want, tight) == "",
                  "starting kernel");
    CHECK_MESSAGE(test::compare_outputs(t, test::run_emulated(t, w, base, t.baselines.at(Language::cuda).launch_plan), want, tight) == "",
                  "baseline");
  }
}

TEST_CASE("moe: a kernel that ignores local_expert_offset fails (emulated)") {
  const TaskSpec& t = spec();
  ks_emu::KernelTable no_offset;
  ks_emu_register_moe_no_offset(no_offset);
  const WorkloadSpec w = small("ninety", 90, 96, 43);
  CHECK(test::compare_outputs(t, test::run_emulated(t, w, no_offset, t.starting_points[0].launch_plan), test::cpu_outputs(t, w),
                              t.tolerance) != "");
}

// With FlashInfer-Bench's randn bias the bias alone picks the groups for a
// whole batch, and batches routed nothing to this GPU's experts (moe.cpp). The
// task's bias keeps every benchmark batch of more than one token working here,
// the local share near 1/8, and still changes the experts each token gets
// (so a kernel that ignores it fails).
TEST_CASE("moe: every benchmark workload routes tokens to the local experts") {
  TaskSpec routing_only = spec();
  std::erase_if(routing_only.tensors, [](const TensorSpec& t) {
    return t.name != "routing_logits" && t.name != "routing_bias" && t.name != "local_expert_offset";
  });
  std::int64_t pairs = 0, local = 0, tokens = 0, moved = 0;
  for (const auto& w : spec().workloads) {
    if (!w.benchmark) continue;
    const auto in = core::generate_host_inputs(routing_only, w);
    const auto& logits = in.at("routing_logits");
    const auto offset = static_cast<std::int32_t>(in.at("local_expert_offset").scalar);
    const std::int64_t seq = w.dims.at("seq_len");
    const std::vector<std::uint16_t> no_bias(256, 0);
    std::int64_t here = 0;
    for (std::int64_t t = 0; t < seq; ++t) {
      std::int32_t ids[8], unbiased[8];
      float weights[8];
      moe_route_cpu(logits.as<float>() + t * 256, in.at("routing_bias").as<std::uint16_t>(), 256, 8, 4, 8, 2.5f, ids,
                    weights);
      moe_route_cpu(logits.as<float>() + t * 256, no_bias.data(), 256, 8, 4, 8, 2.5f, unbiased, weights);
      for (int k = 0; k < 8; ++k) here += ids[k] >= offset && ids[k] < offset + 32;
      moved += !std::equal(ids, ids + 8, unbiased);
    }
    MESSAGE(w.name, ": ", here, " of ", seq * 8, " (token, expert) pairs on experts ", offset, "..", offset + 31);
    if (seq > 1) CHECK_MESSAGE(here > 0, w.name, " routes no token to this GPU's experts");
    pairs += seq * 8;
    local += here;
    tokens += seq;
  }
  const double share = static_cast<double>(local) / static_cast<double>(pairs);
  CHECK(share > 0.09);
  CHECK(share < 0.16);
  CHECK(moved > tokens * 9 / 10);
}
