// A straightforward starting kernel: one thread per element. KB_OP(v) is the
// activation in float, defined on the first line.
extern "C" __global__ void kb_elementwise(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    out[i] = KB_OP(v);
  }
}
