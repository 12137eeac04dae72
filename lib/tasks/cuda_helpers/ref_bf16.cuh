__device__ __forceinline__ float ref_bf16(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
