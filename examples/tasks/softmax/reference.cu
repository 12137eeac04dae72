// The softmax task's trusted reference: one block per row and three plain
// passes over it (maximum, sum of exponentials, normalise), all in fp32 with
// the accurate expf. Written for obviousness, not speed.

// Reduces `v` over the block; every thread gets the result. `scratch` holds
// one value per warp.
__device__ float block_reduce(float v, float* scratch, bool take_max) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = take_max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = (blockDim.x + 31) / 32;
  __syncthreads();  // scratch may still be read from the previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (take_max ? __int_as_float(0xff800000) : 0.0f);
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = take_max ? fmaxf(v, other) : v + other;
  }
  return v;
}

// y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)), row-major R x C.
extern "C" __global__ void softmax_reference(const float* __restrict__ x, float* __restrict__ y,
                                             int R, int C) {
  __shared__ float scratch[32];
  const long long row = blockIdx.x;
  if (row >= R) return;
  const float* xr = x + row * C;
  float* yr = y + row * C;

  float m = __int_as_float(0xff800000);  // -inf
  for (int c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_reduce(m, scratch, true);

  float s = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) s += expf(xr[c] - m);
  s = block_reduce(s, scratch, false);

  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < C; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
