#include "flashinfer_test_util.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "emu/plan_runner.hpp"
#include "eval/compare.hpp"
#if KS_HAVE_CUDA_BACKEND
#include "eval/cuda/cuda_backend.hpp"
#endif
#include "ksearch/error.hpp"
#include "support/test_util.hpp"
#include "tasks/flashinfer/flashinfer.hpp"

namespace ks::test {

WorkloadSpec with_dims(const WorkloadSpec& w, const std::map<std::string, std::int64_t>& dims,
                       const std::string& name) {
  WorkloadSpec out = w;
  out.name = name;
  for (const auto& [k, v] : dims) out.dims[k] = v;
  return out;
}

HostTensors run_emulated(const TaskSpec& task, const WorkloadSpec& w, const ks_emu::KernelTable& table,
                         const LaunchPlan& plan, std::uint64_t seed_index) {
  HostTensors t = core::generate_host_inputs(task, w, seed_index);
  std::map<std::string, std::unique_ptr<ks_emu::GuardedBuffer>> bufs;
  std::map<std::string, ks_emu::GuardedBuffer*> ptrs;
  std::map<std::string, double> scalars;
  util::Vars vars(w.dims.begin(), w.dims.end());
  for (auto& [name, h] : t) {
    if (h.spec->scalar) {
      scalars[name] = h.scalar;
      if (!dtype_is_float(h.spec->dtype)) vars[name] = static_cast<std::int64_t>(h.scalar);
      continue;
    }
    auto b = std::make_unique<ks_emu::GuardedBuffer>(h.bytes.size());
    if (!h.spec->is_output) std::memcpy(b->data(), h.bytes.data(), h.bytes.size());  // outputs stay poisoned
    ptrs[name] = b.get();
    bufs[name] = std::move(b);
  }
  ks_emu::run_plan(table, plan, ptrs, vars, scalars);
  for (auto& [name, h] : t) {
    if (h.spec->scalar) continue;
    if (!h.spec->is_output) {
      REQUIRE_MESSAGE(std::memcmp(bufs[name]->data(), h.bytes.data(), h.bytes.size()) == 0,
                      "the kernel modified input \"", name, "\"");
      continue;
    }
    std::memcpy(h.bytes.data(), bufs[name]->data(), h.bytes.size());
  }
  return t;
}

HostTensors cpu_outputs(const TaskSpec& task, const WorkloadSpec& w, std::uint64_t seed_index) {
  HostTensors t = core::generate_host_inputs(task, w, seed_index);
  tasks::flashinfer::cpu_reference(task.name, t);
  return t;
}

std::string compare_outputs(const TaskSpec& task, const HostTensors& got, const HostTensors& want,
                            const Tolerance& tol) {
  std::string problems;
  for (const auto& t : task.tensors) {
    if (!t.is_output) continue;
    const auto& g = got.at(t.name);
    const auto& r = want.at(t.name);
    const eval::CompareStats st = eval::compare_elements(g.bytes.data(), r.bytes.data(), t.dtype, g.count(), tol);
    if (st.matched_ratio() >= tol.min_matched_ratio && st.nonfinite_outputs == 0 && st.poisoned == 0) continue;
    problems += fmt::format("{}: {} of {} elements differ ({} NaN/inf, {} unwritten), first at {}: got {}, want {}; "
                            "max abs error {}; ",
                            t.name, st.mismatches, st.count, st.nonfinite_outputs, st.poisoned, st.first_bad_index,
                            st.first_bad_out, st.first_bad_ref, st.max_abs_error);
  }
  return problems;
}

std::string check_compiles(const TaskSpec& task, const Solution& s) {
  static std::unique_ptr<eval::Compiler> compiler = []() -> std::unique_ptr<eval::Compiler> {
#if !KS_HAVE_CUDA_BACKEND
    MESSAGE("skipped NVRTC checks: this build has no CUDA backend (KS_WITH_CUDA=OFF)");
    return nullptr;
#else
    eval::CudaCompilerOptions opt;
    opt.arch = "sm_90a";
    opt.cache_dir = scratch_dir("flashinfer_nvrtc_cache").string();
    try {
      return eval::make_cuda_compiler(opt);
    } catch (const Error& e) {
      MESSAGE("skipped NVRTC checks: " << e.what());
      return nullptr;
    }
#endif
  }();
  if (!compiler) return "";
  eval::CompileRequest req;
  req.solution = s;
  req.arch = "sm_90a";
  req.tensors = task.tensors;
  try {
    eval::Artifact art = compiler->compile(req);
    for (const auto& n : s.launch_plan.names())
      CHECK_MESSAGE(std::find(art.kernels.begin(), art.kernels.end(), n) != art.kernels.end(), s.name,
                    ": kernel ", n, " is not in the module");
    return art.log;
  } catch (const eval::CompileError& e) {
    FAIL(s.name << " does not compile: " << e.what() << "\n" << e.log());
  }
  return "";
}

}  // namespace ks::test
