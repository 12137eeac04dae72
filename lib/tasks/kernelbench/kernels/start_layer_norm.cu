// A straightforward starting kernel for LayerNorm over each row of `cols`
// elements: one block of 256 threads per row computes the mean and the
// variance (two passes, FP32), then a grid-wide kernel normalises and applies
// the weight and bias.
#define THREADS 256

__device__ float block_sum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

extern "C" __global__ void ln_stats(const float* __restrict__ x, float* __restrict__ stats, long long cols,
                                    float eps) {
  __shared__ float shared[THREADS];
  const float* row = x + (long long)blockIdx.x * cols;
  float s = 0.0f;
  for (long long j = threadIdx.x; j < cols; j += THREADS) s += row[j];
  const float mean = block_sum(s, shared) / (float)cols;
  float q = 0.0f;
  for (long long j = threadIdx.x; j < cols; j += THREADS) {
    const float d = row[j] - mean;
    q += d * d;
  }
  const float var = block_sum(q, shared) / (float)cols;
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = rsqrtf(var + eps);
  }
}

extern "C" __global__ void ln_apply(const float* __restrict__ x, const float* __restrict__ stats,
                                    const float* __restrict__ weight, const float* __restrict__ bias,
                                    float* __restrict__ out, long long rows, long long cols) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const long long r = i / cols, j = i % cols;
  out[i] = (x[i] - stats[2 * r]) * stats[2 * r + 1] * weight[j] + bias[j];
}
