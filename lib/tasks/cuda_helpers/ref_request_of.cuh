__device__ __forceinline__ int ref_request_of(const int* __restrict__ kv_indptr, int batch_size, int j) {
  int lo = 0, hi = batch_size - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (kv_indptr[mid] <= j) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
