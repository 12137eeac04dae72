__device__ __forceinline__ float fp8_e4m3(unsigned b) {
  const unsigned e = (b >> 3) & 15u, m = b & 7u;
  float v = e == 0 ? (float)m * 0.001953125f : __uint_as_float((e + 120u) << 23 | m << 20);
  if (e == 15u && m == 7u) v = __int_as_float(0x7fc00000);
  return (b & 0x80u) ? -v : v;
}
