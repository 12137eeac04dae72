// gpumode/trimul: a tunable starting kernel (a starting point, not a tuned
// result). fp16 tensor cores (mma.sync m16n8k16, fp32 accumulation) for the
// three GEMMs, fed by a STAGES-deep cp.async pipeline; LayerNorms and gates
// in fp32. fp16 rather than bf16: every operand here is bounded (LayerNorm
// outputs, gated projections, weights ~ 1/sqrt(H)), and its 3 extra mantissa
// bits keep the largest workloads well inside the 2e-2 tolerance, where bf16
// operands come within a factor of about 1.5 of it. Six kernels, launched in order by trimul_tunable_plan.json:
//
//   1. trimul_pack_weights  the five [H, C] projections -> one fp16 [5H, C]
//                           matrix (left/left_gate and right/right_gate rows
//                           interleaved, so a thread's two adjacent
//                           accumulator columns are a value and its gate),
//                           to_out -> fp16 [C, H]
//   2. trimul_ln_input      LayerNorm over C -> xn, fp16 [B*N*N, C]
//   3. trimul_project       xn @ w_proj^T with mask and sigmoid gates:
//                           left, right as fp16 [B, H, N, N]; gate fp16 [B*N*N, H]
//   4. trimul_triangle      tri[b, h] = left[b, h] @ right[b, h]^T, fp32 [B, H, N, N]
//   5. trimul_out_norm      LayerNorm over H of tri, times the gate -> hidden fp16 [B*N*N, H]
//   6. trimul_output        out = hidden @ to_out^T, fp32 [B, N, N, C]
//
// Each GEMM may instead be a cuBLASLt GEMM step of the plan (PROJ_GEMM,
// TRI_GEMM, OUT_GEMM = 1; the projection's then writes proj channel-major,
// fp16 [5H, M], trimul_gate_cm gates it and trimul_out_norm_cm reads the
// output gate from it), with cuBLASLt's algorithm as a parameter for the two
// largest (PROJ_ALGO, TRI_ALGO). These are
// plan-only parameters: the plan's "when" and "algo" read them, the code
// does not, so trying them compiles nothing.
//
// Parameters (trimul_tunable_params.json; -D macros, defaults below):
//   PROJ_BM, PROJ_BN  block tile of the projection and output GEMMs (64 | 128)
//   TRI_BM, TRI_BN    block tile of the triangle GEMM (64 | 128)
//   BK                k depth of one pipeline stage (32 | 64)
//   STAGES            cp.async pipeline depth (2 | 3 | 4)
//   VEC               floats per load in trimul_ln_input (1 | 2 | 4)
// Shape requirements (the declaration's constraints): N % 8 == 0, C % 8 == 0,
// (N*N) % PROJ_BM == 0, H % PROJ_BN == 0.

#ifndef PROJ_BM
#define PROJ_BM 128
#endif
#ifndef PROJ_BN
#define PROJ_BN 128
#endif
#ifndef TRI_BM
#define TRI_BM 128
#endif
#ifndef TRI_BN
#define TRI_BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef VEC
#define VEC 4
#endif

#define GEMM_THREADS 256  // 8 warps: 2 along M, 4 along N
#define LN_THREADS 256    // one warp per row

typedef unsigned short f16_t;  // raw IEEE binary16 bits

// ---- PTX wrappers: begin ----
// lo -> low half, hi -> high half, each rounded to nearest even.
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ void unpack_f16x2(unsigned v, float& lo, float& hi) {
  asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}"
      : "=f"(lo), "=f"(hi)
      : "r"(v));
}

// c += a * b for one 16x8x16 tile (fragment layouts: PTX ISA, "Matrix
// Fragments for mma.m16n8k16 with floating point type").
__device__ __forceinline__ void mma_f16_16x8x16(float (&c)[4], const unsigned (&a)[4],
                                                 const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// 16 bytes global -> shared, asynchronously; bytes past src_bytes are zero.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes) {
  const unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// ---- PTX wrappers: end ----

__device__ __forceinline__ float tm_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

__device__ __forceinline__ float tm_warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ unsigned short tm_f16(float v) {
  return (unsigned short)(pack_f16x2(v, 0.f) & 0xffffu);
}

// ---------------------------------------------------------------------------
// The GEMM core: C[m][n] = sum_k A[m][k] * B[n][k], A and B row-major fp16
// with k contiguous ("NT"). A block of 8 warps computes a BM x BN tile; warp
// (wm, wn) = (warp / 4, warp % 4) owns rows wm*BM/2 .. and columns wn*BN/4 ..
// as (BM/32) x (BN/32) mma tiles of 16 x 8.

template <int BM, int BN>
struct TileShape {
  static constexpr int LDS = BK + 8;  // shared row stride in elements: conflict-free fragment loads
  static constexpr int WM = BM / 2, WN = BN / 4;
  static constexpr int MI = WM / 16, NI = WN / 8;
  static constexpr int STAGE_ELEMS = (BM + BN) * LDS;
  static_assert(WM % 16 == 0 && WN % 8 == 0, "tile too small for 8 warps");
  static_assert(BK % 16 == 0, "BK must be a multiple of 16");
};

// Rows [r0, r0 + ROWS) x columns [k0, k0 + BK) of a row-major [rows, K]
// matrix into shared memory (row stride LDS). Chunks of 8 elements; K % 8 == 0,
// so a chunk is wholly inside or wholly outside the matrix (then zero-filled).
template <int ROWS>
__device__ __forceinline__ void tm_load_tile(f16_t* s, const f16_t* __restrict__ g,
                                             long long rows, long long r0, int K, int k0) {
  constexpr int LDS = BK + 8;
  constexpr int PER_ROW = BK / 8;
  constexpr int CHUNKS = ROWS * PER_ROW;
#pragma unroll
  for (int c = threadIdx.x; c < CHUNKS; c += GEMM_THREADS) {
    const int r = c / PER_ROW, kc = (c % PER_ROW) * 8;
    const long long gr = r0 + r;
    const int gk = k0 + kc;
    const bool inside = gr < rows && gk < K;
    cp_async_16(s + r * LDS + kc, inside ? g + gr * K + gk : g, inside ? 16 : 0);
  }
}

template <int BM, int BN>
__device__ __forceinline__ void tm_gemm_nt(float (&acc)[BM / 32][BN / 32][4], f16_t* smem,
                                           const f16_t* __restrict__ A, long long rows_a,
                                           long long m0, const f16_t* __restrict__ B,
                                           long long rows_b, long long n0, int K) {
  typedef TileShape<BM, BN> S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = warp >> 2, wn = warp & 3;
  const int g = lane >> 2, t = lane & 3;

#pragma unroll
  for (int mi = 0; mi < S::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < S::NI; ++ni)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.f;

  const int k_tiles = (K + BK - 1) / BK;
  // Prologue: the first STAGES-1 tiles in flight, one commit group each (an
  // empty group past the end keeps the group count uniform).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) {
      f16_t* sa = smem + s * S::STAGE_ELEMS;
      tm_load_tile<BM>(sa, A, rows_a, m0, K, s * BK);
      tm_load_tile<BN>(sa + BM * S::LDS, B, rows_b, n0, K, s * BK);
    }
    cp_async_commit();
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    // Tile kt has landed (at most STAGES-2 younger groups pending) and every
    // warp is done with the stage the prefetch below overwrites (read in kt-1).
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < k_tiles) {
      f16_t* sn = smem + (next % STAGES) * S::STAGE_ELEMS;
      tm_load_tile<BM>(sn, A, rows_a, m0, K, next * BK);
      tm_load_tile<BN>(sn + BM * S::LDS, B, rows_b, n0, K, next * BK);
    }
    cp_async_commit();

    const f16_t* sa = smem + (kt % STAGES) * S::STAGE_ELEMS;
    const f16_t* sb = sa + BM * S::LDS;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[S::MI][4], b[S::NI][2];
#pragma unroll
      for (int mi = 0; mi < S::MI; ++mi) {
        const f16_t* p = sa + (wm * S::WM + mi * 16 + g) * S::LDS + kk + t * 2;
        a[mi][0] = *reinterpret_cast<const unsigned*>(p);
        a[mi][1] = *reinterpret_cast<const unsigned*>(p + 8 * S::LDS);
        a[mi][2] = *reinterpret_cast<const unsigned*>(p + 8);
        a[mi][3] = *reinterpret_cast<const unsigned*>(p + 8 * S::LDS + 8);
      }
#pragma unroll
      for (int ni = 0; ni < S::NI; ++ni) {
        const f16_t* p = sb + (wn * S::WN + ni * 8 + g) * S::LDS + kk + t * 2;
        b[ni][0] = *reinterpret_cast<const unsigned*>(p);
        b[ni][1] = *reinterpret_cast<const unsigned*>(p + 8);
      }
#pragma unroll
      for (int mi = 0; mi < S::MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < S::NI; ++ni) mma_f16_16x8x16(acc[mi][ni], a[mi], b[ni]);
    }
  }
  // Drain (only empty groups remain) and let the caller reuse shared memory.
  cp_async_wait<0>();
  __syncthreads();
}

// Where accumulator q of mma tile (mi, ni) lands inside the block tile.
template <int BM, int BN>
__device__ __forceinline__ int tm_row(int mi, int q) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return (warp >> 2) * (BM / 2) + mi * 16 + (lane >> 2) + (q >= 2 ? 8 : 0);
}
template <int BM, int BN>
__device__ __forceinline__ int tm_col(int ni) {  // the first of two adjacent columns
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return (warp & 3) * (BN / 4) + ni * 8 + (lane & 3) * 2;
}

// ---------------------------------------------------------------------------
// 1. Weights to fp16. Row n of w_proj: n < 2H: left_proj[n/2] (even n) or
// left_gate[n/2] (odd n); 2H <= n < 4H: the same for right; 4H <= n: out_gate[n-4H].
extern "C" __global__ void __launch_bounds__(256)
trimul_pack_weights(const float* __restrict__ left_proj, const float* __restrict__ right_proj,
                    const float* __restrict__ left_gate, const float* __restrict__ right_gate,
                    const float* __restrict__ out_gate, const float* __restrict__ to_out,
                    f16_t* __restrict__ w_proj, f16_t* __restrict__ w_out, int C, int H) {
  const long long proj = 5LL * H * C, total = proj + (long long)C * H;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (long long)gridDim.x * blockDim.x) {
    if (idx >= proj) {
      w_out[idx - proj] = tm_f16(to_out[idx - proj]);
      continue;
    }
    const int n = (int)(idx / C), k = (int)(idx % C);
    const float* src;
    int h;
    if (n < 2 * H) {
      h = n >> 1;
      src = (n & 1) ? left_gate : left_proj;
    } else if (n < 4 * H) {
      h = (n - 2 * H) >> 1;
      src = (n & 1) ? right_gate : right_proj;
    } else {
      h = n - 4 * H;
      src = out_gate;
    }
    w_proj[idx] = tm_f16(src[(long long)h * C + k]);
  }
}

// ---------------------------------------------------------------------------
// 2. LayerNorm over C, one warp per row, VEC floats per load; two passes for
// the statistics (x is re-read from L1/L2), a third writes fp16.
template <int V>
__device__ __forceinline__ void tm_load_vec(const float* __restrict__ p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
  } else if constexpr (V == 2) {
    const float2 q = *reinterpret_cast<const float2*>(p);
    v[0] = q.x; v[1] = q.y;
  } else {
    v[0] = p[0];
  }
}

extern "C" __global__ void __launch_bounds__(LN_THREADS)
trimul_ln_input(const float* __restrict__ x, const float* __restrict__ norm_weight,
                const float* __restrict__ norm_bias, f16_t* __restrict__ xn, long long M, int C) {
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * (LN_THREADS / 32) + (threadIdx.x >> 5);
  if (row >= M) return;  // the whole warp leaves together
  const float* xr = x + row * C;
  float v[VEC];
  float sum = 0.f;
  for (int c = lane * VEC; c < C; c += 32 * VEC) {
    tm_load_vec<VEC>(xr + c, v);
#pragma unroll
    for (int q = 0; q < VEC; ++q) sum += v[q];
  }
  const float mean = tm_warp_sum(sum) / C;
  float sq = 0.f;
  for (int c = lane * VEC; c < C; c += 32 * VEC) {
    tm_load_vec<VEC>(xr + c, v);
#pragma unroll
    for (int q = 0; q < VEC; ++q) sq += (v[q] - mean) * (v[q] - mean);
  }
  const float rstd = rsqrtf(tm_warp_sum(sq) / C + 1e-5f);
  f16_t* out = xn + row * C;
  for (int c = lane * VEC; c < C; c += 32 * VEC) {
    tm_load_vec<VEC>(xr + c, v);
    float w[VEC], b[VEC];
    tm_load_vec<VEC>(norm_weight + c, w);
    tm_load_vec<VEC>(norm_bias + c, b);
#pragma unroll
    for (int q = 0; q < VEC; ++q) v[q] = (v[q] - mean) * rstd * w[q] + b[q];
    if constexpr (VEC == 1) {
      out[c] = tm_f16(v[0]);
    } else {
#pragma unroll
      for (int q = 0; q < VEC; q += 2)
        *reinterpret_cast<unsigned*>(out + c + q) = pack_f16x2(v[q], v[q + 1]);
    }
  }
}

// ---------------------------------------------------------------------------
// 3. The projections: one GEMM of xn [M, C] by w_proj [5H, C]. Block x-index
// = row_tile * (5H / PROJ_BN) + col_tile. A column tile lies in one region:
// left pairs [0, 2H), right pairs [2H, 4H), out gate [4H, 5H). left/right
// tiles are staged through shared memory as [h][row] and written as 16-byte
// runs along k of the [B, H, N, N] layout the triangle GEMM reads.
extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
trimul_project(const f16_t* __restrict__ xn, const f16_t* __restrict__ w_proj,
               const float* __restrict__ mask, f16_t* __restrict__ left,
               f16_t* __restrict__ right, f16_t* __restrict__ gate, long long M, int N, int C,
               int H) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  f16_t* smem = reinterpret_cast<f16_t*>(smem_raw);
  const int col_tiles = 5 * H / PROJ_BN;
  const long long m0 = (long long)(blockIdx.x / col_tiles) * PROJ_BM;
  const int n0 = (blockIdx.x % col_tiles) * PROJ_BN;

  float acc[PROJ_BM / 32][PROJ_BN / 32][4];
  tm_gemm_nt<PROJ_BM, PROJ_BN>(acc, smem, xn, M, m0, w_proj, 5LL * H, n0, C);
  typedef TileShape<PROJ_BM, PROJ_BN> S;

  if (n0 >= 4 * H) {  // out gate: plain columns, h = n - 4H
#pragma unroll
    for (int mi = 0; mi < S::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < S::NI; ++ni)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const long long m = m0 + tm_row<PROJ_BM, PROJ_BN>(mi, half * 2);
          const int h = n0 - 4 * H + tm_col<PROJ_BM, PROJ_BN>(ni);
          if (m < M)
            *reinterpret_cast<unsigned*>(gate + m * H + h) =
                pack_f16x2(tm_sigmoid(acc[mi][ni][half * 2]), tm_sigmoid(acc[mi][ni][half * 2 + 1]));
        }
    return;
  }

  // left or right: columns (2h', 2h'+1) are (value, gate) of channel h'.
  const bool is_left = n0 < 2 * H;
  const int h_base = (n0 - (is_left ? 0 : 2 * H)) / 2;
  constexpr int SROW = PROJ_BM + 8;  // staging row stride (elements), keeps rows 16-byte aligned
  f16_t* stage = smem;              // [PROJ_BN / 2][SROW], reusing the drained pipeline buffers
#pragma unroll
  for (int mi = 0; mi < S::MI; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = tm_row<PROJ_BM, PROJ_BN>(mi, half * 2);
      const long long m = m0 + r;
      const float mk = m < M ? mask[m] : 0.f;
#pragma unroll
      for (int ni = 0; ni < S::NI; ++ni) {
        const int hl = tm_col<PROJ_BM, PROJ_BN>(ni) / 2;
        const float v = acc[mi][ni][half * 2] * mk * tm_sigmoid(acc[mi][ni][half * 2 + 1]);
        stage[hl * SROW + r] = tm_f16(v);
      }
    }
  __syncthreads();
  const long long NN = (long long)N * N;
  f16_t* dst_base = is_left ? left : right;
  constexpr int RUNS = PROJ_BM / 8;  // 16-byte runs per staged row
  for (int c = threadIdx.x; c < (PROJ_BN / 2) * RUNS; c += GEMM_THREADS) {
    const int hl = c / RUNS, r = (c % RUNS) * 8;
    const long long m = m0 + r;
    if (m >= M) continue;
    // (N*N) % PROJ_BM == 0: the tile lies in one batch and m .. m+7 are consecutive k.
    const long long b = m / NN, rem = m - b * NN;
    f16_t* dst = dst_base + ((long long)b * H + h_base + hl) * NN + rem;
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(stage + hl * SROW + r);
  }
}

// ---------------------------------------------------------------------------
// 3'. Where a cuBLASLt GEMM step computed the projections (PROJ_GEMM=1), it
// wrote them channel-major: proj = w_proj @ xn^T, fp16 [5H, M], so row 2c is
// pair c's value and row 2c+1 its gate (c < H: left channel c, else right
// channel c - H), and rows 4H + h the output gate. Gating is then a
// contiguous pass (8 positions per thread; M % 8 == 0 and 8 positions never
// cross a batch), and trimul_out_norm_cm reads the output gate from proj.
// Grid (cdiv(M, 2048), 2H).
extern "C" __global__ void __launch_bounds__(256)
trimul_gate_cm(const f16_t* __restrict__ proj, const float* __restrict__ mask, f16_t* __restrict__ left,
               f16_t* __restrict__ right, long long M, int N, int H) {
  const int c = blockIdx.y;
  const long long m = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (m >= M) return;
  const uint4 vv = *reinterpret_cast<const uint4*>(proj + 2LL * c * M + m);
  const uint4 gg = *reinterpret_cast<const uint4*>(proj + (2LL * c + 1) * M + m);
  const float4 k0 = *reinterpret_cast<const float4*>(mask + m);
  const float4 k1 = *reinterpret_cast<const float4*>(mask + m + 4);
  const unsigned v[4] = {vv.x, vv.y, vv.z, vv.w}, g[4] = {gg.x, gg.y, gg.z, gg.w};
  const float mk[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
  unsigned o[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float v0, v1, g0, g1;
    unpack_f16x2(v[q], v0, v1);
    unpack_f16x2(g[q], g0, g1);
    o[q] = pack_f16x2(v0 * mk[2 * q] * tm_sigmoid(g0), v1 * mk[2 * q + 1] * tm_sigmoid(g1));
  }
  const long long NN = (long long)N * N;
  const long long b = m / NN, rem = m - b * NN;
  f16_t* dst = (c < H ? left : right) + ((long long)b * H + (c % H)) * NN + rem;
  *reinterpret_cast<uint4*>(dst) = make_uint4(o[0], o[1], o[2], o[3]);
}

// ---------------------------------------------------------------------------
// 4. tri[bh][i][j] = sum_k left[bh][i][k] * right[bh][j][k]; grid
// (cdiv(N, TRI_BN), cdiv(N, TRI_BM), B*H).
extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
trimul_triangle(const f16_t* __restrict__ left, const f16_t* __restrict__ right,
                float* __restrict__ tri, int N) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  f16_t* smem = reinterpret_cast<f16_t*>(smem_raw);
  const long long NN = (long long)N * N;
  const long long offset = (long long)blockIdx.z * NN;
  const int i0 = blockIdx.y * TRI_BM, j0 = blockIdx.x * TRI_BN;

  float acc[TRI_BM / 32][TRI_BN / 32][4];
  tm_gemm_nt<TRI_BM, TRI_BN>(acc, smem, left + offset, N, i0, right + offset, N, j0, N);
  typedef TileShape<TRI_BM, TRI_BN> S;
  float* P = tri + offset;
#pragma unroll
  for (int mi = 0; mi < S::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < S::NI; ++ni)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = i0 + tm_row<TRI_BM, TRI_BN>(mi, half * 2);
        const int j = j0 + tm_col<TRI_BM, TRI_BN>(ni);
        if (i < N && j < N)
          *reinterpret_cast<float2*>(P + (long long)i * N + j) =
              make_float2(acc[mi][ni][half * 2], acc[mi][ni][half * 2 + 1]);
      }
}

// ---------------------------------------------------------------------------
// 5. hidden[p][h] = (LayerNorm_H(tri[b, :, i, j]) * w + b) * gate[p][h] for
// p = (b*N + i)*N + j. 32 positions per block: tri is read with the positions
// along the warp (coalesced) into a [H][33] shared tile; then one warp per
// position, each lane two adjacent channels at a time. The gate is either
// fp16 [M, H] after its sigmoid (trimul_project), or read from a
// channel-major proj (rows 4H + h, before the sigmoid) into a second tile.
template <bool GATE_CM>
__device__ __forceinline__ void tm_out_norm(const float* __restrict__ tri, const f16_t* __restrict__ gate,
                                            const float* __restrict__ w, const float* __restrict__ bias,
                                            f16_t* __restrict__ hidden, long long M, int N, int H) {
  extern __shared__ float tile[];  // H rows of 33 floats; with GATE_CM, then the gate's
  float* gtile = tile + H * 33;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long NN = (long long)N * N;
  const long long p0 = (long long)blockIdx.x * 32;
  {
    const long long p = p0 + lane;
    const long long b = p / NN, rem = p - b * NN;
    const float* src = tri + b * H * NN + rem;
    for (int h = warp; h < H; h += 8) {
      tile[h * 33 + lane] = p < M ? src[(long long)h * NN] : 0.f;
      if constexpr (GATE_CM) {
        unsigned short raw = p < M ? gate[(4LL * H + h) * M + p] : (unsigned short)0;
        float g, unused;
        unpack_f16x2(raw, g, unused);
        gtile[h * 33 + lane] = tm_sigmoid(g);
      }
    }
  }
  __syncthreads();
  for (int q = warp; q < 32; q += 8) {
    const long long p = p0 + q;
    if (p >= M) break;  // uniform across the warp
    float sum = 0.f;
    for (int h = lane; h < H; h += 32) sum += tile[h * 33 + q];
    const float mean = tm_warp_sum(sum) / H;
    float sq = 0.f;
    for (int h = lane; h < H; h += 32) {
      const float d = tile[h * 33 + q] - mean;
      sq += d * d;
    }
    const float rstd = rsqrtf(tm_warp_sum(sq) / H + 1e-5f);
    for (int h = 2 * lane; h < H; h += 64) {
      float g0, g1;
      if constexpr (GATE_CM) {
        g0 = gtile[h * 33 + q];
        g1 = gtile[(h + 1) * 33 + q];
      } else {
        unpack_f16x2(*reinterpret_cast<const unsigned*>(gate + p * H + h), g0, g1);
      }
      const float v0 = ((tile[h * 33 + q] - mean) * rstd * w[h] + bias[h]) * g0;
      const float v1 = ((tile[(h + 1) * 33 + q] - mean) * rstd * w[h + 1] + bias[h + 1]) * g1;
      *reinterpret_cast<unsigned*>(hidden + p * H + h) = pack_f16x2(v0, v1);
    }
  }
}

extern "C" __global__ void __launch_bounds__(256)
trimul_out_norm(const float* __restrict__ tri, const f16_t* __restrict__ gate,
                const float* __restrict__ to_out_norm_weight,
                const float* __restrict__ to_out_norm_bias, f16_t* __restrict__ hidden,
                long long M, int N, int H) {
  tm_out_norm<false>(tri, gate, to_out_norm_weight, to_out_norm_bias, hidden, M, N, H);
}

// The same with the gate in a channel-major proj (PROJ_GEMM=1); shared
// memory for two tiles.
extern "C" __global__ void __launch_bounds__(256)
trimul_out_norm_cm(const float* __restrict__ tri, const f16_t* __restrict__ proj,
                   const float* __restrict__ to_out_norm_weight,
                   const float* __restrict__ to_out_norm_bias, f16_t* __restrict__ hidden,
                   long long M, int N, int H) {
  tm_out_norm<true>(tri, proj, to_out_norm_weight, to_out_norm_bias, hidden, M, N, H);
}

// ---------------------------------------------------------------------------
// 6. out = hidden [M, H] @ w_out [C, H]^T. Block x-index = row_tile *
// cdiv(C, PROJ_BN) + col_tile.
extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
trimul_output(const f16_t* __restrict__ hidden, const f16_t* __restrict__ w_out,
              float* __restrict__ out, long long M, int C, int H) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  f16_t* smem = reinterpret_cast<f16_t*>(smem_raw);
  const int col_tiles = (C + PROJ_BN - 1) / PROJ_BN;
  const long long m0 = (long long)(blockIdx.x / col_tiles) * PROJ_BM;
  const int n0 = (blockIdx.x % col_tiles) * PROJ_BN;

  float acc[PROJ_BM / 32][PROJ_BN / 32][4];
  tm_gemm_nt<PROJ_BM, PROJ_BN>(acc, smem, hidden, M, m0, w_out, C, n0, H);
  typedef TileShape<PROJ_BM, PROJ_BN> S;
#pragma unroll
  for (int mi = 0; mi < S::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < S::NI; ++ni)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const long long m = m0 + tm_row<PROJ_BM, PROJ_BN>(mi, half * 2);
        const int n = n0 + tm_col<PROJ_BM, PROJ_BN>(ni);
        if (m < M && n < C)
          *reinterpret_cast<float2*>(out + m * C + n) =
              make_float2(acc[mi][ni][half * 2], acc[mi][ni][half * 2 + 1]);
      }
}
