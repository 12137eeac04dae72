// A straightforward starting kernel: one thread per element.
extern "C" __global__ void kb_scale(const float* __restrict__ A, const float* __restrict__ s, float* __restrict__ out,
                                    long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = A[i] * s[0];
}
