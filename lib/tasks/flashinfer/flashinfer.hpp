// The flashinfer suite: the four FlashInfer-Bench definitions K-Search
// reports on, as built-in tasks (docs/tasks/flashinfer.md):
//
//   flashinfer/gqa_paged_decode_h32_kv4_d128_ps1
//   flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1
//   flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1
//   flashinfer/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048
//
// Each has its inputs and outputs in definition order (the argument order of
// a FlashInfer-Bench solution in destination-passing style), a trusted FP32
// CUDA reference, a CPU reference for small workloads, dataset-shaped
// workloads with a feedback subset, FLOP and byte formulas, a prompt, a
// straightforward starting kernel and a baseline kernel for vs_baseline
// scores. This header is internal to the library (tests, benchmarks and the
// dataset loader use it); users reach the tasks through ks::load_task.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/inputs.hpp"
#include "ksearch/task.hpp"

namespace ks::tasks::flashinfer {

inline constexpr std::string_view kPrefix = "flashinfer/";
inline constexpr std::string_view kGqaDecode = "gqa_paged_decode_h32_kv4_d128_ps1";
inline constexpr std::string_view kMlaDecode = "mla_paged_decode_h16_ckv512_kpe64_ps1";
inline constexpr std::string_view kMlaPrefill = "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1";
inline constexpr std::string_view kMoe = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048";

// The definition names (without the prefix) that have native tasks.
std::vector<std::string> definition_names();

// The complete task for a definition name (with or without the prefix), or
// nullopt when the suite has none.
std::optional<TaskSpec> make_spec(std::string_view definition);
TaskSpec make_gqa_decode_spec();
TaskSpec make_mla_decode_spec();
TaskSpec make_mla_prefill_spec();
TaskSpec make_moe_spec();

// Registers the four tasks with the registry.
void register_flashinfer_suite();

// CPU references, double precision, for small workloads: fills the output
// tensors of `tensors` (as core::generate_host_inputs returns them, or as
// downloaded from a device) from its inputs. `definition` as for make_spec.
// Throws ks::Error(Status::invalid_argument) for inconsistent inputs.
void cpu_reference(std::string_view definition, std::map<std::string, core::HostTensor>& tensors);

// The reference computations with their dimensions as arguments (the
// definitions fix them; hand-computed tests use smaller ones). bf16 as raw
// bits, outputs rounded to bf16 from double; lse in base 2.
struct PagedDecodeGqa {
  std::int64_t batch_size = 0, num_qo_heads = 0, num_kv_heads = 0, head_dim = 0;
  const std::uint16_t* q = nullptr;        // [batch, qo_heads, head_dim]
  const std::uint16_t* k_cache = nullptr;  // [pages, 1, kv_heads, head_dim]
  const std::uint16_t* v_cache = nullptr;
  const std::int32_t* kv_indptr = nullptr;
  const std::int32_t* kv_indices = nullptr;
  float sm_scale = 1;
};
void gqa_decode_cpu(const PagedDecodeGqa& p, std::uint16_t* output, float* lse);

// MLA over a paged latent cache. Decode (qo_indptr null): query b is request
// b's and attends all its entries. Prefill: request b's queries are
// qo_indptr[b] .. qo_indptr[b + 1] - 1; with `causal`, its i-th query (from 0)
// attends entry positions j <= kv_len - q_len + i. Values are the ckv rows.
struct PagedMla {
  std::int64_t num_requests = 0, num_qo_heads = 0, head_dim_ckv = 0, head_dim_kpe = 0;
  const std::int32_t* qo_indptr = nullptr;
  const std::uint16_t* q_nope = nullptr;     // [queries, heads, ckv]
  const std::uint16_t* q_pe = nullptr;       // [queries, heads, kpe]
  const std::uint16_t* ckv_cache = nullptr;  // [pages, 1, ckv]
  const std::uint16_t* kpe_cache = nullptr;  // [pages, 1, kpe]
  const std::int32_t* kv_indptr = nullptr;
  const std::int32_t* kv_indices = nullptr;
  float sm_scale = 1;
  bool causal = false;
};
void mla_paged_cpu(const PagedMla& p, std::uint16_t* output, float* lse);

// DeepSeek-V3 no-aux routing of one token, in float as the GPU kernels do
// (ties to the lower index): the top_k expert ids in order and their weights.
void moe_route_cpu(const float* logits, const std::uint16_t* bias, std::int64_t num_experts, std::int64_t n_group,
                   std::int64_t topk_group, std::int64_t top_k, float routed_scaling_factor, std::int32_t* ids,
                   float* weights);

// The fp8 block-scale MoE: routing as above, then double-precision GEMMs on
// elements dequantized with their block scales, SwiGLU, weighted sum, bf16.
struct MoeFp8 {
  std::int64_t seq_len = 0, num_experts = 256, num_local_experts = 32, hidden = 0, inter = 0, block = 128;
  std::int64_t n_group = 8, topk_group = 4, top_k = 8;
  const float* routing_logits = nullptr;       // [seq, experts]
  const std::uint16_t* routing_bias = nullptr;  // [experts] bf16
  const std::uint8_t* hidden_states = nullptr;  // [seq, hidden] e4m3
  const float* hidden_states_scale = nullptr;   // [hidden / block, seq]
  const std::uint8_t* gemm1_weights = nullptr;  // [local, 2 * inter, hidden]
  const float* gemm1_weights_scale = nullptr;   // [local, 2 * inter / block, hidden / block]
  const std::uint8_t* gemm2_weights = nullptr;  // [local, hidden, inter]
  const float* gemm2_weights_scale = nullptr;   // [local, hidden / block, inter / block]
  std::int64_t local_expert_offset = 0;
  float routed_scaling_factor = 1;
};
void moe_fp8_cpu(const MoeFp8& p, std::uint16_t* output);

}  // namespace ks::tasks::flashinfer
