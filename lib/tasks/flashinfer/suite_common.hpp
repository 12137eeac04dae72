// Building blocks the four flashinfer tasks share: tensors in FlashInfer's
// dtypes with FlashInfer-Bench's random-input rules, paged workloads, the
// tolerance, and solutions from embedded files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/task.hpp"

namespace ks::tasks::flashinfer {

// FlashInfer-Bench's rule for random inputs (bench/utils.py): floats
// standard normal; fp8 standard normal clamped to [-2, 2]; bool 0/1; int8
// [-128, 127]; other integers [-1024, 1023].
Distribution random_rule(DType t);
Distribution constant(std::string value);

TensorSpec input(std::string name, DType t, std::vector<std::string> shape);
TensorSpec input(std::string name, DType t, std::vector<std::string> shape, Distribution d);
TensorSpec scalar(std::string name, DType t, Distribution d);
TensorSpec output(std::string name, DType t, std::vector<std::string> shape);

// atol = rtol = 1e-2, FlashInfer's element rule, any NaN or infinity fails,
// `matched` the fraction of elements that must pass.
Tolerance flashinfer_tolerance(double matched = 1.0);

// A CUDA solution of the task from an embedded source and plan.
Solution cuda_solution(std::string name, std::string_view task, std::string file, std::string_view source,
                       std::string_view plan_json, std::string description);

// One paged-KV workload: `batch` requests of `mean_len` entries on average
// (lengths drawn at random, each at least 1), a page pool of at least
// `pool_factor` times the entries used (and never under 16384 pages), the
// given constant axes, and an sm_scale override when `sm_scale` > 0.
struct PagedCase {
  std::string name;
  std::int64_t batch = 1;
  std::int64_t mean_len = 1;
  bool benchmark = true;
  std::uint64_t seed = 0;
  double sm_scale = 0;
  std::int64_t pool_factor = 2;
};
// Triton candidates where the task has a CUDA reference, python ones where
// it has a CUDA or C++ one, called
// as FlashInfer-Bench calls a Solution: `run` in main.py with the
// definition's inputs in order (scalars as Python numbers), then its outputs
// to fill (destination-passing style), or returning them.
void add_python_languages(TaskSpec& spec);

WorkloadSpec paged_workload(const PagedCase& c, const std::map<std::string, std::int64_t>& constants);

}  // namespace ks::tasks::flashinfer
