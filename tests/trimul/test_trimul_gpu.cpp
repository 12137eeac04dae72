// On a GPU (ctest label `gpu`): inputs generated on the device equal the
// host's, and the FP32 CUDA reference, the tunable starting kernel and the
// demonstration candidates agree with the Eigen CPU reference on the test
// workloads with N <= 256, through the CUDA backend (NVRTC, launch plans,
// device comparison). Skips, saying why, where no device is present.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "core/response/parse.hpp"
#include "core/param_space.hpp"
#include "eval/backend.hpp"
#include "eval/cuda/cuda_backend.hpp"
#include "support/test_util.hpp"
#include "tasks/gpumode/trimul.hpp"
#include "util/fs.hpp"

using namespace ks;
using namespace ks::tasks::gpumode;

namespace {

struct Candidate {
  Solution solution;
  util::Vars params;
  double atol, rtol;
  std::unique_ptr<eval::Program> program;
};

// Device buffers of one workload, freed with the device's allocator.
class Buffers {
 public:
  explicit Buffers(eval::Device& d) : d_(d) {}
  ~Buffers() {
    for (auto& [name, b] : bufs_) d_.free(b);
  }
  eval::Buffer& operator[](const std::string& name) { return bufs_[name]; }
  std::map<std::string, eval::Buffer>& all() { return bufs_; }

 private:
  eval::Device& d_;
  std::map<std::string, eval::Buffer> bufs_;
};

}  // namespace

TEST_CASE("trimul gpu: the CUDA reference and the shipped kernels agree with the CPU reference") {
  std::string why;
  if (!eval::cuda_probe(&why)) {
    MESSAGE("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  const TaskSpec spec = make_trimul_spec();
  auto device = eval::make_cuda_device(0);
  eval::CudaCompilerOptions copt;
  copt.arch = eval::cuda_device_arch(0);
  copt.cache_dir = test::scratch_dir("trimul_gpu_cache").string();
  auto compiler = eval::make_cuda_compiler(copt);
  MESSAGE("device: " << device->info().name << " (" << copt.arch << ")");

  std::vector<Candidate> candidates;
  // FP32 against double: far tighter than the task's tolerance.
  candidates.push_back({trimul_reference_solution(), {}, 1e-3, 1e-3, nullptr});
  const Solution start = trimul_starting_point();
  candidates.push_back({start, core::ParamSpace(start.params).defaults(),
                        spec.tolerance.atol, spec.tolerance.rtol, nullptr});
  for (const char* file : {"v1_naive_fp32.md", "v2_tiled_fp32.md", "v3_tensor_cores_fp16.md",
                           "v4_pipelined_fp16.md"}) {
    Solution s = core::parse_candidate(
        util::read_file(test::source_dir() / "examples" / "trimul" / "candidates" / file), Language::cuda);
    s.name = file;
    candidates.push_back({s, {}, spec.tolerance.atol, spec.tolerance.rtol, nullptr});
  }
  for (auto& c : candidates) {
    eval::CompileRequest req;
    req.solution = c.solution;
    req.arch = copt.arch;
    req.params = std::map<std::string, std::int64_t>(c.params.begin(), c.params.end());
    req.cache_dir = copt.cache_dir;
    req.tensors = spec.tensors;
    c.program = device->load(compiler->compile(req), c.solution);
  }

  for (const auto& w : spec.workloads) {
    if (w.dims.at("N") > 256) continue;
    INFO("workload " << w.name);
    const TrimulInputs in = generate_trimul_inputs(spec, w);
    std::vector<float> cpu(in.output_size());
    trimul_cpu_reference(in, cpu.data());

    Buffers bufs(*device);
    util::Vars dims(w.dims.begin(), w.dims.end());
    for (const auto& t : spec.tensors) {
      const std::vector<float>* host = in.find(t.name);
      const std::size_t count = host ? host->size() : in.output_size();
      bufs[t.name] = device->alloc(count * sizeof(float));
      if (!host) continue;
      // Generated on the device exactly as the evaluator does, then compared
      // with the host's copy: both sides must see the same inputs.
      auto ov = w.dist_overrides.find(t.name);
      const Distribution& d = ov != w.dist_overrides.end() ? ov->second : t.dist;
      device->generate(bufs[t.name], DType::f32, count, d.kind, util::eval_double_expr(d.p0, dims),
                       util::eval_double_expr(d.p1, dims), w.seed, eval::rng_stream_of(t.name));
      std::vector<float> back(count);
      device->download(back.data(), bufs[t.name], count * sizeof(float));
      std::size_t differ = 0;
      for (std::size_t i = 0; i < count; ++i)
        if (back[i] != (*host)[i] && std::fabs(back[i] - (*host)[i]) > 1e-6f * std::fabs((*host)[i])) ++differ;
      CHECK_MESSAGE(differ == 0, t.name, ": ", differ, " generated elements differ from the host's");
    }
    eval::Buffer cpu_ref = device->alloc(cpu.size() * sizeof(float));
    device->upload(cpu_ref, cpu.data(), cpu.size() * sizeof(float));

    for (auto& c : candidates) {
      INFO("solution " << c.solution.name);
      eval::Bindings b;
      for (const auto& [name, buf] : bufs.all()) b.tensors[name] = buf;
      b.vars = dims;
      for (const auto& [k, v] : c.params) b.vars[k] = v;
      device->poison(bufs["out"], cpu.size() * sizeof(float));
      c.program->bind(b);
      c.program->poison_scratch();
      c.program->launch();
      c.program->synchronize();
      Tolerance tol = spec.tolerance;
      tol.atol = c.atol;
      tol.rtol = c.rtol;
      const eval::CompareStats st = device->compare(bufs["out"], cpu_ref, DType::f32, cpu.size(), tol);
      CHECK_MESSAGE(st.mismatches == 0, st.mismatches, " of ", st.count, " outside tolerance, first at ",
                    st.first_bad_index, " (got ", st.first_bad_out, ", expected ", st.first_bad_ref,
                    "), max abs error ", st.max_abs_error);
      MESSAGE(w.name << " " << c.solution.name << ": max abs error " << st.max_abs_error);
    }
    device->free(cpu_ref);
  }
}
