// The flashinfer suite on a GPU (ctest label `gpu`; skips, saying why,
// without one):
//
//   1. inputs generated on the device are the host's, bit for bit (fp8,
//      bf16, indptr, page tables, scalars, data);
//   2. each task's CUDA reference agrees with its CPU reference on small
//      workloads (the task's own edge cases and a few more), through the CUDA
//      backend (NVRTC, launch plans, scalar arguments);
//   3. through the real evaluator (worker processes), each task's starting
//      kernel and baseline pass, and wrong kernels fail: one that reads KV
//      pages in order instead of through the page table (attention), one
//      with a plain bug, and for MoE one that overflows fp8 and one that
//      ignores local_expert_offset.
#include <doctest/doctest.h>
#include <math.h>  // ks_rng.h calls math functions unqualified

#include <algorithm>
#include <cstring>

#include "core/elements.hpp"
#include "core/inputs.hpp"
#include "core/rng/ks_rng.h"
#include "core/rng/rng_stream.hpp"
#include "eval/backend.hpp"
#include "eval/compare.hpp"
#include "eval/cuda/cuda_backend.hpp"
#include "flashinfer_test_util.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"
#include "tasks/flashinfer/flashinfer.hpp"

using namespace ks;
using namespace ks::tasks::flashinfer;

namespace {

bool have_gpu() {
  std::string why;
  if (eval::cuda_probe(&why)) return true;
  MESSAGE("skipped: no usable CUDA device (" << why << ")");
  return false;
}

struct Gpu {
  std::unique_ptr<eval::Device> device = eval::make_cuda_device(0);
  std::unique_ptr<eval::Compiler> compiler = [] {
    eval::CudaCompilerOptions o;
    o.arch = eval::cuda_device_arch(0);
    o.cache_dir = test::scratch_dir("flashinfer_gpu_cache").string();
    return eval::make_cuda_compiler(o);
  }();
};

// Runs `s` on the device on the inputs the evaluator would generate for
// (w, seed_index); returns every tensor downloaded (inputs and outputs).
// With `check_inputs`, also compares the device's inputs with the host's.
test::HostTensors run_on_device(Gpu& gpu, const TaskSpec& task, const WorkloadSpec& w, const Solution& s,
                                std::uint64_t seed_index, bool check_inputs) {
  eval::Device& dev = *gpu.device;
  const util::Vars dims(w.dims.begin(), w.dims.end());
  const std::uint64_t seed = ks_rng_derive_seed(w.seed, seed_index);
  test::HostTensors out;
  eval::Bindings b;
  b.vars = dims;
  std::vector<eval::Buffer> owned;
  for (const auto& t : task.tensors) {
    core::HostTensor h;
    h.spec = &t;
    if (t.scalar) {
      h.scalar = core::scalar_value(t, w);
      b.scalars[t.name] = eval::ScalarArg{t.dtype, h.scalar};
      if (!dtype_is_float(t.dtype)) b.vars[t.name] = static_cast<std::int64_t>(h.scalar);
      out[t.name] = std::move(h);
      continue;
    }
    h.shape = core::tensor_shape(t, dims);
    const std::size_t count = h.count(), bytes = count * dtype_size(t.dtype);
    eval::Buffer buf = dev.alloc(std::max<std::size_t>(bytes, 1));
    owned.push_back(buf);
    b.tensors[t.name] = buf;
    if (t.is_output) {
      dev.poison(buf, bytes);
    } else if (w.data.count(t.name)) {
      auto data = core::input_data_bytes(t, w, h.shape, task.base_dir);
      dev.upload(buf, data.data(), data.size());
    } else {
      const Distribution& d = core::distribution_of(t, w);
      const double p0 = util::eval_double_expr(d.p0, dims), p1 = util::eval_double_expr(d.p1, dims);
      dev.generate(buf, t.dtype, count, d.kind, p0, p1, seed, core::rng_stream_of(t.name));
      if (check_inputs) {
        // The first million elements (all of a structured tensor) against the host's.
        const std::size_t n = d.structured() ? count : std::min<std::size_t>(count, 1u << 20);
        std::vector<unsigned char> host(count * dtype_size(t.dtype)), device(n * dtype_size(t.dtype));
        core::generate_values(host.data(), t.dtype, d.structured() ? count : n, d.kind, p0, p1, seed,
                                core::rng_stream_of(t.name));
        dev.download(device.data(), buf, device.size());
        CHECK_MESSAGE(std::memcmp(host.data(), device.data(), device.size()) == 0, t.name,
                      ": device-generated elements differ from the host's");
      }
    }
    out[t.name] = std::move(h);
  }
  eval::CompileRequest req;
  req.solution = s;
  req.arch = eval::cuda_device_arch(0);
  req.tensors = task.tensors;
  auto program = dev.load(gpu.compiler->compile(req), s);
  program->bind(b);
  program->poison_scratch();
  program->launch();
  program->synchronize();
  dev.synchronize();
  for (auto& [name, h] : out) {
    if (h.spec->scalar) continue;
    h.bytes.resize(h.count() * dtype_size(h.spec->dtype));
    dev.download(h.bytes.data(), b.tensors.at(name), h.bytes.size());
  }
  for (auto buf : owned) dev.free(buf);
  return out;
}

Solution edited(const Solution& s, const std::vector<std::pair<std::string, std::string>>& edits, const std::string& name) {
  Solution out = s;
  out.name = name;
  for (const auto& [from, to] : edits) {
    auto& src = out.sources[0].content;
    const auto at = src.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, name, ": the source has no \"", from, "\"");
    src.replace(at, from.size(), to);
  }
  return out.finalize();
}

struct Wrong {
  std::string name;
  std::vector<std::pair<std::string, std::string>> edits;  // applied to the starting kernel
};

// Deliberately wrong kernels (edits of the starting kernels, as in CMakeLists.txt's emulated ones).
std::vector<Wrong> wrong_variants(std::string_view definition) {
  if (definition == kGqaDecode)
    return {{"pages_in_order", {{"(long long)kv_indices[j] * KV_HEADS", "(long long)j * KV_HEADS"}}},
            {"natural_log_lse", {{"(m + logf(s)) * 1.4426950408889634f", "(m + logf(s))"}}}};
  if (definition == kMlaDecode)
    return {{"pages_in_order", {{"const long long row = kv_indices[j]", "const long long row = j"}}},
            {"no_rotary_part", {{"dot += qp[e] * bf16_to_f32(kpe_cache[row * KPE + lane * 2 + e])", "dot += 0.f * qp[e]"}}}};
  if (definition == kMlaPrefill)
    return {{"pages_in_order", {{"const long long row = kv_indices[kv_begin + j]", "const long long row = kv_begin + j"}}},
            {"no_causal_mask", {{"int visible = kv_len - q_len + i + 1", "int visible = kv_len + 0 * (q_len + i)"}}}};
  // MoE: the intermediate cast to fp8 without a scale (out of range becomes
  // NaN, as PyTorch's float8_e4m3fn cast does), and the offset ignored.
  return {{"fp8_overflow",
           {{"inter[(long long)pair * INTER + i] = x2 / (1.f + expf(-x2)) * x1",
             "inter[(long long)pair * INTER + i] = fabsf(x2 / (1.f + expf(-x2)) * x1) > 448.f ? "
             "__int_as_float(0x7fc00000) : x2 / (1.f + expf(-x2)) * x1"}}},
          {"ignores_local_expert_offset",
           {{"const int le = topk_ids[pair] - local_expert_offset", "const int le = topk_ids[pair] - 0 * local_expert_offset"},
            {"const int le = topk_ids[t * TOPK + k] - local_expert_offset",
             "const int le = topk_ids[t * TOPK + k] - 0 * local_expert_offset"}}}};
}

// Small workloads per task for the reference check: the task's edge cases
// and the smallest timed ones.
std::vector<const WorkloadSpec*> small_workloads(const TaskSpec& t) {
  std::vector<const WorkloadSpec*> out;
  for (const auto& w : t.workloads) {
    const bool moe = t.name.find("moe_") != std::string::npos;
    const std::int64_t size = moe ? w.dims.at("seq_len") : w.dims.count("total_q") ? w.dims.at("num_kv_indices")
                                                                                   : w.dims.at("num_kv_indices");
    if (!w.benchmark || size <= (moe ? 8 : 1100)) out.push_back(&w);
  }
  return out;
}

}  // namespace

TEST_CASE("flashinfer gpu: device inputs are the host's, and each CUDA reference agrees with its CPU reference") {
  if (!have_gpu()) return;
  Gpu gpu;
  MESSAGE("device: " << gpu.device->info().name);
  for (const auto& name : definition_names()) {
    TaskSpec t = *make_spec(name);
    INFO("task " << t.name);
    const bool moe = name == kMoe;
    Tolerance tol = t.tolerance;
    if (moe) {
      tol.min_matched_ratio = 0.999;  // FP32 against double, sums of thousands of large terms
    } else {
      tol.atol = 1e-3;
      tol.rtol = 8e-3;  // a bf16 output may round to the neighbouring value
    }
    bool first = true;
    for (const WorkloadSpec* w : small_workloads(t)) {
      INFO("workload " << w->name);
      auto got = run_on_device(gpu, t, *w, t.references.at(Language::cuda), 1, first);
      first = false;
      auto want = got;  // the device's own inputs
      for (auto& [n, h] : want)
        if (h.spec->is_output) std::fill(h.bytes.begin(), h.bytes.end(), 0);
      cpu_reference(t.name, want);
      const std::string diff = test::compare_outputs(t, got, want, tol);
      CHECK_MESSAGE(diff == "", diff);
      MESSAGE(t.name << " / " << w->name << ": CUDA reference vs CPU reference " << (diff.empty() ? "agree" : diff));
    }
  }
}

TEST_CASE("flashinfer gpu: starting kernels and baselines pass, wrong kernels fail, through the evaluator") {
  if (!have_gpu()) return;
  EvaluatorConfig cfg;
  cfg.backend = ks::EvalBackend::cuda;
  cfg.cache_dir = test::scratch_dir("flashinfer_gpu_eval").string();
  cfg.options.max_time_per_workload_s = 0.3;
  auto ev = make_evaluator(cfg);
  for (const auto& name : definition_names()) {
    SpecTask task(*make_spec(name));
    const TaskSpec& t = task.spec();
    INFO("task " << t.name);
    // An edge case and two feedback workloads (the MoE one with most tokens is left out for time).
    std::vector<std::string> chosen;
    for (const auto& f : t.feedback_workloads)
      if (chosen.size() < 3 && f.find("14107") == std::string::npos) chosen.push_back(f);
    ev->options().only_workloads = chosen;
    EvalResult start = ev->evaluate(task, t.starting_points[0]);
    CHECK_MESSAGE(start.passed(), "starting kernel: ", start.summary());
    MESSAGE(t.name << " starting kernel: " << start.summary());
    EvalResult base = ev->evaluate(task, t.baselines.at(Language::cuda));
    CHECK_MESSAGE(base.passed(), "baseline: ", base.summary());
    CHECK(base.vs_baseline == doctest::Approx(1.0).epsilon(0.25));  // measured against itself
    MESSAGE(t.name << " baseline: " << base.summary());
    for (const auto& wrong : wrong_variants(name)) {
      EvalResult r = ev->evaluate(task, edited(t.starting_points[0], wrong.edits, wrong.name));
      CHECK_MESSAGE(r.status == EvalStatus::incorrect, wrong.name, ": ", r.summary());
      MESSAGE(t.name << " " << wrong.name << ": " << r.summary());
    }
  }
}
