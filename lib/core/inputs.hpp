// What a task's inputs hold on one workload, computed on the host: the
// distribution each input follows there, scalar values, data given by the
// workload (inline values or a .safetensors tensor), structured integer
// inputs, and whole input sets for CPU references and tests. The evaluation
// flow and the devices use the same functions, so the host's copies are the
// device's inputs bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ksearch/task.hpp"
#include "util/expr.hpp"

namespace ks::core {

// The workload's override for `t`, or the tensor's own distribution.
const Distribution& distribution_of(const TensorSpec& t, const WorkloadSpec& w);

// The value of scalar input `t` on workload `w`, converted to its dtype (an
// f32 value is rounded to float, integers round and saturate, bool is 0 or
// 1): a constant distribution's value, or one draw of the distribution from
// the workload's seed. Throws ks::Error(Status::invalid_argument).
double scalar_value(const TensorSpec& t, const WorkloadSpec& w);

// Every scalar input of the task on `w`, by name.
std::map<std::string, double> scalar_values(const TaskSpec& task, const WorkloadSpec& w);

// The evaluated shape of a tensor on a workload's dimensions.
std::vector<std::int64_t> tensor_shape(const TensorSpec& t, const util::Vars& dims);
std::size_t element_count(const std::vector<std::int64_t>& shape);

// The bytes of an input the workload gives as data, in the tensor's dtype:
// inline values (converted as generated inputs are) or a .safetensors tensor
// whose dtype and shape must be the tensor's. A relative file is looked up
// under `base_dir`. Throws ks::Error naming the workload, tensor and problem.
std::vector<unsigned char> input_data_bytes(const TensorSpec& t, const WorkloadSpec& w,
                                            const std::vector<std::int64_t>& shape,
                                            const std::filesystem::path& base_dir = {});

// Fills `count` elements of a `dtype` array with a distribution's draws
// (element-wise kinds through ks_rng_value, structured kinds through
// core/rng/structured.hpp) for (seed, stream).
void generate_values(void* data, DType dtype, std::size_t count, Distribution::Kind kind, double p0, double p1,
                     std::uint64_t seed, std::uint64_t stream);

// One input set of a workload as host arrays, exactly what the evaluation
// puts on the device for input seed `seed_index` (0, 1, ...): for CPU
// references and tests. Outputs are allocated (zeroed) too.
struct HostTensor {
  const TensorSpec* spec = nullptr;
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;  // empty for scalars
  double scalar = 0;                 // the value of a scalar input

  std::size_t count() const { return element_count(shape); }
  double at(std::size_t i) const;    // element i as a double
  template <class T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <class T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
};
std::map<std::string, HostTensor> generate_host_inputs(const TaskSpec& task, const WorkloadSpec& w,
                                                       std::uint64_t seed_index = 0);

}  // namespace ks::core
