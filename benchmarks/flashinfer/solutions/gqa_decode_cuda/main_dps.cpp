// binding torch, destination-passing: fills output and lse.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "kernel.h"

void run(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache, torch::Tensor kv_indptr,
         torch::Tensor kv_indices, double sm_scale, torch::Tensor output, torch::Tensor lse) {
  TORCH_CHECK(q.is_cuda() && q.scalar_type() == at::kBFloat16 && q.is_contiguous(), "q: contiguous bf16 on the GPU");
  gqa_decode_launch(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), kv_indptr.data_ptr<int>(),
                    kv_indices.data_ptr<int>(), static_cast<float>(sm_scale), static_cast<int>(q.size(0)),
                    output.data_ptr(), lse.data_ptr<float>(), at::cuda::getCurrentCUDAStream());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
