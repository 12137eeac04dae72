// kernelbench/level1 native tasks: trusted references of the operations along
// a middle axis of a tensor viewed as [outer, len, inner]: sum, mean, max
// (47, 48, 49), RMSNorm over the feature axis (36), and the cumulative sum
// along the last axis (89, inner = 1). One thread per (outer, inner) line,
// walking the axis in order, accumulating in double.
#define KB_AXIS_SUM 0
#define KB_AXIS_MEAN 1
#define KB_AXIS_MAX 2

extern "C" __global__ void kb_ref_reduce_axis(const float* __restrict__ x, float* __restrict__ out, long long outer,
                                              long long len, long long inner, int op) {
  const long long lines = outer * inner, stride = (long long)gridDim.x * blockDim.x;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < lines; t += stride) {
    const long long o = t / inner, i = t % inner;
    const float* p = x + o * len * inner + i;
    double acc = op == KB_AXIS_MAX ? (double)p[0] : 0.0;
    for (long long k = 0; k < len; ++k) {
      const double v = p[k * inner];
      acc = op == KB_AXIS_MAX ? fmax(acc, v) : acc + v;
    }
    out[t] = (float)(op == KB_AXIS_MEAN ? acc / (double)len : acc);
  }
}

// out = x / sqrt(mean(x^2 over the axis) + eps), per (outer, inner) line.
extern "C" __global__ void kb_ref_rms_norm(const float* __restrict__ x, float* __restrict__ out, long long outer,
                                           long long len, long long inner, double eps) {
  const long long lines = outer * inner, stride = (long long)gridDim.x * blockDim.x;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < lines; t += stride) {
    const long long base = (t / inner) * len * inner + t % inner;
    double q = 0.0;
    for (long long k = 0; k < len; ++k) {
      const double v = x[base + k * inner];
      q += v * v;
    }
    const double rms = sqrt(q / (double)len + eps);
    for (long long k = 0; k < len; ++k) out[base + k * inner] = (float)((double)x[base + k * inner] / rms);
  }
}

// Inclusive prefix sum of each row of `len` elements.
extern "C" __global__ void kb_ref_cumsum(const float* __restrict__ x, float* __restrict__ out, long long rows,
                                         long long len) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
    double acc = 0.0;
    for (long long k = 0; k < len; ++k) {
      acc += x[r * len + k];
      out[r * len + k] = (float)acc;
    }
  }
}
