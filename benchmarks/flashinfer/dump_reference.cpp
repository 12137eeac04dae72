// Writes one workload of a flashinfer task, as the evaluator generates it on
// the GPU, together with the outputs of the task's CUDA reference, to a
// .safetensors file: every input (scalars as 0-d tensors) and every output.
// compare_torch.py reads it and checks the reference against an independent
// PyTorch implementation. Without a GPU it says so and exits 0.
//
//   flashinfer_dump TASK WORKLOAD OUT.safetensors [SEED_INDEX]
#include <fmt/format.h>
#include <math.h>  // ks_rng.h calls math functions unqualified

#include <cstring>
#include <filesystem>

#include "core/elements.hpp"
#include "core/inputs.hpp"
#include "core/rng/ks_rng.h"
#include "core/rng/rng_stream.hpp"
#include "core/safetensors.hpp"
#include "eval/backend.hpp"
#include "eval/cuda/cuda_backend.hpp"
#include "ksearch/error.hpp"
#include "ksearch/tasks.hpp"

using namespace ks;

int main(int argc, char** argv) {
  if (argc < 4) {
    fmt::print(stderr, "usage: flashinfer_dump TASK WORKLOAD OUT.safetensors [SEED_INDEX]\n");
    return 2;
  }
  std::string why;
  if (!eval::cuda_probe(&why)) {
    fmt::print("flashinfer_dump: no usable GPU ({}); nothing to do\n", why);
    return 0;
  }
  try {
    auto task = load_task(argv[1]);
    const TaskSpec& t = task->spec();
    const WorkloadSpec* w = t.find_workload(argv[2]);
    if (!w) throw Error(Status::not_found, fmt::format("task {} has no workload {}", t.name, argv[2]));
    const std::uint64_t seed_index = argc > 4 ? std::stoull(argv[4]) : 0;
    auto dev = eval::make_cuda_device(0);
    eval::CudaCompilerOptions copt;
    copt.arch = eval::cuda_device_arch(0);
    copt.cache_dir = (std::filesystem::temp_directory_path() / "ksearch-flashinfer-dump").string();
    auto compiler = eval::make_cuda_compiler(copt);

    const util::Vars dims(w->dims.begin(), w->dims.end());
    const std::uint64_t seed = ks_rng_derive_seed(w->seed, seed_index);
    eval::Bindings b;
    b.vars = dims;
    std::vector<core::SafetensorsWrite> out;
    std::vector<std::pair<std::string, eval::Buffer>> bufs;
    for (const auto& ts : t.tensors) {
      if (ts.scalar) {
        const double v = core::scalar_value(ts, *w);
        b.scalars[ts.name] = eval::ScalarArg{ts.dtype, v};
        if (!dtype_is_float(ts.dtype)) b.vars[ts.name] = static_cast<std::int64_t>(v);
        core::SafetensorsWrite s{ts.name, ts.dtype, {}, std::vector<unsigned char>(dtype_size(ts.dtype))};
        core::store_element(s.data.data(), ts.dtype, 0, v);
        out.push_back(std::move(s));
        continue;
      }
      const auto shape = core::tensor_shape(ts, dims);
      const std::size_t count = core::element_count(shape), bytes = count * dtype_size(ts.dtype);
      eval::Buffer buf = dev->alloc(std::max<std::size_t>(bytes, 1));
      bufs.push_back({ts.name, buf});
      b.tensors[ts.name] = buf;
      if (ts.is_output) {
        dev->poison(buf, bytes);
      } else if (w->data.count(ts.name)) {
        auto data = core::input_data_bytes(ts, *w, shape, t.base_dir);
        dev->upload(buf, data.data(), data.size());
      } else {
        const Distribution& d = core::distribution_of(ts, *w);
        dev->generate(buf, ts.dtype, count, d.kind, util::eval_double_expr(d.p0, dims),
                      util::eval_double_expr(d.p1, dims), seed, core::rng_stream_of(ts.name));
      }
      out.push_back({ts.name, ts.dtype, shape, {}});
    }
    eval::CompileRequest req;
    req.solution = t.references.at(Language::cuda);
    req.arch = copt.arch;
    req.tensors = t.tensors;
    auto program = dev->load(compiler->compile(req), req.solution);
    program->bind(b);
    program->poison_scratch();
    program->launch();
    program->synchronize();
    dev->synchronize();
    for (auto& s : out) {
      for (const auto& [name, buf] : bufs)
        if (name == s.name) {
          s.data.resize(core::element_count(s.shape) * dtype_size(s.dtype));
          dev->download(s.data.data(), buf, s.data.size());
        }
    }
    for (const auto& [name, buf] : bufs) dev->free(buf);
    core::write_safetensors(argv[3], out);
    fmt::print("flashinfer_dump: {} / {} -> {}\n", t.name, w->name, argv[3]);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "flashinfer_dump: {}\n", e.what());
    return 1;
  }
}
