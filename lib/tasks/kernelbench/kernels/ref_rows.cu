// kernelbench/level1 native tasks: trusted references of the row-wise
// operations over a contiguous last axis: softmax (23), log-softmax (24) and
// the statistics of LayerNorm (40). One block of 256 threads per row; sums are
// accumulated in double, and the block-wide sums are combined in a fixed
// order, so the result does not depend on scheduling.
#define KB_REF_THREADS 256

__device__ double kb_ref_block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = KB_REF_THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

__device__ double kb_ref_block_max(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = KB_REF_THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) shared[threadIdx.x] = fmax(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

// log_output = 0: softmax; 1: log-softmax.
extern "C" __global__ void kb_ref_softmax(const float* __restrict__ x, float* __restrict__ out, long long cols,
                                          int log_output) {
  __shared__ double shared[KB_REF_THREADS];
  const float* row = x + (long long)blockIdx.x * cols;
  float* dst = out + (long long)blockIdx.x * cols;
  double m = __longlong_as_double(0xfff0000000000000ULL);  // -infinity
  for (long long j = threadIdx.x; j < cols; j += KB_REF_THREADS) m = fmax(m, (double)row[j]);
  m = kb_ref_block_max(m, shared);
  double s = 0.0;
  for (long long j = threadIdx.x; j < cols; j += KB_REF_THREADS) s += exp((double)row[j] - m);
  s = kb_ref_block_sum(s, shared);
  const double log_s = log(s);
  for (long long j = threadIdx.x; j < cols; j += KB_REF_THREADS) {
    const double d = (double)row[j] - m;
    dst[j] = (float)(log_output ? d - log_s : exp(d) / s);
  }
}

// LayerNorm statistics of each row: stats[2*r] = mean, stats[2*r+1] =
// 1 / sqrt(biased variance + eps), variance from a second pass around the mean.
extern "C" __global__ void kb_ref_row_stats(const float* __restrict__ x, double* __restrict__ stats, long long cols,
                                            double eps) {
  __shared__ double shared[KB_REF_THREADS];
  const float* row = x + (long long)blockIdx.x * cols;
  double s = 0.0;
  for (long long j = threadIdx.x; j < cols; j += KB_REF_THREADS) s += row[j];
  const double mean = kb_ref_block_sum(s, shared) / (double)cols;
  double q = 0.0;
  for (long long j = threadIdx.x; j < cols; j += KB_REF_THREADS) {
    const double d = (double)row[j] - mean;
    q += d * d;
  }
  const double var = kb_ref_block_sum(q, shared) / (double)cols;
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = 1.0 / sqrt(var + eps);
  }
}

// out = (x - mean) * rstd * weight + bias, weight and bias of the row's length.
extern "C" __global__ void kb_ref_layer_norm_apply(const float* __restrict__ x, const double* __restrict__ stats,
                                                   const float* __restrict__ weight, const float* __restrict__ bias,
                                                   float* __restrict__ out, long long rows, long long cols) {
  const long long n = rows * cols, stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const long long r = i / cols, j = i % cols;
    out[i] = (float)(((double)x[i] - stats[2 * r]) * stats[2 * r + 1] * (double)weight[j] + (double)bias[j]);
  }
}
