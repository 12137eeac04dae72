// flashinfer/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048: a
// straightforward correct starting kernel (a starting point, not a tuned
// result). Three kernels:
//
//   1. moe_start_route  one thread per token: DeepSeek-V3 no-aux routing, serially
//   2. moe_start_gemm1  per (token, slot) whose expert is local and 8 intermediate columns:
//                       one warp per column walks the 7168-long rows of A and W13 (fp8
//                       decoded and block-scaled on the fly), then C = silu(x2) * x1
//   3. moe_start_gemm2  per (token, 8 hidden columns): one warp per column sums, over the
//                       token's local slots, weight * (C . W2 row), and writes bf16
//
// Every (token, slot) pair reads its expert's weights again: no grouping of
// tokens by expert, no tensor cores.

#define EXPERTS 256
#define TOPK 8
#define GROUPS 8
#define TOPK_GROUPS 4
#ifndef HIDDEN
#define HIDDEN 7168
#endif
#ifndef INTER
#define INTER 2048
#endif
#define HBLOCKS (HIDDEN / 128)
#define IBLOCKS (INTER / 128)
#define G1BLOCKS (2 * INTER / 128)

#include "cuda_helpers/bf16_to_f32.cuh"

#include "cuda_helpers/f32_to_bf16.cuh"

#include "cuda_helpers/fp8_e4m3.cuh"

extern "C" __global__ void moe_start_route(const float* __restrict__ routing_logits,
                                           const unsigned short* __restrict__ routing_bias,
                                           float routed_scaling_factor, int* __restrict__ topk_ids,
                                           float* __restrict__ topk_w, int seq_len) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= seq_len) return;
  const float* logits = routing_logits + (long long)t * EXPERTS;
  const float neg_inf = -__int_as_float(0x7f800000);
  float gscore[GROUPS];
  for (int g = 0; g < GROUPS; ++g) {
    float a = neg_inf, b = neg_inf;  // the two largest sb of the group
    for (int e = g * 32; e < g * 32 + 32; ++e) {
      const float sb = 1.f / (1.f + expf(-logits[e])) + bf16_to_f32(routing_bias[e]);
      if (sb > a) b = a, a = sb;
      else if (sb > b) b = sb;
    }
    gscore[g] = a + b;
  }
  unsigned kept = 0;
  for (int r = 0; r < TOPK_GROUPS; ++r) {
    int best = -1;
    for (int g = 0; g < GROUPS; ++g)
      if (!(kept >> g & 1u) && (best < 0 || gscore[g] > gscore[best])) best = g;
    kept |= 1u << best;
  }
  int ids[TOPK];
  float sum = 0.f;
  for (int k = 0; k < TOPK; ++k) {
    int best = -1;
    float best_v = neg_inf;
    for (int e = 0; e < EXPERTS; ++e) {
      if (!(kept >> (e / 32) & 1u)) continue;
      bool taken = false;
      for (int j = 0; j < k; ++j) taken = taken || ids[j] == e;
      if (taken) continue;
      const float sb = 1.f / (1.f + expf(-logits[e])) + bf16_to_f32(routing_bias[e]);
      if (best < 0 || sb > best_v) best = e, best_v = sb;
    }
    ids[k] = best;
    sum += 1.f / (1.f + expf(-logits[best]));
  }
  for (int k = 0; k < TOPK; ++k) {
    topk_ids[t * TOPK + k] = ids[k];
    topk_w[t * TOPK + k] = 1.f / (1.f + expf(-logits[ids[k]])) / (sum + 1e-20f) * routed_scaling_factor;
  }
}

extern "C" __global__ void moe_start_gemm1(const unsigned char* __restrict__ hidden_states,
                                           const float* __restrict__ hidden_states_scale,
                                           const unsigned char* __restrict__ gemm1_weights,
                                           const float* __restrict__ gemm1_weights_scale,
                                           const int* __restrict__ topk_ids, int local_expert_offset,
                                           float* __restrict__ inter, int seq_len) {
  const int pair = blockIdx.x;  // token * TOPK + slot
  const int t = pair / TOPK;
  const int le = topk_ids[pair] - local_expert_offset;
  if (le < 0 || le >= 32) return;  // not a local expert: nothing to compute
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i = blockIdx.y * 8 + warp;
  const unsigned char* x = hidden_states + (long long)t * HIDDEN;
  const unsigned char* w1 = gemm1_weights + ((long long)le * 2 * INTER + i) * HIDDEN;
  const unsigned char* w2 = gemm1_weights + ((long long)le * 2 * INTER + INTER + i) * HIDDEN;
  const float* s1 = gemm1_weights_scale + ((long long)le * G1BLOCKS + i / 128) * HBLOCKS;
  const float* s2 = gemm1_weights_scale + ((long long)le * G1BLOCKS + (INTER + i) / 128) * HBLOCKS;
  float x1 = 0.f, x2 = 0.f;
  for (int k = lane * 4; k < HIDDEN; k += 128) {
    const float as = hidden_states_scale[(long long)(k / 128) * seq_len + t];
    const unsigned xa = *reinterpret_cast<const unsigned*>(x + k);
    const unsigned wa = *reinterpret_cast<const unsigned*>(w1 + k);
    const unsigned wb = *reinterpret_cast<const unsigned*>(w2 + k);
    for (int j = 0; j < 4; ++j) {
      const float a = fp8_e4m3(xa >> (8 * j) & 0xffu) * as;
      x1 += a * (fp8_e4m3(wa >> (8 * j) & 0xffu) * s1[k / 128]);
      x2 += a * (fp8_e4m3(wb >> (8 * j) & 0xffu) * s2[k / 128]);
    }
  }
  for (int o = 16; o > 0; o /= 2) {
    x1 += __shfl_xor_sync(0xffffffffu, x1, o);
    x2 += __shfl_xor_sync(0xffffffffu, x2, o);
  }
  if (lane == 0) inter[(long long)pair * INTER + i] = x2 / (1.f + expf(-x2)) * x1;
}

extern "C" __global__ void moe_start_gemm2(const float* __restrict__ inter, const unsigned char* __restrict__ gemm2_weights,
                                           const float* __restrict__ gemm2_weights_scale,
                                           const int* __restrict__ topk_ids, const float* __restrict__ topk_w,
                                           int local_expert_offset, unsigned short* __restrict__ output) {
  const int t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.y * 8 + warp;
  float out = 0.f;
  for (int k = 0; k < TOPK; ++k) {
    const int le = topk_ids[t * TOPK + k] - local_expert_offset;
    if (le < 0 || le >= 32) continue;
    const float* c = inter + (long long)(t * TOPK + k) * INTER;
    const unsigned char* w = gemm2_weights + ((long long)le * HIDDEN + h) * INTER;
    const float* s = gemm2_weights_scale + ((long long)le * HBLOCKS + h / 128) * IBLOCKS;
    float dot = 0.f;
    for (int i = lane * 4; i < INTER; i += 128) {
      const unsigned wa = *reinterpret_cast<const unsigned*>(w + i);
      for (int j = 0; j < 4; ++j) dot += c[i + j] * (fp8_e4m3(wa >> (8 * j) & 0xffu) * s[(i + j) / 128]);
    }
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    out += topk_w[t * TOPK + k] * dot;
  }
  if (lane == 0) output[(long long)t * HIDDEN + h] = f32_to_bf16(out);
}
