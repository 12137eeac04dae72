// Host copies of a KernelBench native task's inputs, bit for bit what the
// evaluation backends put on the device (same generator, streams and seeds),
// so the CPU references see the GPU's inputs.
#include <math.h>  // ks_rng.h calls math functions unqualified

#include <fmt/format.h>

#include "core/rng/ks_rng.h"
#include "core/rng/rng_stream.hpp"
#include "ksearch/error.hpp"
#include "tasks/kernelbench/level1.hpp"
#include "util/expr.hpp"

namespace ks::tasks::kernelbench {

HostTensors generate_host_inputs(const TaskSpec& spec, const WorkloadSpec& workload, std::uint64_t seed_index) {
  util::Vars vars(workload.dims.begin(), workload.dims.end());
  const ks_u64 seed = ks_rng_derive_seed(workload.seed, seed_index);
  HostTensors out;
  for (const auto& t : spec.tensors) {
    if (t.is_output) continue;
    if (t.dtype != DType::f32)
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\": input \"{}\" is {}, host inputs are float32 only", spec.name, t.name,
                              to_string(t.dtype)));
    auto ov = workload.dist_overrides.find(t.name);
    const Distribution& d = ov != workload.dist_overrides.end() ? ov->second : t.dist;
    std::int64_t count = 1;
    for (const auto& s : t.shape) count *= util::eval_int_expr(s, vars);
    const double p0 = util::eval_double_expr(d.p0, vars);
    const double p1 = util::eval_double_expr(d.p1, vars);
    const ks_u64 stream = core::rng_stream_of(t.name);
    auto& v = out[t.name];
    v.resize(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i)
      v[static_cast<std::size_t>(i)] =
          static_cast<float>(ks_rng_value(static_cast<int>(d.kind), p0, p1, seed, stream, static_cast<ks_u64>(i)));
  }
  return out;
}

}  // namespace ks::tasks::kernelbench
