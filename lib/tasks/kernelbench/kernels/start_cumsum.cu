// A straightforward starting kernel: one thread per row, a running FP32 sum.
extern "C" __global__ void kb_cumsum(const float* __restrict__ x, float* __restrict__ out, long long rows,
                                     long long len) {
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (long long k = 0; k < len; ++k) {
    acc += x[r * len + k];
    out[r * len + k] = acc;
  }
}
