// Host-side input generation for gpumode/trimul, bit-for-bit what the
// evaluation backends put on the device (same counter-based generator, same
// streams and seeds), so the CPU reference sees the GPU's inputs.
#include <fmt/format.h>

#include "core/rng/ks_rng.h"
#include "core/rng/rng_stream.hpp"
#include "ksearch/error.hpp"
#include "tasks/gpumode/trimul.hpp"
#include "util/expr.hpp"

namespace ks::tasks::gpumode {
namespace {

using Member = std::vector<float> TrimulInputs::*;

struct Field {
  std::string_view name;
  Member member;
};

constexpr Field kFields[] = {
    {"x", &TrimulInputs::x},
    {"mask", &TrimulInputs::mask},
    {"norm_weight", &TrimulInputs::norm_weight},
    {"norm_bias", &TrimulInputs::norm_bias},
    {"left_proj", &TrimulInputs::left_proj},
    {"right_proj", &TrimulInputs::right_proj},
    {"left_gate", &TrimulInputs::left_gate},
    {"right_gate", &TrimulInputs::right_gate},
    {"out_gate", &TrimulInputs::out_gate},
    {"to_out_norm_weight", &TrimulInputs::to_out_norm_weight},
    {"to_out_norm_bias", &TrimulInputs::to_out_norm_bias},
    {"to_out", &TrimulInputs::to_out},
};

std::int64_t dim_of(const WorkloadSpec& w, const char* name) {
  auto it = w.dims.find(name);
  if (it == w.dims.end())
    throw Error(Status::invalid_argument,
                fmt::format("gpumode/trimul: workload \"{}\" does not set dimension {}", w.name, name));
  return it->second;
}

}  // namespace

std::vector<float>* TrimulInputs::find(std::string_view tensor) {
  for (const auto& f : kFields)
    if (f.name == tensor) return &(this->*f.member);
  return nullptr;
}

const std::vector<float>* TrimulInputs::find(std::string_view tensor) const {
  return const_cast<TrimulInputs*>(this)->find(tensor);
}

void TrimulInputs::check_sizes() const {
  if (B <= 0 || N <= 0 || C <= 0 || H <= 0)
    throw Error(Status::invalid_argument,
                fmt::format("trimul inputs: dimensions must be positive (B={}, N={}, C={}, H={})", B,
                            N, C, H));
  auto expect = [&](std::string_view name, std::int64_t n) {
    const auto& v = *find(name);
    if (static_cast<std::int64_t>(v.size()) != n)
      throw Error(Status::invalid_argument,
                  fmt::format("trimul inputs: \"{}\" has {} elements, expected {} for B={}, N={}, "
                              "C={}, H={}",
                              name, v.size(), n, B, N, C, H));
  };
  expect("x", B * N * N * C);
  expect("mask", B * N * N);
  expect("norm_weight", C);
  expect("norm_bias", C);
  for (auto name : {"left_proj", "right_proj", "left_gate", "right_gate", "out_gate"})
    expect(name, H * C);
  expect("to_out_norm_weight", H);
  expect("to_out_norm_bias", H);
  expect("to_out", C * H);
}

TrimulInputs generate_trimul_inputs(const TaskSpec& spec, const WorkloadSpec& workload,
                                    std::uint64_t seed_index) {
  TrimulInputs in;
  in.B = dim_of(workload, "B");
  in.N = dim_of(workload, "N");
  in.C = dim_of(workload, "C");
  in.H = dim_of(workload, "H");
  util::Vars vars(workload.dims.begin(), workload.dims.end());
  const ks_u64 seed = ks_rng_derive_seed(workload.seed, seed_index);

  for (const auto& f : kFields) {
    const TensorSpec* t = spec.find_tensor(f.name);
    if (!t)
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\" has no tensor \"{}\"; not a trimul task", spec.name, f.name));
    auto ov = workload.dist_overrides.find(t->name);
    const Distribution& d = ov != workload.dist_overrides.end() ? ov->second : t->dist;
    std::int64_t count = 1;
    for (const auto& s : t->shape) count *= util::eval_int_expr(s, vars);
    const double p0 = util::eval_double_expr(d.p0, vars);
    const double p1 = util::eval_double_expr(d.p1, vars);
    const ks_u64 stream = core::rng_stream_of(t->name);
    auto& out = in.*f.member;
    out.resize(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i)
      out[static_cast<std::size_t>(i)] = static_cast<float>(
          ks_rng_value(static_cast<int>(d.kind), p0, p1, seed, stream, static_cast<ks_u64>(i)));
  }
  in.check_sizes();
  return in;
}

}  // namespace ks::tasks::gpumode
