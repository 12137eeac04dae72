// gpumode/trimul: the trusted FP32 reference (see docs/tasks/trimul.md).
//
// Plain FP32 FMA arithmetic throughout: no tensor cores, no TF32; LayerNorm
// statistics are accumulated in double. Five kernels, launched in order by
// trimul_reference_plan.json:
//
//   1. trimul_ref_ln_stats   mean and 1/std of every row of x (LayerNorm over C)
//   2. trimul_ref_project    the five projections of LayerNorm(x), with mask and
//                            sigmoid gates: left, right as [B, H, N, N] (one N x N
//                            matrix per (b, h), k contiguous) and the out gate as [B, N, N, H]
//   3. trimul_ref_triangle   tri[b, h] = left[b, h] @ right[b, h]^T: B*H GEMMs of N x N x N
//   4. trimul_ref_out_norm   LayerNorm over H of tri, times the out gate -> hidden [B, N, N, H]
//   5. trimul_ref_output     out = hidden @ to_out^T -> [B, N, N, C]
//
// The three GEMMs are "NT" products C[m][n] = sum_k A[m][k] * B[n][k] with both
// operands k-contiguous, and share one register-blocked shared-memory tile:
// 128 x 128 outputs per block of 256 threads, 8 x 8 per thread, k steps of 8.

#define REF_TILE 128
#define REF_KSTEP 8
#define REF_THREADS 256

__device__ __forceinline__ double ref_warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float ref_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

// Four consecutive elements [k, k+4) of row `row` of a row-major [rows, K]
// matrix; elements outside the matrix read as zero.
__device__ __forceinline__ float4 ref_load_row4(const float* __restrict__ p, long long row,
                                                long long rows, int k, int K) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (row < 0 || row >= rows || k >= K) return v;
  const float* q = p + row * (long long)K + k;
  if ((K & 3) == 0) {
    // k is a multiple of 4 and the row starts 16-byte aligned: one vector load.
    v = *reinterpret_cast<const float4*>(q);
  } else {
    v.x = q[0];
    if (k + 1 < K) v.y = q[1];
    if (k + 2 < K) v.z = q[2];
    if (k + 3 < K) v.w = q[3];
  }
  return v;
}

// Stores elements [n, n+4) of a row of length `len`, dropping those past its end.
__device__ __forceinline__ void ref_store_row4(float* __restrict__ row, int n, int len, float a,
                                               float b, float c, float d) {
  if ((len & 3) == 0 && n + 3 < len) {
    *reinterpret_cast<float4*>(row + n) = make_float4(a, b, c, d);
  } else {
    if (n < len) row[n] = a;
    if (n + 1 < len) row[n + 1] = b;
    if (n + 2 < len) row[n + 2] = c;
    if (n + 3 < len) row[n + 3] = d;
  }
}

// Row (or column) of the tile held by register index r in 0..7: two groups
// of four, 64 apart, so every shared-memory read is one conflict-free float4.
__device__ __forceinline__ int ref_tile_index(int lane16, int r) {
  return (r < 4 ? 0 : 64) + lane16 * 4 + (r & 3);
}

// The shared main loop: acc[r][c] accumulates rows ref_tile_index(ty, r) and
// columns ref_tile_index(tx, c) of the block's 128 x 128 tile, with
// tx = threadIdx.x % 16, ty = threadIdx.x / 16. load_a(i, k) / load_b(j, k)
// return elements [k, k+4) of the tile's row i of A / row j of B (zero
// outside the matrices).
template <class LoadA, class LoadB>
__device__ __forceinline__ void ref_nt_tile(float (&acc)[8][8], int K, const LoadA& load_a,
                                            const LoadB& load_b) {
  // k-major tiles, padded by 4 floats so the transposing stores below are
  // conflict-free and every row stays 16-byte aligned.
  __shared__ __align__(16) float As[REF_KSTEP][REF_TILE + 4];
  __shared__ __align__(16) float Bs[REF_KSTEP][REF_TILE + 4];

  const int tid = threadIdx.x;
  const int tx = tid & 15, ty = tid >> 4;
  const int load_row = tid >> 1;       // each thread loads one float4 of A and one of B
  const int load_k = (tid & 1) * 4;

#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[r][c] = 0.f;

  for (int k0 = 0; k0 < K; k0 += REF_KSTEP) {
    const float4 av = load_a(load_row, k0 + load_k);
    const float4 bv = load_b(load_row, k0 + load_k);
    As[load_k + 0][load_row] = av.x;
    As[load_k + 1][load_row] = av.y;
    As[load_k + 2][load_row] = av.z;
    As[load_k + 3][load_row] = av.w;
    Bs[load_k + 0][load_row] = bv.x;
    Bs[load_k + 1][load_row] = bv.y;
    Bs[load_k + 2][load_row] = bv.z;
    Bs[load_k + 3][load_row] = bv.w;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < REF_KSTEP; ++k) {
      const float4 a_lo = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
      const float4 a_hi = *reinterpret_cast<const float4*>(&As[k][64 + ty * 4]);
      const float4 b_lo = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
      const float4 b_hi = *reinterpret_cast<const float4*>(&Bs[k][64 + tx * 4]);
      const float a[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
      const float b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
      for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }
}

// 1. One warp per row of x [M, C]: stats[row] = (mean, 1/sqrt(var + 1e-5)),
// two passes in double (Cauchy inputs put values near 1e16 into some rows).
extern "C" __global__ void __launch_bounds__(REF_THREADS)
trimul_ref_ln_stats(const float* __restrict__ x, float2* __restrict__ stats, long long M, int C) {
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * (REF_THREADS / 32) + (threadIdx.x >> 5);
  if (row >= M) return;  // the whole warp leaves together
  const float* xr = x + row * (long long)C;
  double sum = 0.0;
  for (int c = lane; c < C; c += 32) sum += (double)xr[c];
  const double mean = ref_warp_sum(sum) / C;
  double sq = 0.0;
  for (int c = lane; c < C; c += 32) {
    const double d = (double)xr[c] - mean;
    sq += d * d;
  }
  const double var = ref_warp_sum(sq) / C;
  if (lane == 0) stats[row] = make_float2((float)mean, (float)(1.0 / sqrt(var + 1e-5)));
}

// 2. The projections. Block x-index = row_tile * (3 * h_tiles) + job * h_tiles
// + h_tile; job 0 = left (left_proj gated by left_gate), 1 = right, 2 = the
// out gate. The tile's 128 columns are 64 value columns (h0 .. h0+63 of the
// projection) followed by the same 64 columns of the gate, so each thread
// holds value and gate of the same (row, h) and can combine them in registers.
extern "C" __global__ void __launch_bounds__(REF_THREADS)
trimul_ref_project(const float* __restrict__ x, const float* __restrict__ mask,
                   const float2* __restrict__ stats, const float* __restrict__ norm_weight,
                   const float* __restrict__ norm_bias, const float* __restrict__ left_proj,
                   const float* __restrict__ right_proj, const float* __restrict__ left_gate,
                   const float* __restrict__ right_gate, const float* __restrict__ out_gate_w,
                   float* __restrict__ left, float* __restrict__ right, float* __restrict__ gate,
                   long long M, int N, int C, int H) {
  const int h_tiles = (H + 63) / 64;
  const int per_row_tile = 3 * h_tiles;
  const long long m0 = (long long)(blockIdx.x / per_row_tile) * REF_TILE;
  const int job = (blockIdx.x % per_row_tile) / h_tiles;
  const int h0 = (blockIdx.x % h_tiles) * 64;
  // The out-gate job has no value projection; it computes the gate twice
  // rather than specialising the tile (this is the reference, not the fast path).
  const float* w_value = job == 0 ? left_proj : job == 1 ? right_proj : out_gate_w;
  const float* w_gate = job == 0 ? left_gate : job == 1 ? right_gate : out_gate_w;

  // A = LayerNorm(x), normalised while loading; columns k >= C stay zero.
  auto load_a = [&](int i, int k) {
    const long long m = m0 + i;
    float4 v = ref_load_row4(x, m, M, k, C);
    if (m < M) {
      const float2 st = stats[m];
      float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int q = 0; q < 4; ++q)
        e[q] = (k + q < C) ? (e[q] - st.x) * st.y * norm_weight[k + q] + norm_bias[k + q] : 0.f;
      v = make_float4(e[0], e[1], e[2], e[3]);
    }
    return v;
  };
  auto load_b = [&](int j, int k) {
    return ref_load_row4(j < 64 ? w_value : w_gate, h0 + (j & 63), H, k, C);
  };

  float acc[8][8];
  ref_nt_tile(acc, C, load_a, load_b);

  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const long long NN = (long long)N * N;
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const long long m = m0 + ref_tile_index(ty, r);
    if (m >= M) continue;
    const long long b = m / NN, rem = m - b * NN;  // m = (b*N + i)*N + k, rem = i*N + k
    const float mk = mask[m];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int h = h0 + tx * 4 + c;
      if (h >= H) continue;
      const float g = ref_sigmoid(acc[r][4 + c]);  // column 64 + tx*4 + c: the gate of h
      if (job == 2) {
        gate[m * H + h] = g;
      } else {
        float* dst = job == 0 ? left : right;
        dst[((long long)b * H + h) * NN + rem] = acc[r][c] * mk * g;
      }
    }
  }
}

// 3. tri[bh][i][j] = sum_k left[bh][i][k] * right[bh][j][k] for bh = b*H + h;
// grid (cdiv(N, 128), cdiv(N, 128), B*H).
extern "C" __global__ void __launch_bounds__(REF_THREADS)
trimul_ref_triangle(const float* __restrict__ left, const float* __restrict__ right,
                    float* __restrict__ tri, int N) {
  const long long NN = (long long)N * N;
  const float* L = left + (long long)blockIdx.z * NN;
  const float* R = right + (long long)blockIdx.z * NN;
  float* P = tri + (long long)blockIdx.z * NN;
  const int i0 = blockIdx.y * REF_TILE, j0 = blockIdx.x * REF_TILE;

  auto load_a = [&](int i, int k) { return ref_load_row4(L, i0 + i, N, k, N); };
  auto load_b = [&](int j, int k) { return ref_load_row4(R, j0 + j, N, k, N); };
  float acc[8][8];
  ref_nt_tile(acc, N, load_a, load_b);

  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const int i = i0 + ref_tile_index(ty, r);
    if (i >= N) continue;
    float* row = P + (long long)i * N;
    ref_store_row4(row, j0 + tx * 4, N, acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
    ref_store_row4(row, j0 + 64 + tx * 4, N, acc[r][4], acc[r][5], acc[r][6], acc[r][7]);
  }
}

// 4. hidden[p][h] = (LayerNorm_H(tri[b, :, i, j]) * w + b) * gate[p][h] for
// position p = (b*N + i)*N + j. A block takes 32 consecutive positions: it
// reads tri [B, H, N, N] with the positions along the warp (coalesced) into a
// [H][33] shared tile, then each warp normalises whole positions.
extern "C" __global__ void __launch_bounds__(REF_THREADS)
trimul_ref_out_norm(const float* __restrict__ tri, const float* __restrict__ gate,
                    const float* __restrict__ to_out_norm_weight,
                    const float* __restrict__ to_out_norm_bias, float* __restrict__ hidden,
                    long long M, int N, int H) {
  extern __shared__ float tile[];  // H rows of 33 floats
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long NN = (long long)N * N;
  const long long p0 = (long long)blockIdx.x * 32;
  {
    const long long p = p0 + lane;
    const long long b = p / NN, rem = p - b * NN;
    const float* src = tri + (long long)b * H * NN + rem;
    for (int h = warp; h < H; h += REF_THREADS / 32)
      tile[h * 33 + lane] = p < M ? src[(long long)h * NN] : 0.f;
  }
  __syncthreads();
  for (int q = warp; q < 32; q += REF_THREADS / 32) {
    const long long p = p0 + q;
    if (p >= M) break;  // uniform across the warp
    double sum = 0.0;
    for (int h = lane; h < H; h += 32) sum += (double)tile[h * 33 + q];
    const double mean = ref_warp_sum(sum) / H;
    double sq = 0.0;
    for (int h = lane; h < H; h += 32) {
      const double d = (double)tile[h * 33 + q] - mean;
      sq += d * d;
    }
    const double rstd = 1.0 / sqrt(ref_warp_sum(sq) / H + 1e-5);
    for (int h = lane; h < H; h += 32) {
      const float n = (float)(((double)tile[h * 33 + q] - mean) * rstd);
      hidden[p * H + h] = (n * to_out_norm_weight[h] + to_out_norm_bias[h]) * gate[p * H + h];
    }
  }
}

// 5. out[p][c] = sum_h hidden[p][h] * to_out[c][h]. Block x-index =
// row_tile * col_tiles + col_tile, so neighbouring blocks share their rows of
// hidden through L2.
extern "C" __global__ void __launch_bounds__(REF_THREADS)
trimul_ref_output(const float* __restrict__ hidden, const float* __restrict__ to_out,
                  float* __restrict__ out, long long M, int C, int H) {
  const int col_tiles = (C + REF_TILE - 1) / REF_TILE;
  const long long m0 = (long long)(blockIdx.x / col_tiles) * REF_TILE;
  const int n0 = (blockIdx.x % col_tiles) * REF_TILE;

  auto load_a = [&](int i, int k) { return ref_load_row4(hidden, m0 + i, M, k, H); };
  auto load_b = [&](int j, int k) { return ref_load_row4(to_out, n0 + j, C, k, H); };
  float acc[8][8];
  ref_nt_tile(acc, H, load_a, load_b);

  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const long long m = m0 + ref_tile_index(ty, r);
    if (m >= M) continue;
    float* row = out + m * C;
    ref_store_row4(row, n0 + tx * 4, C, acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
    ref_store_row4(row, n0 + 64 + tx * 4, C, acc[r][4], acc[r][5], acc[r][6], acc[r][7]);
  }
}
