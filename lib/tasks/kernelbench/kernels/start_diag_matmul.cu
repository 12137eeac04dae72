// A straightforward starting kernel: one thread per output element,
// out[i][j] = A[i] * B[i][j].
extern "C" __global__ void kb_diag_matmul(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ out, long long rows, long long cols) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) out[i] = A[i / cols] * B[i];
}
