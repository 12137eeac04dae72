// flashinfer/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048: the
// trusted reference.
//
// FP32 arithmetic, every element dequantized as the definition writes it
// (value x its 128-block scale) before it is multiplied, every sum in a
// fixed order, so a run gives the same result every time. Kernels, launched
// in order by moe_reference_plan.json:
//
//   1. moe_ref_route    per token: DeepSeek-V3 no-aux routing. s = sigmoid(logits),
//                       sb = s + bias; group score = sum of the top-2 sb of each of the 8
//                       groups of 32 experts; keep the top-4 groups; the top-8 experts of
//                       the kept groups by sb; weights = s / (sum of the 8 s + 1e-20) *
//                       routed_scaling_factor. Ties go to the lower index.
//   2. moe_ref_count    per local expert: how many tokens picked it
//   3. moe_ref_list     per local expert: its (token, slot) pairs in token order, at rows
//                       offset(expert) .. of the compact pair arrays; row_of[token * 8 + slot]
//   4. moe_ref_gemm1    per local expert and tile: G1 = A @ W13^T for its pairs, then
//                       C = silu(G1[:, 2048:]) * G1[:, :2048]
//   5. moe_ref_gemm2    O = C @ W2^T
//   6. moe_ref_combine  output[t] = sum over the token's local slots, in slot order, of
//                       weight * O[row], rounded to bf16; 0 where no slot is local
//
// fp8 (E4M3FN) and bf16 are decoded from their bits here; no header needed.

#define EXPERTS 256
#define TOPK 8
#define GROUPS 8
#define TOPK_GROUPS 4
// The GEMM sizes may be overridden (-D) for tests of the logic on small shapes.
#ifndef HIDDEN
#define HIDDEN 7168
#endif
#ifndef INTER
#define INTER 2048
#endif
#define G1OUT (2 * INTER)
#define HBLOCKS (HIDDEN / 128)
#define IBLOCKS (INTER / 128)
#define G1BLOCKS (G1OUT / 128)

#include "cuda_helpers/ref_bf16.cuh"

#include "cuda_helpers/ref_to_bf16.cuh"

// E4M3FN: sign, 4 exponent bits (bias 7), 3 mantissa bits; 0x7F/0xFF are NaN.
__device__ __forceinline__ float ref_fp8(unsigned char b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 0) v = (float)m * 0.001953125f;                           // m * 2^-9
  else if (e == 15 && m == 7) v = __int_as_float(0x7fc00000);
  else v = __uint_as_float((unsigned)(e + 120) << 23 | (unsigned)m << 20);  // (1 + m/8) * 2^(e-7)
  return (b & 0x80) ? -v : v;
}

// ---------------------------------------------------------------------------
// Routing: one block of 256 threads (one per expert) per token.

extern "C" __global__ void moe_ref_route(const float* __restrict__ routing_logits,
                                         const unsigned short* __restrict__ routing_bias,
                                         float routed_scaling_factor, int* __restrict__ topk_ids,
                                         float* __restrict__ topk_w) {
  __shared__ float red_v[EXPERTS];
  __shared__ int red_i[EXPERTS];
  __shared__ float group_score[GROUPS];
  __shared__ int keep[GROUPS];
  __shared__ int chosen[TOPK];
  const int t = blockIdx.x, e = threadIdx.x, lane = e % 32, g = e / 32;
  const float neg_inf = -__int_as_float(0x7f800000);
  const float s = 1.f / (1.f + expf(-routing_logits[(long long)t * EXPERTS + e]));
  const float sb = s + ref_bf16(routing_bias[e]);
  // Top-2 of the group (its warp): the best, then the best of the rest.
  float v = sb;
  int idx = e;
  for (int o = 16; o > 0; o /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) v = ov, idx = oi;
  }
  const float first = v;
  const int first_i = idx;
  v = e == first_i ? neg_inf : sb;
  idx = e;
  for (int o = 16; o > 0; o /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) v = ov, idx = oi;
  }
  if (lane == 0) group_score[g] = first + v;
  __syncthreads();
  if (e == 0) {
    for (int k = 0; k < GROUPS; ++k) keep[k] = 0;
    for (int r = 0; r < TOPK_GROUPS; ++r) {
      int best = -1;
      for (int k = 0; k < GROUPS; ++k)
        if (!keep[k] && (best < 0 || group_score[k] > group_score[best])) best = k;
      keep[best] = 1;
    }
  }
  __syncthreads();
  float cand = keep[g] ? sb : neg_inf;
  for (int k = 0; k < TOPK; ++k) {
    red_v[e] = cand;
    red_i[e] = e;
    __syncthreads();
    for (int stride = EXPERTS / 2; stride > 0; stride /= 2) {
      if (e < stride) {
        const float ov = red_v[e + stride];
        const int oi = red_i[e + stride];
        if (ov > red_v[e] || (ov == red_v[e] && oi < red_i[e])) red_v[e] = ov, red_i[e] = oi;
      }
      __syncthreads();
    }
    if (e == 0) chosen[k] = red_i[0];
    if (e == red_i[0]) cand = neg_inf;
    __syncthreads();
  }
  // Weights from s without the bias, normalised over the chosen eight.
  red_v[e] = s;
  __syncthreads();
  if (e == 0) {
    float sum = 0.f;
    for (int k = 0; k < TOPK; ++k) sum += red_v[chosen[k]];
    for (int k = 0; k < TOPK; ++k) {
      topk_ids[t * TOPK + k] = chosen[k];
      topk_w[t * TOPK + k] = red_v[chosen[k]] / (sum + 1e-20f) * routed_scaling_factor;
    }
  }
}

// ---------------------------------------------------------------------------
// Grouping the (token, slot) pairs by local expert, in token order.

__device__ int ref_local_slot(const int* __restrict__ topk_ids, int t, int global_expert) {
  for (int k = 0; k < TOPK; ++k)
    if (topk_ids[t * TOPK + k] == global_expert) return k;
  return -1;
}

// One block of 256 threads per local expert.
extern "C" __global__ void moe_ref_count(const int* __restrict__ topk_ids, int local_expert_offset,
                                         int* __restrict__ counts, int seq_len) {
  __shared__ int red[256];
  const int le = blockIdx.x;
  int n = 0;
  for (int t = threadIdx.x; t < seq_len; t += 256) n += ref_local_slot(topk_ids, t, local_expert_offset + le) >= 0;
  red[threadIdx.x] = n;
  __syncthreads();
  for (int s = 128; s > 0; s /= 2) {
    if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[le] = red[0];
}

__device__ __forceinline__ int ref_offset(const int* __restrict__ counts, int le) {
  int off = 0;
  for (int k = 0; k < le; ++k) off += counts[k];
  return off;
}

// One block of 256 threads per local expert: an ordered compaction of its
// tokens, 256 at a time. row_of holds -1 for slots that are not local (set
// by the first block beforehand: moe_ref_clear).
extern "C" __global__ void moe_ref_clear(int* __restrict__ row_of, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) row_of[i] = -1;
}

extern "C" __global__ void moe_ref_list(const int* __restrict__ topk_ids, int local_expert_offset,
                                        const int* __restrict__ counts, int* __restrict__ pair_of_row,
                                        int* __restrict__ row_of, int seq_len) {
  __shared__ int scan[256];
  const int le = blockIdx.x;
  int base = ref_offset(counts, le);
  for (int t0 = 0; t0 < seq_len; t0 += 256) {
    const int t = t0 + threadIdx.x;
    const int k = t < seq_len ? ref_local_slot(topk_ids, t, local_expert_offset + le) : -1;
    scan[threadIdx.x] = k >= 0;
    __syncthreads();
    // Inclusive scan (Hillis-Steele), then each hit takes its position.
    for (int s = 1; s < 256; s *= 2) {
      const int add = (int)threadIdx.x >= s ? scan[threadIdx.x - s] : 0;
      __syncthreads();
      scan[threadIdx.x] += add;
      __syncthreads();
    }
    if (k >= 0) {
      const int row = base + scan[threadIdx.x] - 1;
      pair_of_row[row] = t * TOPK + k;
      row_of[t * TOPK + k] = row;
    }
    const int total = scan[255];
    __syncthreads();
    base += total;
  }
}

// ---------------------------------------------------------------------------
// GEMMs over a tile of 32 pair rows of one local expert (grid.z), 256 threads.

#define TM 32
#define KC 32

// Columns n0 .. n0 + 31 of X1 and the same columns of X2 (n0 + 2048 ..):
// thread (r = tid / 8, c4 = tid % 8) owns rows r, columns c4 * 4 .. + 3 of both.
extern "C" __global__ void moe_ref_gemm1(const unsigned char* __restrict__ hidden_states,
                                         const float* __restrict__ hidden_states_scale,
                                         const unsigned char* __restrict__ gemm1_weights,
                                         const float* __restrict__ gemm1_weights_scale,
                                         const int* __restrict__ counts, const int* __restrict__ pair_of_row,
                                         float* __restrict__ inter, int seq_len) {
  __shared__ float a_s[TM][KC + 1];
  __shared__ float w_s[64][KC + 1];  // rows 0..31: X1 columns, 32..63: X2 columns
  const int le = blockIdx.z, m0 = blockIdx.y * TM, n0 = blockIdx.x * 32;
  const int count = counts[le];
  if (m0 >= count) return;
  const int off = ref_offset(counts, le);
  const int tid = threadIdx.x, r = tid / 8, c4 = tid % 8;
  float acc1[4] = {0.f, 0.f, 0.f, 0.f}, acc2[4] = {0.f, 0.f, 0.f, 0.f};
  const unsigned char* w_e = gemm1_weights + (long long)le * G1OUT * HIDDEN;
  const float* ws_e = gemm1_weights_scale + (long long)le * G1BLOCKS * HBLOCKS;
  for (int k0 = 0; k0 < HIDDEN; k0 += KC) {
    const int kb = k0 / 128;
    for (int e = tid; e < TM * KC; e += 256) {
      const int rr = e / KC, kk = e % KC;
      float v = 0.f;
      if (m0 + rr < count) {
        const int token = pair_of_row[off + m0 + rr] / TOPK;
        v = ref_fp8(hidden_states[(long long)token * HIDDEN + k0 + kk]) *
            hidden_states_scale[(long long)kb * seq_len + token];
      }
      a_s[rr][kk] = v;
    }
    for (int e = tid; e < 64 * KC; e += 256) {
      const int rr = e / KC, kk = e % KC;
      const int n = rr < 32 ? n0 + rr : INTER + n0 + rr - 32;
      w_s[rr][kk] = ref_fp8(w_e[(long long)n * HIDDEN + k0 + kk]) * ws_e[(n / 128) * HBLOCKS + kb];
    }
    __syncthreads();
    for (int kk = 0; kk < KC; ++kk) {
      const float a = a_s[r][kk];
      for (int j = 0; j < 4; ++j) {
        acc1[j] += a * w_s[c4 * 4 + j][kk];
        acc2[j] += a * w_s[32 + c4 * 4 + j][kk];
      }
    }
    __syncthreads();
  }
  if (m0 + r < count)
    for (int j = 0; j < 4; ++j) {
      const float x1 = acc1[j], x2 = acc2[j];
      inter[(long long)(off + m0 + r) * INTER + n0 + c4 * 4 + j] = x2 / (1.f + expf(-x2)) * x1;
    }
}

// Columns h0 .. h0 + 63 of O: thread (r = tid / 8, c8 = tid % 8) owns row r,
// columns c8 * 8 .. + 7.
extern "C" __global__ void moe_ref_gemm2(const float* __restrict__ inter, const unsigned char* __restrict__ gemm2_weights,
                                         const float* __restrict__ gemm2_weights_scale,
                                         const int* __restrict__ counts, float* __restrict__ o) {
  __shared__ float c_s[TM][KC + 1];
  __shared__ float w_s[64][KC + 1];
  const int le = blockIdx.z, m0 = blockIdx.y * TM, h0 = blockIdx.x * 64;
  const int count = counts[le];
  if (m0 >= count) return;
  const int off = ref_offset(counts, le);
  const int tid = threadIdx.x, r = tid / 8, c8 = tid % 8;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  const unsigned char* w_e = gemm2_weights + (long long)le * HIDDEN * INTER;
  const float* ws_e = gemm2_weights_scale + (long long)le * HBLOCKS * IBLOCKS;
  for (int k0 = 0; k0 < INTER; k0 += KC) {
    for (int e = tid; e < TM * KC; e += 256) {
      const int rr = e / KC, kk = e % KC;
      c_s[rr][kk] = m0 + rr < count ? inter[(long long)(off + m0 + rr) * INTER + k0 + kk] : 0.f;
    }
    for (int e = tid; e < 64 * KC; e += 256) {
      const int rr = e / KC, kk = e % KC;
      const int h = h0 + rr;
      w_s[rr][kk] = ref_fp8(w_e[(long long)h * INTER + k0 + kk]) * ws_e[(h / 128) * IBLOCKS + (k0 + kk) / 128];
    }
    __syncthreads();
    for (int kk = 0; kk < KC; ++kk) {
      const float c = c_s[r][kk];
      for (int j = 0; j < 8; ++j) acc[j] += c * w_s[c8 * 8 + j][kk];
    }
    __syncthreads();
  }
  if (m0 + r < count)
    for (int j = 0; j < 8; ++j) o[(long long)(off + m0 + r) * HIDDEN + h0 + c8 * 8 + j] = acc[j];
}

// One block of 256 threads per token.
extern "C" __global__ void moe_ref_combine(const float* __restrict__ o, const int* __restrict__ row_of,
                                           const float* __restrict__ topk_w, unsigned short* __restrict__ output) {
  const int t = blockIdx.x;
  for (int h = threadIdx.x; h < HIDDEN; h += 256) {
    float acc = 0.f;
    for (int k = 0; k < TOPK; ++k) {
      const int row = row_of[t * TOPK + k];
      if (row >= 0) acc += topk_w[t * TOPK + k] * o[(long long)row * HIDDEN + h];
    }
    output[(long long)t * HIDDEN + h] = ref_to_bf16(acc);
  }
}
