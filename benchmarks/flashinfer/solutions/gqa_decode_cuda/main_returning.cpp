// The older schema (K-Search's published kernels): run returns the outputs.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include "kernel.h"

std::tuple<torch::Tensor, torch::Tensor> run(torch::Tensor q, torch::Tensor k_cache, torch::Tensor v_cache,
                                             torch::Tensor kv_indptr, torch::Tensor kv_indices, double sm_scale) {
  TORCH_CHECK(q.is_cuda() && q.scalar_type() == at::kBFloat16 && q.is_contiguous(), "q: contiguous bf16 on the GPU");
  auto output = torch::empty_like(q);
  auto lse = torch::empty({q.size(0), q.size(1)}, q.options().dtype(torch::kFloat32));
  gqa_decode_launch(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), kv_indptr.data_ptr<int>(),
                    kv_indices.data_ptr<int>(), static_cast<float>(sm_scale), static_cast<int>(q.size(0)),
                    output.data_ptr(), lse.data_ptr<float>(), at::cuda::getCurrentCUDAStream());
  return {output, lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
