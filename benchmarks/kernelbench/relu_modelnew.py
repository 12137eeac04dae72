# KernelBench's solution format for level 1 problem 19_ReLU, wrapping the same
# device code as libksearch's starting kernel (kb_elementwise, KB_OP = fmaxf)
# with load_inline, for the evaluation-time benchmark (gpu_check.sh bench).
# Not an export of a libksearch build (that is issue 12 item 4); a rebuild
# with nvcc, as K-Search's KernelBench adapter would run it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#define KB_OP(v) fmaxf(v, 0.0f)
extern "C" __global__ void kb_elementwise(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { const float v = x[i]; out[i] = KB_OP(v); }
}
torch::Tensor relu_forward(torch::Tensor x) {
  auto out = torch::empty_like(x);
  const long long n = x.numel();
  kb_elementwise<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
  return out;
}
"""
ext = load_inline(name="kb_relu_VARIANT", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
