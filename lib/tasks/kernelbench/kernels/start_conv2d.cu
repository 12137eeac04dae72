// A straightforward starting kernel: direct 2-D convolution (stride 1, no
// padding, no bias), one thread per output element, FP32 accumulation.
// x [N, C, H, W], w [K, C, R, S] -> out [N, K, H-R+1, W-S+1].
extern "C" __global__ void kb_conv2d(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                                     long long N, long long C, long long H, long long W, long long K, long long R,
                                     long long S) {
  const long long P = H - R + 1, Q = W - S + 1;
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= N * K * P * Q) return;
  const long long q = t % Q, p = (t / Q) % P, k = (t / (P * Q)) % K, n = t / (K * P * Q);
  float acc = 0.0f;
  for (long long c = 0; c < C; ++c)
    for (long long r = 0; r < R; ++r)
      for (long long s = 0; s < S; ++s)
        acc += x[((n * C + c) * H + p + r) * W + q + s] * w[((k * C + c) * R + r) * S + s];
  out[t] = acc;
}
