// Trusted reference for examples/matmul: C = A * B, row-major, each element
// accumulated in double so the reference is more exact than any f32 kernel.
#include <algorithm>
#include <cstdint>
#include <vector>

void matmul_reference(const float* A, const float* B, float* C, std::int64_t M, std::int64_t N,
                      std::int64_t K) {
  std::vector<double> row(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < M; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (std::int64_t k = 0; k < K; ++k) {
      const double a = A[i * K + k];
      const float* b = B + k * N;
      for (std::int64_t j = 0; j < N; ++j) row[static_cast<std::size_t>(j)] += a * b[j];
    }
    for (std::int64_t j = 0; j < N; ++j) C[i * N + j] = static_cast<float>(row[static_cast<std::size_t>(j)]);
  }
}
