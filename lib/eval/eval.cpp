// The public entry points of include/ksearch/eval.hpp.
#include <fmt/format.h>
#include <unistd.h>

#include "eval/baseline_scoring.hpp"
#include "eval/eval_server.hpp"
#include "eval/evaluator_common.hpp"
#include "eval/process_evaluator.hpp"
#include "eval/python/python_program.hpp"
#include "eval/isolation/sandbox.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "util/fs.hpp"
#if KS_HAVE_CUDA_BACKEND
#include "eval/cuda/cuda_backend.hpp"
#endif

bool ks::eval::cuda_backend_built() { return KS_HAVE_CUDA_BACKEND != 0; }

KS_NAMESPACE_BEGIN

bool cuda_available(std::string* why) {
#if KS_HAVE_CUDA_BACKEND
  return eval::cuda_probe(why);
#else
  if (why) *why = "this build of libksearch has no CUDA backend (lib/eval/cuda was not compiled in)";
  return false;
#endif
}

bool evaluates_on_gpu(Language language, EvalBackend backend) {
  const bool usable = language_is_python(language) && backend == EvalBackend::automatic && cuda_available(nullptr);
  return eval::backend_for(language, backend, usable) == eval::Backend::cuda;
}

std::string sandbox_description() {
  const eval::isolation::SandboxStatus& st = eval::isolation::sandbox_status();
  return st.available ? st.version + " (active)" : "unavailable: " + st.problem;
}

std::string python_description() {
  const eval::python::PythonFacts& f = eval::python::python_facts();
  if (!f.problem.empty()) return "unavailable: " + f.problem;
  std::string torch = f.torch.empty() ? "no PyTorch (import torch fails)"
                      : f.torch_cuda.empty()
                          ? fmt::format("PyTorch {} (a CPU build)", f.torch)
                          : fmt::format("PyTorch {} (CUDA {}, GPU {})", f.torch, f.torch_cuda,
                                        f.cuda_available ? "usable" : "not usable");
  return fmt::format("Python {} ({}), {}, {}", f.version, f.python, torch,
                     f.triton.empty() ? "no Triton" : "Triton " + f.triton);
}

std::uint64_t default_memory_limit_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::uint64_t{4} << 30;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 2;
}

std::unique_ptr<Evaluator> make_evaluator(const EvaluatorConfig& config) {
  eval::validate_config_sets(config);
  if (config.in_process && config.sandbox == SandboxMode::required)
    throw Error(Status::invalid_argument,
                "an in-process evaluator runs kernels in this process and cannot confine them; use worker "
                "processes (in_process = false) with sandbox \"on\"");
  eval::validate_options(config.options);
  if (config.backend == EvalBackend::cuda) {
    std::string why;
    if (!cuda_available(&why))
      throw Error(Status::no_device, "a CUDA evaluator was asked for, but CUDA is not usable here: " + why);
  }
  std::unique_ptr<Evaluator> inner =
      config.in_process ? eval::make_in_process_evaluator(config) : eval::make_process_evaluator(config);
  // Tasks scored against a baseline get its latencies; others pass through.
  return std::make_unique<eval::BaselineScoring>(
      std::move(inner), config.cache_dir.empty() ? util::default_cache_dir() : config.cache_dir);
}

std::unique_ptr<Evaluator> make_served_evaluator(const EvaluatorConfig& config, double idle_timeout_s) {
  eval::validate_config_sets(config);
  eval::validate_options(config.options);
  return eval::connect_evaluation_server(config, idle_timeout_s);
}

bool stop_evaluation_server(const EvaluatorConfig& config) { return eval::stop_evaluation_server(config); }

KS_NAMESPACE_END
