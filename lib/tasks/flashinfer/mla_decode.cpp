// flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1: multi-head latent
// attention decode (DeepSeek-V3/R1 under tensor parallelism 8) over a paged
// compressed KV cache: 16 heads, a 512-wide latent (ckv, also the values)
// and a 64-wide rotary part (kpe), page_size 1.
#include "tasks/flashinfer/embedded.hpp"
#include "tasks/flashinfer/flashinfer.hpp"
#include "tasks/flashinfer/suite_common.hpp"

namespace ks::tasks::flashinfer {

TaskSpec make_mla_decode_spec() {
  TaskSpec spec;
  spec.name = std::string(kPrefix) + std::string(kMlaDecode);
  spec.description =
      "FlashInfer-Bench mla_paged_decode_h16_ckv512_kpe64_ps1: DeepSeek MLA decode over a paged latent cache, bf16";
  spec.languages = {Language::cuda};
  spec.dims = {"batch_size", "num_qo_heads", "head_dim_ckv", "head_dim_kpe", "page_size", "num_pages", "len_indptr",
               "num_kv_indices"};
  const DType bf16 = DType::bf16, i32 = DType::i32;
  Distribution indptr, pages;
  indptr.kind = Distribution::Kind::indptr, indptr.p0 = "num_kv_indices", indptr.p1 = "1";
  pages.kind = Distribution::Kind::permutation, pages.p0 = "num_pages";
  spec.tensors = {
      input("q_nope", bf16, {"batch_size", "num_qo_heads", "head_dim_ckv"}),
      input("q_pe", bf16, {"batch_size", "num_qo_heads", "head_dim_kpe"}),
      input("ckv_cache", bf16, {"num_pages", "page_size", "head_dim_ckv"}),
      input("kpe_cache", bf16, {"num_pages", "page_size", "head_dim_kpe"}),
      input("kv_indptr", i32, {"len_indptr"}, indptr),
      input("kv_indices", i32, {"num_kv_indices"}, pages),
      scalar("sm_scale", DType::f32, constant("1/sqrt(128 + 64)")),
      output("output", bf16, {"batch_size", "num_qo_heads", "head_dim_ckv"}),
      output("lse", DType::f32, {"batch_size", "num_qo_heads"}),
  };
  const std::map<std::string, std::int64_t> consts{
      {"num_qo_heads", 16}, {"head_dim_ckv", 512}, {"head_dim_kpe", 64}, {"page_size", 1}};
  const PagedCase cases[] = {
      {"edge_bs3_short", 3, 2, false, 201},
      {"edge_bs1_kv1", 1, 1, false, 202},
      {"bs1_kv1024", 1, 1024, true, 203},
      {"bs1_kv8192", 1, 8192, true, 204, 0.1},
      {"bs4_kv4096", 4, 4096, true, 205},
      {"bs8_kv1024", 8, 1024, true, 206},
      {"bs16_kv2048", 16, 2048, true, 207},
      {"bs32_kv512", 32, 512, true, 208, 0.0625},
      {"bs32_kv4096", 32, 4096, true, 209},
      {"bs64_kv1024", 64, 1024, true, 210},
      {"bs128_kv256", 128, 256, true, 211},
      {"bs128_kv2048", 128, 2048, true, 212},
  };
  for (const auto& c : cases) spec.workloads.push_back(paged_workload(c, consts));
  spec.feedback_workloads = {"edge_bs3_short", "bs1_kv8192", "bs8_kv1024", "bs32_kv512", "bs64_kv1024",
                             "bs128_kv2048"};
  spec.tolerance = flashinfer_tolerance();
  // QK over ckv and kpe, PV over ckv: multiply-adds per (head, KV entry).
  spec.flops = "2 * num_qo_heads * num_kv_indices * (2 * head_dim_ckv + head_dim_kpe)";
  spec.bytes = "2 * num_kv_indices * (head_dim_ckv + head_dim_kpe) + 2 * batch_size * num_qo_heads * (2 * head_dim_ckv + "
               "head_dim_kpe) + 4 * batch_size * num_qo_heads + 4 * (len_indptr + num_kv_indices)";
  spec.score = ScoreMode::vs_baseline;
  spec.references[Language::cuda] = cuda_solution(
      "mla-decode-reference-fp32", spec.name, "mla_decode_reference.cu", embedded::mla_decode_reference_cu,
      embedded::mla_decode_reference_plan_json,
      "Trusted FP32 reference: logits for every KV entry (576-wide dot products), then per (request, head) a "
      "max/sum pass and an output pass over the ckv rows, every reduction in a fixed order; base-2 lse; bf16 "
      "output rounded to nearest even.");
  spec.baselines[Language::cuda] = cuda_solution(
      "mla-decode-baseline-split-kv", spec.name, "mla_decode_baseline.cu", embedded::mla_decode_baseline_cu,
      embedded::mla_decode_baseline_plan_json,
      "Baseline for vs_baseline: libksearch's hand-written split-KV kernel, one block per (split, request) with "
      "one warp per head walking the same rows (read once from DRAM), 16-byte loads, plus a combine kernel. Not "
      "FlashInfer's own kernel; import FlashInfer's latencies per card with --baseline-latencies.");
  spec.starting_points.push_back(cuda_solution(
      "mla-decode-warp-per-head (starting point)", spec.name, "mla_decode_start.cu", embedded::mla_decode_start_cu,
      embedded::mla_decode_start_plan_json,
      "Straightforward starting kernel: one warp per (request, head), an online softmax over the request's "
      "entries read through the page table; no row sharing across heads, no split of long requests."));
  spec.prompts[Language::cuda] = std::string(embedded::mla_decode_md);
  spec.targets = Json::obj(
      {{"metric", "mean over workloads of baseline latency / candidate latency (K-Search's score; the paper "
                  "reports it x100)"},
       {"baseline", "libksearch's split-KV MLA decode kernel on the same GPU (FlashInfer's own latencies can be "
                    "imported per card)"},
       {"k_search", "K-Search evaluated this definition on an H100 against FlashInfer's flashinfer_wrapper_03f7b0 "
                    "baseline (caoshiyi/K-Search)"}});
  add_python_languages(spec);
  return spec;
}

}  // namespace ks::tasks::flashinfer
