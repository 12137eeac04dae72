// Starting point for examples/matmul: a cache-blocked i-k-j loop nest.
// BLOCK (tile edge) and UNROLL (inner-loop unroll) come from the tunable
// parameters as -DBLOCK=... -DUNROLL=...; the defaults below are only for
// reading the file on its own.
#include <algorithm>
#include <cstdint>

#ifndef BLOCK
#define BLOCK 64
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

void matmul(const float* __restrict A, const float* __restrict B, float* __restrict C, std::int64_t M,
            std::int64_t N, std::int64_t K) {
  std::fill(C, C + M * N, 0.0f);
  for (std::int64_t i0 = 0; i0 < M; i0 += BLOCK) {
    const std::int64_t i1 = std::min<std::int64_t>(i0 + BLOCK, M);
    for (std::int64_t k0 = 0; k0 < K; k0 += BLOCK) {
      const std::int64_t k1 = std::min<std::int64_t>(k0 + BLOCK, K);
      for (std::int64_t j0 = 0; j0 < N; j0 += BLOCK) {
        const std::int64_t j1 = std::min<std::int64_t>(j0 + BLOCK, N);
        for (std::int64_t i = i0; i < i1; ++i) {
          float* c = C + i * N;
          for (std::int64_t k = k0; k < k1; ++k) {
            const float a = A[i * K + k];
            const float* b = B + k * N;
            std::int64_t j = j0;
            for (; j + UNROLL <= j1; j += UNROLL)
              for (int u = 0; u < UNROLL; ++u) c[j + u] += a * b[j + u];
            for (; j < j1; ++j) c[j] += a * b[j];
          }
        }
      }
    }
  }
}
