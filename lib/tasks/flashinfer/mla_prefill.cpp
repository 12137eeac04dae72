// flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1: causal MLA prefill
// (DeepSeek-V3/R1, tensor parallelism 8) of new tokens on top of cached ones,
// over a paged latent cache: 16 heads, ckv 512, kpe 64, page_size 1.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "tasks/flashinfer/embedded.hpp"
#include "tasks/flashinfer/flashinfer.hpp"
#include "tasks/flashinfer/suite_common.hpp"

namespace ks::tasks::flashinfer {
namespace {

// One prefill workload: per request, the new tokens (q_len) and the tokens
// already cached before them (prefix); its KV length is q_len + prefix. The
// offsets are given as data (consistent between qo_indptr and kv_indptr);
// the page table is drawn per seed.
struct PrefillCase {
  std::string name;
  std::vector<std::pair<std::int64_t, std::int64_t>> requests;  // (q_len, prefix)
  bool benchmark = true;
  std::uint64_t seed = 0;
  double sm_scale = 0;
};

WorkloadSpec prefill_workload(const PrefillCase& c) {
  WorkloadSpec w;
  w.name = c.name;
  w.seed = c.seed;
  w.benchmark = c.benchmark;
  InputData qo, kv;
  qo.values.push_back(0);
  kv.values.push_back(0);
  for (const auto& [q_len, prefix] : c.requests) {
    qo.values.push_back(qo.values.back() + static_cast<double>(q_len));
    kv.values.push_back(kv.values.back() + static_cast<double>(q_len + prefix));
  }
  const auto total_q = static_cast<std::int64_t>(qo.values.back());
  const auto entries = static_cast<std::int64_t>(kv.values.back());
  w.dims = {{"num_qo_heads", 16}, {"head_dim_ckv", 512}, {"head_dim_kpe", 64}, {"page_size", 1},
            {"total_q", total_q}, {"num_pages", std::max<std::int64_t>(2 * entries, 16384)},
            {"len_indptr", static_cast<std::int64_t>(c.requests.size()) + 1}, {"num_kv_indices", entries}};
  w.data["qo_indptr"] = qo;
  w.data["kv_indptr"] = kv;
  if (c.sm_scale > 0) w.dist_overrides["sm_scale"] = constant(fmt::format("{:.17g}", c.sm_scale));
  return w;
}

}  // namespace

TaskSpec make_mla_prefill_spec() {
  TaskSpec spec;
  spec.name = std::string(kPrefix) + std::string(kMlaPrefill);
  spec.description = "FlashInfer-Bench mla_paged_prefill_causal_h16_ckv512_kpe64_ps1: DeepSeek MLA causal prefill over "
                     "a paged latent cache, bf16";
  spec.languages = {Language::cuda};
  spec.dims = {"num_qo_heads", "head_dim_ckv", "head_dim_kpe", "page_size", "total_q", "num_pages", "len_indptr",
               "num_kv_indices"};
  const DType bf16 = DType::bf16, i32 = DType::i32;
  Distribution pages;
  pages.kind = Distribution::Kind::permutation, pages.p0 = "num_pages";
  spec.tensors = {
      input("q_nope", bf16, {"total_q", "num_qo_heads", "head_dim_ckv"}),
      input("q_pe", bf16, {"total_q", "num_qo_heads", "head_dim_kpe"}),
      input("ckv_cache", bf16, {"num_pages", "page_size", "head_dim_ckv"}),
      input("kpe_cache", bf16, {"num_pages", "page_size", "head_dim_kpe"}),
      // Given as data by every workload (consistent with kv_indptr); the rule here is only a fallback.
      input("qo_indptr", i32, {"len_indptr"}),
      input("kv_indptr", i32, {"len_indptr"}),
      input("kv_indices", i32, {"num_kv_indices"}, pages),
      scalar("sm_scale", DType::f32, constant("1/sqrt(128 + 64)")),
      output("output", bf16, {"total_q", "num_qo_heads", "head_dim_ckv"}),
      output("lse", DType::f32, {"total_q", "num_qo_heads"}),
  };
  // Chunked prefill as a server sees it: fresh prompts (no prefix), prompt
  // chunks on top of long cached prefixes, and ragged mixes.
  const std::vector<PrefillCase> cases = {
      {"edge_q1", {{1, 0}}, false, 301},
      {"edge_ragged_small", {{1, 0}, {3, 4}, {2, 1}, {5, 0}}, false, 302, 0.3},
      {"bs1_q512", {{512, 0}}, true, 303},
      {"bs1_q128_prefix2048", {{128, 2048}}, true, 304},
      {"bs1_q1024_prefix4096", {{1024, 4096}}, true, 305, 0.1},
      {"bs1_q4096", {{4096, 0}}, true, 306},
      {"bs2_q2048", {{2048, 0}, {2048, 0}}, true, 307},
      {"bs4_q256_prefix1024", {{256, 1024}, {256, 1024}, {256, 1024}, {256, 1024}}, true, 308},
      {"bs8_q64_prefix512", {{64, 512}, {64, 640}, {64, 384}, {64, 512}, {64, 700}, {64, 300}, {64, 512}, {64, 512}},
       true, 309, 0.0625},
      {"bs8_ragged", {{17, 0}, {300, 1200}, {1000, 0}, {5, 3000}, {64, 64}, {128, 2000}, {700, 100}, {33, 900}},
       true, 310},
      {"bs16_q32_prefix2048", std::vector<std::pair<std::int64_t, std::int64_t>>(16, {32, 2048}), true, 311},
  };
  for (const auto& c : cases) spec.workloads.push_back(prefill_workload(c));
  spec.feedback_workloads = {"edge_ragged_small", "bs1_q512", "bs1_q1024_prefix4096", "bs4_q256_prefix1024",
                             "bs8_ragged", "bs16_q32_prefix2048"};
  spec.tolerance = flashinfer_tolerance();
  // A lower bound: per-request lengths are data, not axes, so the formula
  // counts one entry per query (each query sees at least itself); the
  // speed-of-light bound then rests on the memory term.
  spec.flops = "2 * num_qo_heads * total_q * (2 * head_dim_ckv + head_dim_kpe)";
  spec.bytes = "2 * num_kv_indices * (head_dim_ckv + head_dim_kpe) + 2 * total_q * num_qo_heads * (2 * head_dim_ckv + "
               "head_dim_kpe) + 4 * total_q * num_qo_heads + 4 * (2 * len_indptr + num_kv_indices)";
  spec.score = ScoreMode::vs_baseline;
  spec.references[Language::cuda] = cuda_solution(
      "mla-prefill-reference-fp32", spec.name, "mla_prefill_reference.cu", embedded::mla_prefill_reference_cu,
      embedded::mla_prefill_reference_plan_json,
      "Trusted FP32 reference: one block per query token, the 16 heads walking the query's causally visible "
      "entries in tiles gathered through the page table, an online softmax per head with every reduction in a "
      "fixed order; base-2 lse; bf16 output rounded to nearest even.");
  spec.baselines[Language::cuda] = cuda_solution(
      "mla-prefill-baseline-tiled", spec.name, "mla_prefill_baseline.cu", embedded::mla_prefill_baseline_cu,
      embedded::mla_prefill_baseline_plan_json,
      "Baseline for vs_baseline: libksearch's hand-written tiled kernel, one block per query token with the 16 "
      "heads sharing each 32-row tile (bf16 in shared memory), softmax in base 2. Not FlashInfer's own kernel; "
      "import FlashInfer's latencies per card with --baseline-latencies.");
  spec.starting_points.push_back(cuda_solution(
      "mla-prefill-warp-per-head (starting point)", spec.name, "mla_prefill_start.cu", embedded::mla_prefill_start_cu,
      embedded::mla_prefill_start_plan_json,
      "Straightforward starting kernel: one warp per (query token, head) walking the causally visible entries "
      "with an online softmax; nothing shared between heads or queries."));
  spec.prompts[Language::cuda] = std::string(embedded::mla_prefill_md);
  spec.targets = Json::obj(
      {{"metric", "mean over workloads of baseline latency / candidate latency (K-Search's score; the paper "
                  "reports it x100)"},
       {"baseline", "libksearch's tiled MLA prefill kernel on the same GPU (FlashInfer's own latencies can be "
                    "imported per card)"},
       {"k_search", "K-Search evaluated this definition on an H100 against FlashInfer's flashinfer_wrapper_ea3787 "
                    "baseline (caoshiyi/K-Search)"}});
  add_python_languages(spec);
  return spec;
}

}  // namespace ks::tasks::flashinfer
