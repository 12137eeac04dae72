// flashinfer/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048: the
// baseline for vs_baseline scores. Not FlashInfer's fused MoE (its latencies
// can be imported per card with --baseline-latencies) but a grouped GEMM
// written by hand for libksearch, on CUDA cores:
//
//   1. moe_base_route    one thread per token: DeepSeek-V3 no-aux routing
//   2. moe_base_count    per local expert: its number of (token, slot) pairs
//   3. moe_base_list     per local expert: its pairs in token order, rows of a compact array
//   4. moe_base_gemm1    64 pairs x (32 + 32) columns per block: each expert's W13 tile is read
//                        once per 64 tokens; fp8 decoded once per tile element; the 128-wide
//                        block scales are applied to partial sums over 64 elements of k
//   5. moe_base_gemm2    64 pairs x 64 hidden columns per block, the same way
//   6. moe_base_combine  per token: weighted sum over its local slots, bf16

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
#define TM 64
#define KC 64
#define PAD 1

#include "cuda_helpers/bf16_to_f32.cuh"

#include "cuda_helpers/f32_to_bf16.cuh"

#include "cuda_helpers/fp8_e4m3.cuh"

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

extern "C" __global__ void moe_base_route(const float* __restrict__ routing_logits,
                                          const unsigned short* __restrict__ routing_bias, float routed_scaling_factor,
                                          int* __restrict__ topk_ids, float* __restrict__ topk_w, int seq_len) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= seq_len) return;
  const float* logits = routing_logits + (long long)t * EXPERTS;
  const float neg_inf = -__int_as_float(0x7f800000);
  float gscore[GROUPS];
  for (int g = 0; g < GROUPS; ++g) {
    float a = neg_inf, b = neg_inf;
    for (int e = g * 32; e < g * 32 + 32; ++e) {
      const float sb = sigmoid(logits[e]) + bf16_to_f32(routing_bias[e]);
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
  // Insertion into a sorted top-8 (descending, ties to the lower index).
  int ids[TOPK];
  float vals[TOPK];
  for (int k = 0; k < TOPK; ++k) ids[k] = -1, vals[k] = neg_inf;
  for (int e = 0; e < EXPERTS; ++e) {
    if (!(kept >> (e / 32) & 1u)) continue;
    const float sb = sigmoid(logits[e]) + bf16_to_f32(routing_bias[e]);
    if (ids[TOPK - 1] >= 0 && !(sb > vals[TOPK - 1])) continue;
    int k = TOPK - 1;
    while (k > 0 && (ids[k - 1] < 0 || sb > vals[k - 1])) {
      ids[k] = ids[k - 1];
      vals[k] = vals[k - 1];
      --k;
    }
    ids[k] = e;
    vals[k] = sb;
  }
  float sum = 0.f;
  for (int k = 0; k < TOPK; ++k) sum += sigmoid(logits[ids[k]]);
  for (int k = 0; k < TOPK; ++k) {
    topk_ids[t * TOPK + k] = ids[k];
    topk_w[t * TOPK + k] = sigmoid(logits[ids[k]]) / (sum + 1e-20f) * routed_scaling_factor;
  }
}

__device__ int local_slot(const int* __restrict__ topk_ids, int t, int ge) {
  for (int k = 0; k < TOPK; ++k)
    if (topk_ids[t * TOPK + k] == ge) return k;
  return -1;
}

extern "C" __global__ void moe_base_count(const int* __restrict__ topk_ids, int local_expert_offset,
                                          int* __restrict__ counts, int* __restrict__ row_of, int seq_len) {
  __shared__ int red[256];
  const int le = blockIdx.x;
  int n = 0;
  for (int t = threadIdx.x; t < seq_len; t += 256) {
    n += local_slot(topk_ids, t, local_expert_offset + le) >= 0;
    if (le == 0)
      for (int k = 0; k < TOPK; ++k) row_of[t * TOPK + k] = -1;
  }
  red[threadIdx.x] = n;
  __syncthreads();
  for (int s = 128; s > 0; s /= 2) {
    if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[le] = red[0];
}

__device__ __forceinline__ int offset_of(const int* __restrict__ counts, int le) {
  int off = 0;
  for (int k = 0; k < le; ++k) off += counts[k];
  return off;
}

extern "C" __global__ void moe_base_list(const int* __restrict__ topk_ids, int local_expert_offset,
                                         const int* __restrict__ counts, int* __restrict__ pair_of_row,
                                         int* __restrict__ row_of, int seq_len) {
  __shared__ int scan[256];
  const int le = blockIdx.x;
  int base = offset_of(counts, le);
  for (int t0 = 0; t0 < seq_len; t0 += 256) {
    const int t = t0 + threadIdx.x;
    const int k = t < seq_len ? local_slot(topk_ids, t, local_expert_offset + le) : -1;
    scan[threadIdx.x] = k >= 0;
    __syncthreads();
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

// Thread (rg = tid / 16, cg = tid % 16) owns rows rg * 4 .. + 3 and columns
// cg * 2, cg * 2 + 1 of X1 and of X2.
extern "C" __global__ void __launch_bounds__(256)
moe_base_gemm1(const unsigned char* __restrict__ hidden_states, const float* __restrict__ hidden_states_scale,
               const unsigned char* __restrict__ gemm1_weights, const float* __restrict__ gemm1_weights_scale,
               const int* __restrict__ counts, const int* __restrict__ pair_of_row, float* __restrict__ inter,
               int seq_len) {
  __shared__ float a_s[TM][KC + PAD];
  __shared__ float w_s[64][KC + PAD];
  __shared__ float a_scale[TM];
  __shared__ int token_of[TM];
  const int le = blockIdx.z, m0 = blockIdx.y * TM, n0 = blockIdx.x * 32;
  const int count = counts[le];
  if (m0 >= count) return;
  const int off = offset_of(counts, le);
  const int tid = threadIdx.x, rg = tid / 16, cg = tid % 16;
  if (tid < TM) token_of[tid] = m0 + tid < count ? pair_of_row[off + m0 + tid] / TOPK : -1;
  float acc1[4][2], acc2[4][2];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) acc1[r][c] = acc2[r][c] = 0.f;
  const unsigned char* w_e = gemm1_weights + (long long)le * 2 * INTER * HIDDEN;
  const float* ws_e = gemm1_weights_scale + (long long)le * G1BLOCKS * HBLOCKS;
  __syncthreads();
  for (int k0 = 0; k0 < HIDDEN; k0 += KC) {
    const int kb = k0 / 128;
    // Raw fp8 values; scales come after the partial sums.
    for (int e = tid; e < TM * (KC / 4); e += 256) {
      const int rr = e / (KC / 4), kq = e % (KC / 4);
      const int token = token_of[rr];
      const unsigned v = token >= 0 ? *reinterpret_cast<const unsigned*>(hidden_states + (long long)token * HIDDEN + k0 + 4 * kq) : 0u;
      for (int j = 0; j < 4; ++j) a_s[rr][4 * kq + j] = fp8_e4m3(v >> (8 * j) & 0xffu);
    }
    for (int e = tid; e < 64 * (KC / 4); e += 256) {
      const int rr = e / (KC / 4), kq = e % (KC / 4);
      const int n = rr < 32 ? n0 + rr : INTER + n0 + rr - 32;
      const unsigned v = *reinterpret_cast<const unsigned*>(w_e + (long long)n * HIDDEN + k0 + 4 * kq);
      for (int j = 0; j < 4; ++j) w_s[rr][4 * kq + j] = fp8_e4m3(v >> (8 * j) & 0xffu);
    }
    if (tid < TM) a_scale[tid] = token_of[tid] >= 0 ? hidden_states_scale[(long long)kb * seq_len + token_of[tid]] : 0.f;
    __syncthreads();
    float p1[4][2], p2[4][2];
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 2; ++c) p1[r][c] = p2[r][c] = 0.f;
    for (int kk = 0; kk < KC; ++kk) {
      float a[4], b1[2], b2[2];
      for (int r = 0; r < 4; ++r) a[r] = a_s[rg * 4 + r][kk];
      for (int c = 0; c < 2; ++c) {
        b1[c] = w_s[cg * 2 + c][kk];
        b2[c] = w_s[32 + cg * 2 + c][kk];
      }
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 2; ++c) {
          p1[r][c] += a[r] * b1[c];
          p2[r][c] += a[r] * b2[c];
        }
    }
    const float s1 = ws_e[(n0 / 128) * HBLOCKS + kb], s2 = ws_e[((INTER + n0) / 128) * HBLOCKS + kb];
    for (int r = 0; r < 4; ++r) {
      const float as = a_scale[rg * 4 + r];
      for (int c = 0; c < 2; ++c) {
        acc1[r][c] += p1[r][c] * (as * s1);
        acc2[r][c] += p2[r][c] * (as * s2);
      }
    }
    __syncthreads();
  }
  for (int r = 0; r < 4; ++r) {
    const int m = m0 + rg * 4 + r;
    if (m >= count) continue;
    for (int c = 0; c < 2; ++c) {
      const float x1 = acc1[r][c], x2 = acc2[r][c];
      inter[(long long)(off + m) * INTER + n0 + cg * 2 + c] = x2 / (1.f + expf(-x2)) * x1;
    }
  }
}

// Thread (rg = tid / 16, cg = tid % 16) owns rows rg * 4 .. + 3 and columns
// cg * 4 .. + 3.
extern "C" __global__ void __launch_bounds__(256)
moe_base_gemm2(const float* __restrict__ inter, const unsigned char* __restrict__ gemm2_weights,
               const float* __restrict__ gemm2_weights_scale, const int* __restrict__ counts, float* __restrict__ o) {
  __shared__ float c_s[TM][KC + PAD];
  __shared__ float w_s[64][KC + PAD];
  const int le = blockIdx.z, m0 = blockIdx.y * TM, h0 = blockIdx.x * 64;
  const int count = counts[le];
  if (m0 >= count) return;
  const int off = offset_of(counts, le);
  const int tid = threadIdx.x, rg = tid / 16, cg = tid % 16;
  float acc[4][4];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.f;
  const unsigned char* w_e = gemm2_weights + (long long)le * HIDDEN * INTER;
  const float* ws_e = gemm2_weights_scale + (long long)le * HBLOCKS * IBLOCKS;
  for (int k0 = 0; k0 < INTER; k0 += KC) {
    for (int e = tid; e < TM * KC; e += 256) {
      const int rr = e / KC, kk = e % KC;
      c_s[rr][kk] = m0 + rr < count ? inter[(long long)(off + m0 + rr) * INTER + k0 + kk] : 0.f;
    }
    for (int e = tid; e < 64 * (KC / 4); e += 256) {
      const int rr = e / (KC / 4), kq = e % (KC / 4);
      const unsigned v = *reinterpret_cast<const unsigned*>(w_e + (long long)(h0 + rr) * INTER + k0 + 4 * kq);
      for (int j = 0; j < 4; ++j) w_s[rr][4 * kq + j] = fp8_e4m3(v >> (8 * j) & 0xffu);
    }
    __syncthreads();
    float p[4][4];
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) p[r][c] = 0.f;
    for (int kk = 0; kk < KC; ++kk) {
      float a[4], b[4];
      for (int r = 0; r < 4; ++r) a[r] = c_s[rg * 4 + r][kk];
      for (int c = 0; c < 4; ++c) b[c] = w_s[cg * 4 + c][kk];
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) p[r][c] += a[r] * b[c];
    }
    const float s = ws_e[(h0 / 128) * IBLOCKS + k0 / 128];
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) acc[r][c] += p[r][c] * s;
    __syncthreads();
  }
  for (int r = 0; r < 4; ++r) {
    const int m = m0 + rg * 4 + r;
    if (m >= count) continue;
    for (int c = 0; c < 4; ++c) o[(long long)(off + m) * HIDDEN + h0 + cg * 4 + c] = acc[r][c];
  }
}

extern "C" __global__ void moe_base_combine(const float* __restrict__ o, const int* __restrict__ row_of,
                                            const float* __restrict__ topk_w, unsigned short* __restrict__ output) {
  const int t = blockIdx.x;
  int rows[TOPK];
  for (int k = 0; k < TOPK; ++k) rows[k] = row_of[t * TOPK + k];
  for (int h = threadIdx.x; h < HIDDEN; h += 256) {
    float acc = 0.f;
    for (int k = 0; k < TOPK; ++k)
      if (rows[k] >= 0) acc += topk_w[t * TOPK + k] * o[(long long)rows[k] * HIDDEN + h];
    output[(long long)t * HIDDEN + h] = f32_to_bf16(acc);
  }
}
