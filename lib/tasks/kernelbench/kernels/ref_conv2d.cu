// kernelbench/level1 native task 63: trusted reference of a 2-D convolution,
// stride 1, no padding, no bias: x [N, C, H, W], w [K, C, R, S] ->
// out [N, K, H-R+1, W-S+1]. One thread per output, products accumulated in
// double (true FP32 inputs; no TF32, see docs/tasks/kernelbench.md).
extern "C" __global__ void kb_ref_conv2d(const float* __restrict__ x, const float* __restrict__ w,
                                         float* __restrict__ out, long long N, long long C, long long H, long long W,
                                         long long K, long long R, long long S) {
  const long long P = H - R + 1, Q = W - S + 1;
  const long long total = N * K * P * Q, stride = (long long)gridDim.x * blockDim.x;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
    const long long q = t % Q, p = (t / Q) % P, k = (t / (P * Q)) % K, n = t / (K * P * Q);
    double acc = 0.0;
    for (long long c = 0; c < C; ++c)
      for (long long r = 0; r < R; ++r)
        for (long long s = 0; s < S; ++s)
          acc += (double)x[((n * C + c) * H + p + r) * W + q + s] * (double)w[((k * C + c) * R + r) * S + s];
    out[t] = (float)acc;
  }
}
