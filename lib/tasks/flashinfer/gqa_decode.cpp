// flashinfer/gqa_paged_decode_h32_kv4_d128_ps1: grouped-query attention decode
// over a paged KV cache (32 q heads, 4 KV heads, head_dim 128, page_size 1).
#include <cmath>

#include "tasks/flashinfer/embedded.hpp"
#include "tasks/flashinfer/flashinfer.hpp"
#include "tasks/flashinfer/suite_common.hpp"

namespace ks::tasks::flashinfer {

TaskSpec make_gqa_decode_spec() {
  TaskSpec spec;
  spec.name = std::string(kPrefix) + std::string(kGqaDecode);
  spec.description = "FlashInfer-Bench gqa_paged_decode_h32_kv4_d128_ps1: GQA decode over a paged KV cache, bf16";
  spec.languages = {Language::cuda};
  spec.dims = {"batch_size", "num_qo_heads", "num_kv_heads", "head_dim", "num_pages", "page_size", "len_indptr",
               "num_kv_indices"};
  const DType bf16 = DType::bf16, i32 = DType::i32;
  Distribution indptr, pages;
  indptr.kind = Distribution::Kind::indptr, indptr.p0 = "num_kv_indices", indptr.p1 = "1";
  pages.kind = Distribution::Kind::permutation, pages.p0 = "num_pages";
  spec.tensors = {
      input("q", bf16, {"batch_size", "num_qo_heads", "head_dim"}),
      input("k_cache", bf16, {"num_pages", "page_size", "num_kv_heads", "head_dim"}),
      input("v_cache", bf16, {"num_pages", "page_size", "num_kv_heads", "head_dim"}),
      input("kv_indptr", i32, {"len_indptr"}, indptr),
      input("kv_indices", i32, {"num_kv_indices"}, pages),
      scalar("sm_scale", DType::f32, constant("1/sqrt(128)")),
      output("output", bf16, {"batch_size", "num_qo_heads", "head_dim"}),
      output("lse", DType::f32, {"batch_size", "num_qo_heads"}),
  };
  const std::map<std::string, std::int64_t> consts{
      {"num_qo_heads", 32}, {"num_kv_heads", 4}, {"head_dim", 128}, {"page_size", 1}};
  // Batch sizes and lengths of served decode steps: small batches of long
  // requests to large batches of short ones. Two edge cases with
  // single-entry requests check what the timed shapes do not.
  const PagedCase cases[] = {
      {"edge_bs3_short", 3, 2, false, 101},
      {"edge_bs1_kv1", 1, 1, false, 102},
      {"bs1_kv512", 1, 512, true, 103},
      {"bs1_kv4096", 1, 4096, true, 104, 0.1},
      {"bs1_kv16384", 1, 16384, true, 105},
      {"bs4_kv1024", 4, 1024, true, 106},
      {"bs8_kv2048", 8, 2048, true, 107},
      {"bs16_kv512", 16, 512, true, 108},
      {"bs16_kv4096", 16, 4096, true, 109},
      {"bs32_kv1024", 32, 1024, true, 110, 0.0625},
      {"bs64_kv256", 64, 256, true, 111},
      {"bs64_kv2048", 64, 2048, true, 112},
      {"bs128_kv512", 128, 512, true, 113},
      {"bs256_kv128", 256, 128, true, 114},
  };
  for (const auto& c : cases) spec.workloads.push_back(paged_workload(c, consts));
  spec.feedback_workloads = {"edge_bs3_short", "bs1_kv4096", "bs8_kv2048", "bs32_kv1024", "bs64_kv2048",
                             "bs128_kv512"};
  spec.tolerance = flashinfer_tolerance();
  // QK^T and PV: two multiply-adds per (q head, dimension, KV entry).
  spec.flops = "4 * num_qo_heads * head_dim * num_kv_indices";
  // K and V rows once, q and the outputs once, the page table.
  spec.bytes = "2 * 2 * num_kv_indices * num_kv_heads * head_dim + 2 * 2 * batch_size * num_qo_heads * head_dim"
               " + 4 * batch_size * num_qo_heads + 4 * (len_indptr + num_kv_indices)";
  spec.score = ScoreMode::vs_baseline;
  spec.references[Language::cuda] = cuda_solution(
      "gqa-decode-reference-fp32", spec.name, "gqa_decode_reference.cu", embedded::gqa_decode_reference_cu,
      embedded::gqa_decode_reference_plan_json,
      "Trusted FP32 reference: logits for every KV entry, then per (request, q head) a max/sum pass and an "
      "output pass, every reduction in a fixed order; base-2 lse; bf16 output rounded to nearest even.");
  spec.baselines[Language::cuda] = cuda_solution(
      "gqa-decode-baseline-split-kv", spec.name, "gqa_decode_baseline.cu", embedded::gqa_decode_baseline_cu,
      embedded::gqa_decode_baseline_plan_json,
      "Baseline for vs_baseline: libksearch's hand-written split-KV (flash decoding) kernel, one block per "
      "(split, KV head, request) sharing K/V rows across the 8 q heads of a group, plus a combine kernel. "
      "Not FlashInfer's own kernel; import FlashInfer's latencies per card with --baseline-latencies.");
  Solution start = cuda_solution(
      "gqa-decode-warp-per-head (starting point)", spec.name, "gqa_decode_start.cu", embedded::gqa_decode_start_cu,
      embedded::gqa_decode_start_plan_json,
      "Straightforward starting kernel: one warp per (request, q head), an online softmax over the request's "
      "entries read through the page table; no K/V sharing across the group, no split of long requests.");
  spec.starting_points.push_back(start);
  spec.prompts[Language::cuda] = std::string(embedded::gqa_decode_md);
  spec.targets = Json::obj(
      {{"metric", "mean over workloads of baseline latency / candidate latency (K-Search's score; the paper "
                  "reports it x100)"},
       {"baseline", "libksearch's split-KV decode kernel on the same GPU (FlashInfer's own latencies can be "
                    "imported per card)"},
       {"k_search", "K-Search evaluated this definition on an H100 against FlashInfer's "
                    "flashinfer_wrapper_78fd04 baseline (caoshiyi/K-Search)"}});
  add_python_languages(spec);
  return spec;
}

}  // namespace ks::tasks::flashinfer
