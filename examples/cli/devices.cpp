// ksearch devices: whether kernels can run on a GPU here, and on what.
#include <fmt/format.h>

#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace ks::cli {

int cmd_devices(int argc, char** argv) {
  Args a("devices", "ksearch devices",
         "Says whether CUDA evaluation is available here (driver, GPU, NVRTC), names the evaluation devices, and "
         "whether candidates can be sandboxed (bubblewrap), and the Python triton and python candidates run under "
         "($KSEARCH_PYTHON) with its PyTorch and Triton versions. "
         "Exit status 0 when CUDA is available, 1 when only the host backend is.",
         {});
  if (!a.parse(argc, argv)) {
    throw UsageError(a.error());
  }
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  std::string why;
  bool cuda = cuda_available(&why);
  EvaluatorConfig host;
  host.backend = ks::EvalBackend::host;
  fmt::print("host: {}\n", make_evaluator(host)->device().name);
  fmt::print("sandbox: {}\n", sandbox_description());
  fmt::print("python: {}\n", python_description());
  if (!cuda) {
    fmt::print("cuda: unavailable: {}\n", why);
    return 1;
  }
  EvaluatorConfig c;
  c.backend = ks::EvalBackend::cuda;
  DeviceInfo d = make_evaluator(c)->device();
  fmt::print("cuda: {} ({}), {} device(s)\n", d.name, d.arch, d.count);
  return 0;
}

}  // namespace ks::cli
