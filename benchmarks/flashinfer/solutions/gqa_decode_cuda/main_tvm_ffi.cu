// binding tvm-ffi (FlashInfer-Bench's default), destination-passing: fills
// output and lse. Tensors arrive as DLPack views; the launch goes on the
// stream the caller's framework is on (TVMFFIEnvGetStream).
// A .cu file: tvm-ffi (called as FlashInfer-Bench's builder calls it) compiles a .cpp with the
// C++ compiler and without CUDA's include path, so code that includes kernel.h goes in a .cu.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include "kernel.h"

using tvm::ffi::TensorView;

void run(TensorView q, TensorView k_cache, TensorView v_cache, TensorView kv_indptr, TensorView kv_indices,
         double sm_scale, TensorView output, TensorView lse) {
  TVM_FFI_ICHECK(q.device().device_type == kDLCUDA && q.dtype().code == kDLBfloat && q.dtype().bits == 16 &&
                 q.IsContiguous())
      << "q: contiguous bf16 on the GPU";
  TVM_FFI_ICHECK(kv_indptr.dtype().code == kDLInt && kv_indptr.dtype().bits == 32) << "kv_indptr: int32";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(q.device().device_type, q.device().device_id));
  gqa_decode_launch(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), static_cast<const int*>(kv_indptr.data_ptr()),
                    static_cast<const int*>(kv_indices.data_ptr()), static_cast<float>(sm_scale),
                    static_cast<int>(q.size(0)), output.data_ptr(), static_cast<float*>(lse.data_ptr()), stream);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
