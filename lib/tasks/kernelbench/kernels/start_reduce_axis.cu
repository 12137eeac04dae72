// A straightforward starting kernel for a reduction over the middle axis of
// x viewed as [outer, len, inner]: one thread per (outer, inner) output,
// walking the axis in order. REDUCE_OP (first line): 0 sum, 1 mean, 2 max.
extern "C" __global__ void kb_reduce_axis(const float* __restrict__ x, float* __restrict__ out, long long outer,
                                          long long len, long long inner) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= outer * inner) return;
  const float* p = x + (t / inner) * len * inner + t % inner;
  float acc = REDUCE_OP == 2 ? p[0] : 0.0f;
  for (long long k = 0; k < len; ++k) acc = REDUCE_OP == 2 ? fmaxf(acc, p[k * inner]) : acc + p[k * inner];
  out[t] = REDUCE_OP == 1 ? acc / (float)len : acc;
}
