// kernelbench/level1 native tasks: trusted reference of the matrix products
// (1, 2, 3, 4, 7, 8, 9). C[b] = A[b] @ B[b] for row-major A [M, K], B [K, N],
// C [M, N], batch b = blockIdx.z. 16 x 16 output tiles staged through shared
// memory; products accumulated in double and rounded to float once, so the
// reference is closer to the exact result than any FP32 kernel.
#define KB_REF_TILE 16

extern "C" __global__ void kb_ref_gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                       long long M, long long N, long long K) {
  __shared__ float As[KB_REF_TILE][KB_REF_TILE];
  __shared__ float Bs[KB_REF_TILE][KB_REF_TILE + 1];
  const long long b = blockIdx.z;
  A += b * M * K;
  B += b * K * N;
  C += b * M * N;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const long long row = (long long)blockIdx.y * KB_REF_TILE + ty;
  const long long col = (long long)blockIdx.x * KB_REF_TILE + tx;
  double acc = 0.0;
  for (long long k0 = 0; k0 < K; k0 += KB_REF_TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < KB_REF_TILE; ++kk) acc += (double)As[ty][kk] * (double)Bs[kk][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = (float)acc;
}
