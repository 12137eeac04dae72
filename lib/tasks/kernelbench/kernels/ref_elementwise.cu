// kernelbench/level1 native tasks: trusted reference of the elementwise
// activations (19-32). The task prepends `#define KB_REF_OP(v) ...`, the
// activation written in double precision; the result is rounded to float once.
extern "C" __global__ void kb_ref_elementwise(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double v = x[i];
    out[i] = (float)(KB_REF_OP(v));
  }
}
