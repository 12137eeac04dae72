// A straightforward starting kernel for y = A @ x (A [M, K] row-major, x [K]):
// one warp per row, each lane striding over K, then a warp-shuffle sum.
extern "C" __global__ void kb_matvec(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y,
                                     long long M, long long K) {
  const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= M) return;
  const float* a = A + row * K;
  float acc = 0.0f;
  for (long long k = lane; k < K; k += 32) acc += a[k] * x[k];
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0) y[row] = acc;
}
