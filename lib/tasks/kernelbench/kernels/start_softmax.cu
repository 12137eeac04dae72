// A straightforward starting kernel: one block of 256 threads per row, three
// passes over the row (max, sum of exponentials, write), FP32 throughout.
// LOG_OUTPUT (defined on the first line) selects log-softmax.
#define THREADS 256

__device__ float block_reduce(float v, float* shared, bool is_max) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s)
      shared[threadIdx.x] = is_max ? fmaxf(shared[threadIdx.x], shared[threadIdx.x + s])
                                   : shared[threadIdx.x] + shared[threadIdx.x + s];
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

extern "C" __global__ void kb_softmax(const float* __restrict__ x, float* __restrict__ out, long long cols) {
  __shared__ float shared[THREADS];
  const float* row = x + (long long)blockIdx.x * cols;
  float* dst = out + (long long)blockIdx.x * cols;
  float m = __int_as_float(0xff800000);  // -infinity
  for (long long j = threadIdx.x; j < cols; j += THREADS) m = fmaxf(m, row[j]);
  m = block_reduce(m, shared, true);
  float s = 0.0f;
  for (long long j = threadIdx.x; j < cols; j += THREADS) s += expf(row[j] - m);
  s = block_reduce(s, shared, false);
  const float log_s = logf(s);
  for (long long j = threadIdx.x; j < cols; j += THREADS)
    dst[j] = LOG_OUTPUT ? (row[j] - m) - log_s : expf(row[j] - m) / s;
}
