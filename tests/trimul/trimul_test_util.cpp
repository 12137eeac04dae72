#include "trimul_test_util.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <map>

#include "emu/plan_runner.hpp"

namespace ks::test {

WorkloadSpec trimul_workload(const TaskSpec& spec, const std::string& name) {
  const WorkloadSpec* w = spec.find_workload(name);
  REQUIRE_MESSAGE(w != nullptr, "no workload " << name);
  return *w;
}

WorkloadSpec trimul_workload_with_dims(const TaskSpec& spec, const std::string& name, std::int64_t B,
                                       std::int64_t N, std::int64_t C, std::int64_t H) {
  WorkloadSpec w = trimul_workload(spec, name);
  w.name += fmt::format("_as_b{}_n{}_c{}_h{}", B, N, C, H);
  w.dims = {{"B", B}, {"N", N}, {"C", C}, {"H", H}};
  return w;
}

std::vector<float> run_emulated(const ks_emu::KernelTable& table, const LaunchPlan& plan,
                                const tasks::gpumode::TrimulInputs& inputs, const util::Vars& params) {
  std::map<std::string, std::unique_ptr<ks_emu::GuardedBuffer>> owned;
  std::map<std::string, ks_emu::GuardedBuffer*> tensors;
  for (const auto& name : tasks::gpumode::trimul_tensor_names()) {
    const std::vector<float>* src = inputs.find(name);
    const std::size_t count = src ? src->size() : inputs.output_size();
    auto buf = std::make_unique<ks_emu::GuardedBuffer>(count * sizeof(float));
    if (src) std::memcpy(buf->data(), src->data(), count * sizeof(float));
    tensors[name] = buf.get();
    owned[name] = std::move(buf);
  }
  util::Vars vars = params;
  vars["B"] = inputs.B;
  vars["N"] = inputs.N;
  vars["C"] = inputs.C;
  vars["H"] = inputs.H;
  std::map<std::string, DType> dtypes;
  for (const auto& name : tasks::gpumode::trimul_tensor_names()) dtypes[name] = DType::f32;
  ks_emu::run_plan(table, plan, tensors, vars, {}, dtypes);
  std::vector<float> out(inputs.output_size());
  std::memcpy(out.data(), owned.at("out")->data(), out.size() * sizeof(float));
  return out;
}

std::string Agreement::describe() const {
  return fmt::format("{} mismatches, max |out - ref| = {:.3g}, first bad index {}", mismatches,
                     max_abs_error, first_bad);
}

Agreement agreement(const std::vector<float>& out, const std::vector<float>& ref, double atol,
                    double rtol) {
  REQUIRE(out.size() == ref.size());
  Agreement a;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double o = out[i], r = ref[i];
    bool ok;
    if (std::isfinite(o) && std::isfinite(r)) {
      const double err = std::fabs(o - r);
      if (err > a.max_abs_error) a.max_abs_error = err;
      ok = err <= atol + rtol * std::fabs(r);
    } else {
      ok = (std::isnan(o) && std::isnan(r)) || (std::isinf(o) && std::isinf(r) && (o > 0) == (r > 0));
    }
    if (!ok) {
      if (a.first_bad < 0) a.first_bad = static_cast<std::int64_t>(i);
      ++a.mismatches;
    }
  }
  return a;
}

}  // namespace ks::test
