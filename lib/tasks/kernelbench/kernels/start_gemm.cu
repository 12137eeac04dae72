// A straightforward starting kernel: C[b] = A[b] @ B[b] (row-major A [M, K],
// B [K, N], C [M, N], batch b = blockIdx.z), one output per thread, 16 x 16
// tiles of A and B staged through shared memory, FP32 accumulation.
#define TILE 16

extern "C" __global__ void kb_gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                   long long M, long long N, long long K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const long long b = blockIdx.z;
  A += b * M * K;
  B += b * K * N;
  C += b * M * N;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long row = (long long)blockIdx.y * TILE + ty;
  const long long col = (long long)blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (long long k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
