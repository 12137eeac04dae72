// GQA paged decode (gqa_paged_decode_h32_kv4_d128_ps1) for import_check.sh:
// a plain, correct kernel written for libksearch's check, not a tuned one.
#pragma once
#include <cuda_runtime.h>

void gqa_decode_launch(const void* q, const void* k_cache, const void* v_cache, const int* kv_indptr,
                       const int* kv_indices, float sm_scale, int batch, void* output, float* lse,
                       cudaStream_t stream);
