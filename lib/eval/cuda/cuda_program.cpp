// A loaded candidate: its module, its launch plan resolved for the bound
// workload, and the scratch buffers the plan asks for.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "eval/cuda/cuda_device.hpp"
#include "eval/cuda/launcher.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "util/fs.hpp"

namespace ks::eval::cuda {
namespace {

[[noreturn]] void plan_error(const std::string& what) {
  throw RunError(Failure{EvalStatus::runtime_error, what});
}

}  // namespace

CudaProgram::CudaProgram(CudaDevice& device, const Artifact& artifact, const Solution& solution)
    : device_(device) {
  const DriverApi& api = driver();
  try {
    plan_ = LaunchPlan::parse(solution.launch_plan);
  } catch (const Error& e) {
    plan_error(e.what());
  }
  std::string image = util::read_file(artifact.path);
  try {
    cubin_kernels_ = inspect_cubin(image);
  } catch (const Error& e) {
    throw Error(Status::internal, fmt::format("artifact {}: {}", artifact.path, e.what()));
  }
  symbols_ = artifact.lowered_names;
  device_.make_current();
  CUresult r = api.cuModuleLoadData(&module_, image.data());
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
      r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    plan_error(fmt::format("cuModuleLoadData: {}: the cubin does not fit this GPU ({}); it was "
                           "compiled for another architecture",
                           error_text(api, r), device_.info().arch));
  device_.check(r, "cuModuleLoadData");
  device_.check(api.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
  device_.check(api.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate");
}

CudaProgram::~CudaProgram() {
  const DriverApi& api = driver();
  try {
    device_.make_current();
  } catch (const RunError&) {
    return;  // the context is gone; so is everything it owned
  }
  free_scratch();
  launches_.clear();  // the GEMM steps before their handle
  cublas_.reset();
  if (gemm_workspace_) device_.free(gemm_workspace_);
  if (start_) api.cuEventDestroy(start_);
  if (stop_) api.cuEventDestroy(stop_);
  if (module_) api.cuModuleUnload(module_);
}

void CudaProgram::free_scratch() {
  for (auto& [name, buf] : scratch_) device_.free(buf);
  scratch_.clear();
}

CudaProgram::Function* CudaProgram::function_for(const std::string& plan_name) {
  std::string symbol;
  if (auto it = symbols_.find(plan_name); it != symbols_.end()) {
    symbol = it->second;
  } else {
    KernelCatalog cat = module_catalog(cubin_kernels_, symbols_);
    const KernelDesc* d = cat.find(plan_name);
    if (!d) return nullptr;
    symbol = d->symbol;
  }
  if (auto it = functions_.find(symbol); it != functions_.end()) return &it->second;

  Function f;
  bool found = false;
  device_.check(load_module_function(driver(), module_, symbol, cubin_kernels_, f, found), "cuModuleGetFunction",
                symbol);
  if (!found) return nullptr;
  return &functions_.emplace(symbol, std::move(f)).first->second;
}

std::string CudaProgram::kernel_list() const {
  std::string out;
  for (const auto& l : resolved_.launches)
    if (out.find("`" + l.kernel + "`") == std::string::npos)
      out += (out.empty() ? "`" : ", `") + l.kernel + "`";
  return out;
}

void CudaProgram::bind(const Bindings& b) {
  device_.require_usable();
  device_.make_current();
  const DriverApi& api = driver();
  bound_ = false;

  std::set<std::string> tensors;
  for (const auto& [name, buf] : b.tensors) tensors.insert(name);
  launches_.clear();  // they point into the scratch buffers freed below
  KernelCatalog cat;
  for (const auto& k : cubin_kernels_) cat.names.push_back(plan_name_of(k.demangled));
  cat.find = [this](const std::string& name) -> const KernelDesc* {
    Function* f = function_for(name);
    return f ? &f->desc : nullptr;
  };
  try {
    resolved_ = resolve_plan(plan_, b.vars, tensors, cat, device_.limits(), b.scalars, b.dtypes);
  } catch (const Error& e) {
    plan_error(e.what());
  }

  free_scratch();
  for (const auto& s : resolved_.scratch) {
    Buffer buf = device_.alloc(s.bytes);
    device_.label(buf, fmt::format("scratch \"{}\"", s.name));
    scratch_[s.name] = buf;
  }
  poison_scratch();
  bound_tensors_.clear();
  for (const auto& [name, buf] : b.tensors) bound_tensors_.push_back(buf);

  auto buffer_of = [&](const std::string& name) {
    auto t = b.tensors.find(name);
    return t != b.tensors.end() ? t->second : scratch_.at(name);
  };
  for (const auto& l : resolved_.launches) {
    Launch launch;
    if (l.gemm) {
      launch.gemm = bind_gemm(*l.gemm, resolved_.step_where(l), buffer_of);
      launches_.push_back(std::move(launch));
      continue;
    }
    launch.function = function_for(l.kernel);
    std::string what;
    device_.check(prepare_launch(api, *launch.function, l, what), "cuFuncSetAttribute", what);
    for (const auto& a : l.args) {
      std::array<unsigned char, 8> v{};
      if (a.is_buffer) {
        CUdeviceptr p = buffer_of(a.buffer).addr;
        std::memcpy(v.data(), &p, sizeof p);
      } else {
        v = a.bytes;
      }
      launch.values.push_back(v);
    }
    // The pointers are taken after the values stop moving.
    for (auto& v : launch.values) launch.params.push_back(v.data());
    launches_.push_back(std::move(launch));
  }
  bound_ = true;
  checked_run_done_ = false;
}

std::unique_ptr<GemmStep> CudaProgram::bind_gemm(const ResolvedGemm& g, const std::string& step,
                                                 const std::function<Buffer(const std::string&)>& buffer_of) {
  const std::string where = fmt::format("launch plan: {} (GEMM step)", step);
  try {
    const GemmStep::Pointers p = gemm_operands(
        g,
        [&](const std::string& name) {
          const Buffer buf = buffer_of(name);
          return GemmBuffer{buf.addr, buf.bytes};
        },
        where);
    if (!cublas_) {
      cublas_ = std::make_unique<CublasLtHandle>();
      gemm_workspace_ = device_.alloc(kGemmWorkspaceBytes);
      device_.label(gemm_workspace_, "cuBLASLt workspace");
    }
    return std::make_unique<GemmStep>(*cublas_, g, p, kGemmWorkspaceBytes);
  } catch (const Error& e) {
    const std::string what = e.what();
    plan_error(what.rfind(where, 0) == 0 ? what : fmt::format("{}: {}", where, what));
  }
}

void CudaProgram::enqueue(bool check_each) {
  if (!bound_) throw Error(Status::state, "launch() before a successful bind()");
  device_.require_usable();
  device_.make_current();
  const DriverApi& api = driver();
  for (std::size_t i = 0; i < launches_.size(); ++i) {
    const ResolvedLaunch& l = resolved_.launches[i];
    Launch& launch = launches_[i];
    if (launch.gemm) {
      try {
        launch.gemm->enqueue(gemm_workspace_.addr, device_.stream());
      } catch (const Error& e) {
        plan_error(fmt::format("launch plan: {} (GEMM step) {}: {}", resolved_.step_where(l), l.gemm->describe(),
                               e.what()));
      }
      if (check_each)
        device_.check(api.cuStreamSynchronize(device_.stream()), "cuStreamSynchronize",
                      fmt::format("while running the GEMM step {}", resolved_.step_where(l)));
      continue;
    }
    void** params = launch.params.empty() ? nullptr : launch.params.data();
    if (l.has_cluster && !api.cuLaunchKernelEx)
      plan_error("cluster launches need cuLaunchKernelEx (a CUDA 12.0 or newer driver)");
    CUresult r = enqueue_launch(api, launch.function->handle, l, params, device_.stream());
    device_.check(r, "cuLaunchKernel", describe_launch(l));
    if (check_each)
      device_.check(api.cuStreamSynchronize(device_.stream()), "cuStreamSynchronize",
                    fmt::format("while running kernel `{}`", l.kernel));
  }
}

void CudaProgram::launch() {
  // The first run after bind() goes kernel by kernel, so a fault names the
  // kernel that caused it; later runs are queued without waiting.
  enqueue(!checked_run_done_);
  checked_run_done_ = true;
}

void CudaProgram::synchronize() {
  device_.require_usable();
  device_.make_current();
  device_.check(driver().cuStreamSynchronize(device_.stream()), "cuStreamSynchronize",
                "while running kernel(s) " + kernel_list());
  // A write past the end of a buffer faults only when it leaves mapped
  // memory; the redzones behind every buffer catch the rest.
  std::vector<Buffer> buffers = bound_tensors_;
  for (const auto& [name, buf] : scratch_) buffers.push_back(buf);
  for (const auto& buf : buffers)
    if (std::string what = device_.check_redzone(buf); !what.empty())
      throw RunError(Failure{EvalStatus::runtime_error,
                                fmt::format("kernel(s) {} {}: an out-of-bounds write; check the bounds of every store, "
                                            "vector stores at the end of a row or of the tensor especially",
                                            kernel_list(), what),
                                false, true});
}

double CudaProgram::timed_launch() {
  const DriverApi& api = driver();
  device_.require_usable();
  device_.make_current();
  device_.check(api.cuEventRecord(start_, device_.stream()), "cuEventRecord");
  enqueue(false);
  device_.check(api.cuEventRecord(stop_, device_.stream()), "cuEventRecord");
  device_.check(api.cuEventSynchronize(stop_), "cuEventSynchronize",
                "while running kernel(s) " + kernel_list());
  float ms = 0;
  device_.check(api.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
  return ms;
}

void CudaProgram::poison_scratch() {
  for (const auto& [name, buf] : scratch_) device_.poison(buf, buf.bytes);
}

}  // namespace ks::eval::cuda
