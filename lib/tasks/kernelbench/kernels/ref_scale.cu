// kernelbench/level1 native tasks: trusted references of the broadcasting
// products: 5 (out = A * s, s a scalar held in a one-element tensor) and
// 12 (out[i][j] = A[i] * B[i][j], i.e. diag(A) @ B). A float product is
// correctly rounded, so computing it in double and rounding once is the same.
extern "C" __global__ void kb_ref_scale(const float* __restrict__ A, const float* __restrict__ s,
                                        float* __restrict__ out, long long n) {
  const double scale = s[0];
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = (float)((double)A[i] * scale);
}

extern "C" __global__ void kb_ref_diag_matmul(const float* __restrict__ A, const float* __restrict__ B,
                                              float* __restrict__ out, long long rows, long long cols) {
  const long long n = rows * cols, stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = (float)((double)A[i / cols] * (double)B[i]);
}
