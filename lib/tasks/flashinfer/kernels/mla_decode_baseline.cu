// flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1: the baseline for
// vs_baseline scores. Not FlashInfer's kernel (its latencies can be imported
// per card with --baseline-latencies) but a split-KV design written by hand
// for libksearch:
//
//   1. mla_split_partial  one block of 16 warps per (split, request), warp h = head h: the 16
//                         heads walk the same rows together (each row is read from DRAM once and
//                         then served by L1), 16-byte loads, an online softmax in base 2; each
//                         warp writes its split's partial (max, sum, 512-wide accumulator)
//   2. mla_split_combine  one block per (request, head) merges the splits: output and lse
//
// The number of splits (num_splits in the plan) grows for small batches and
// long requests so that about two blocks per SM are busy.

#define HEADS 16
#define CKV 512
#define KPE 64
#define LOG2E 1.4426950408889634f

__device__ __forceinline__ float bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

#include "cuda_helpers/f32_to_bf16.cuh"

__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

// Eight bf16 from one 16-byte load.
__device__ __forceinline__ void unpack8(const uint4 v, float* out) {
  out[0] = bf16_lo(v.x), out[1] = bf16_hi(v.x), out[2] = bf16_lo(v.y), out[3] = bf16_hi(v.y);
  out[4] = bf16_lo(v.z), out[5] = bf16_hi(v.z), out[6] = bf16_lo(v.w), out[7] = bf16_hi(v.w);
}

extern "C" __global__ void __launch_bounds__(HEADS * 32)
mla_split_partial(const unsigned short* __restrict__ q_nope, const unsigned short* __restrict__ q_pe,
                  const unsigned short* __restrict__ ckv_cache, const unsigned short* __restrict__ kpe_cache,
                  const int* __restrict__ kv_indptr, const int* __restrict__ kv_indices, float sm_scale,
                  float2* __restrict__ part_ml, float* __restrict__ part_acc, int num_splits) {
  const int split = blockIdx.x, b = blockIdx.y;
  const int h = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int begin = kv_indptr[b], len = kv_indptr[b + 1] - begin;
  const int lo = begin + (int)((long long)len * split / num_splits);
  const int hi = begin + (int)((long long)len * (split + 1) / num_splits);
  const float qscale = sm_scale * LOG2E;
  float qn[16], qp[2], acc[16];
  const long long bh = (long long)b * HEADS + h;
  unpack8(*reinterpret_cast<const uint4*>(q_nope + bh * CKV + lane * 16), qn);
  unpack8(*reinterpret_cast<const uint4*>(q_nope + bh * CKV + lane * 16 + 8), qn + 8);
  for (int e = 0; e < 16; ++e) {
    qn[e] *= qscale;
    acc[e] = 0.f;
  }
  const unsigned qpw = *reinterpret_cast<const unsigned*>(q_pe + bh * KPE + lane * 2);
  qp[0] = bf16_lo(qpw) * qscale;
  qp[1] = bf16_hi(qpw) * qscale;
  float m = neg_inf(), s = 0.f;
  for (int j = lo; j < hi; ++j) {
    const long long row = kv_indices[j];
    float c[16];
    unpack8(*reinterpret_cast<const uint4*>(ckv_cache + row * CKV + lane * 16), c);
    unpack8(*reinterpret_cast<const uint4*>(ckv_cache + row * CKV + lane * 16 + 8), c + 8);
    const unsigned pw = *reinterpret_cast<const unsigned*>(kpe_cache + row * KPE + lane * 2);
    float dot = qp[0] * bf16_lo(pw) + qp[1] * bf16_hi(pw);
    for (int e = 0; e < 16; ++e) dot += qn[e] * c[e];
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float m_new = fmaxf(m, dot);
    const float scale = exp2f(m - m_new), p = exp2f(dot - m_new);
    s = s * scale + p;
    for (int e = 0; e < 16; ++e) acc[e] = acc[e] * scale + p * c[e];
    m = m_new;
  }
  const long long idx = bh * num_splits + split;
  for (int e = 0; e < 16; ++e) part_acc[idx * CKV + lane * 16 + e] = acc[e];
  if (lane == 0) part_ml[idx] = make_float2(m, s);
}

extern "C" __global__ void mla_split_combine(const float2* __restrict__ part_ml, const float* __restrict__ part_acc,
                                             unsigned short* __restrict__ output, float* __restrict__ lse,
                                             int num_splits) {
  const long long bh = blockIdx.x;
  const int d = threadIdx.x;
  float mm = neg_inf();
  for (int sp = 0; sp < num_splits; ++sp) mm = fmaxf(mm, part_ml[bh * num_splits + sp].x);
  float ss = 0.f, aa = 0.f;
  for (int sp = 0; sp < num_splits; ++sp) {
    const float2 ml = part_ml[bh * num_splits + sp];
    if (ml.y == 0.f) continue;  // an empty split
    const float f = exp2f(ml.x - mm);
    ss += ml.y * f;
    aa += part_acc[(bh * num_splits + sp) * CKV + d] * f;
  }
  output[bh * CKV + d] = f32_to_bf16(ss > 0.f ? aa / ss : 0.f);
  if (d == 0) lse[bh] = ss > 0.f ? mm + log2f(ss) : neg_inf();
}
