#include "eval/cuda/host_kernel.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <thread>
#include <set>

#include "core/inputs.hpp"
#include "core/param_space.hpp"
#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/cuda_backend.hpp"
#include "eval/cuda/cuda_device.hpp"
#include "eval/cuda/launcher.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "util/fs.hpp"

namespace ks::eval::cuda {
namespace {

[[noreturn]] void driver_failed(const DriverApi& api, CUresult r, const char* call, const std::string& what) {
  throw Error(Status::cuda, fmt::format("{}: {}{}{}", call, error_text(api, r), what.empty() ? "" : " while ", what));
}

std::string describe(const util::Vars& values) {
  std::string out;
  for (const auto& [k, v] : values) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", k, v);
  return out.empty() ? "none" : out;
}

// Without a device the plan is checked against generous limits (those of the
// largest parts): what only the real device can refuse, it refuses at launch.
DeviceLimits limits_without_device() {
  DeviceLimits l;
  l.max_shared_per_block_optin = 227 * 1024;
  l.cluster_launch = true;
  l.max_cluster_size = 16;
  return l;
}

}  // namespace

struct HostKernel::Module {
  util::Vars params;
  Artifact artifact;
  std::vector<CubinKernel> cubin;
  CUmodule handle = nullptr;
  std::map<std::string, ModuleFunction> functions;  // by symbol
};

HostKernel::HostKernel(HostKernelConfig config) : cfg_(std::move(config)) {
  const Solution& s = cfg_.solution;
  if (s.language != Language::cuda)
    throw Error(Status::invalid_argument,
                fmt::format("solution {} is written in {}; only CUDA solutions can be loaded into a CUDA context",
                            s.id, to_string(s.language)));
  if (s.launch_plan.empty())
    throw Error(Status::invalid_argument, fmt::format("solution {} has no launch plan", s.id));
  plan_ = LaunchPlan::parse(s.launch_plan);

  arch_ = cfg_.arch;
  if (cfg_.load_module) {
    const DriverApi& api = driver();  // Status::no_device without a driver
    CUcontext ctx = nullptr;
    CUresult r = api.cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS) driver_failed(api, r, "cuCtxGetCurrent", "");
    if (!ctx)
      throw Error(Status::state,
                  "no CUDA context is current on this thread: make the context the kernel should live in current "
                  "(cuCtxSetCurrent, or cudaSetDevice and any runtime call) before loading it");
    CUdevice dev = 0;
    r = api.cuCtxGetDevice(&dev);
    if (r != CUDA_SUCCESS) driver_failed(api, r, "cuCtxGetDevice", "");
    int major = 0, minor = 0;
    api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (arch_.empty()) arch_ = arch_for_capability(major, minor);
    limits_ = device_limits(api, dev);
    context_ = ctx;
  } else {
    if (arch_.empty())
      throw Error(Status::invalid_argument,
                  "a kernel compiled without loading its module needs an architecture (e.g. cuda_arch \"sm_90a\")");
    limits_ = limits_without_device();
  }
  compiler_ = make_cuda_compiler(CudaCompilerOptions{arch_, {}, cfg_.cache_dir, true, ""});

  // Every parameter set the solution can use: its values, and the values of
  // each workload that has its own. Compiling them now keeps NVRTC out of
  // the launches.
  std::set<util::Vars> sets;
  space_ = core::ParamSpace(s.params);
  sets.insert(space_.resolve(s.params, "", {}));
  for (const auto& [name, unused] : s.params.per_workload) {
    const WorkloadSpec* w = cfg_.task.find_workload(name);
    if (!w) continue;  // tuned for a workload this task no longer has
    util::Vars dims(w->dims.begin(), w->dims.end());
    sets.insert(space_.resolve(s.params, name, dims));
  }
  std::lock_guard lock(mu_);
  try {
    for (const auto& values : sets) compile(values);
  } catch (...) {
    release();  // a throwing constructor runs no destructor: the sets loaded so far would leak
    throw;
  }
}

HostKernel::~HostKernel() { release(); }

void HostKernel::release() noexcept {
  if (!context_) return;
  const DriverApi& api = driver();
  CUcontext previous = nullptr;
  api.cuCtxGetCurrent(&previous);
  // Whatever thread destroys it, the modules and scratch go from their own context.
  if (previous != context_) api.cuCtxSetCurrent(static_cast<CUcontext>(context_));
  for (auto& [name, s] : scratch_)
    if (s.ptr) api.cuMemFree(static_cast<CUdeviceptr>(s.ptr));
  gemm_steps_.clear();  // before their handle
  cublas_.reset();
  for (auto& [stream, w] : gemm_workspaces_) api.cuMemFree(static_cast<CUdeviceptr>(w));
  gemm_workspaces_.clear();
  for (auto& m : modules_)
    if (m->handle) api.cuModuleUnload(m->handle);
  if (previous != context_) api.cuCtxSetCurrent(previous);
  scratch_.clear();
  modules_.clear();
}

std::size_t HostKernel::module_count() const { return modules_.size(); }

HostKernel::Module& HostKernel::compile(const util::Vars& values) {
  CompileRequest req;
  req.solution = cfg_.solution;
  req.arch = arch_;
  req.flags = cfg_.flags;
  const util::Vars compiled = core::compiled_values(cfg_.solution.params, values);
  req.params = std::map<std::string, std::int64_t>(compiled.begin(), compiled.end());
  req.cache_dir = cfg_.cache_dir;
  req.tensors = cfg_.task.tensors;
  auto m = std::make_unique<Module>();
  m->params = values;
  try {
    m->artifact = compiler_->compile(req);
  } catch (const CompileError& e) {
    std::string log = e.log();
    if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
    throw Error(Status::compile, fmt::format("solution {} does not compile for {} (parameters {}): {}{}{}",
                                             cfg_.solution.id, arch_, describe(values), e.what(),
                                             log.empty() || log == e.what() ? "" : "\n", log == e.what() ? "" : log));
  }
  const std::string image = util::read_file(m->artifact.path);
  m->cubin = inspect_cubin(image);
  if (context_) {
    const DriverApi& api = driver();
    CUresult r = api.cuModuleLoadData(&m->handle, image.data());
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE)
      throw Error(Status::cuda, fmt::format("cuModuleLoadData: {}: the cubin was compiled for {}, which this GPU does "
                                            "not run",
                                            error_text(api, r), arch_));
    if (r != CUDA_SUCCESS) driver_failed(api, r, "cuModuleLoadData", "loading solution " + cfg_.solution.id);
  }
  modules_.push_back(std::move(m));
  return *modules_.back();
}

HostKernel::Module& HostKernel::module_for(const util::Vars& params) {
  for (auto& m : modules_)
    if (m->params == params) return *m;
  return compile(params);
}

HostResolved HostKernel::resolve_locked(const HostLaunch& l, Module** module_out) {
  const TaskSpec& task = cfg_.task;
  util::Vars dims;
  for (const auto& [name, value] : l.dims) {
    if (std::find(task.dims.begin(), task.dims.end(), name) == task.dims.end())
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\" has no dimension \"{}\" (its dimensions: {})", task.name, name,
                              fmt::join(task.dims, ", ")));
    dims[name] = value;
  }
  for (const auto& d : task.dims)
    if (!dims.count(d))
      throw Error(Status::invalid_argument,
                  fmt::format("dimension \"{}\" is missing (task \"{}\" needs {})", d, task.name, fmt::join(task.dims, ", ")));

  HostResolved out;
  const WorkloadSpec* same_shape = nullptr;
  for (const auto& w : task.workloads)
    if (util::Vars(w.dims.begin(), w.dims.end()) == dims) {
      same_shape = &w;
      break;
    }
  if (!l.workload.empty()) {
    if (!task.find_workload(l.workload))
      throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no workload \"{}\"", task.name, l.workload));
    out.workload = l.workload;
  } else if (same_shape) {
    // The shape of a workload the solution was tuned on gets that workload's values.
    out.workload = same_shape->name;
  }
  util::Vars values;
  try {
    values = space_.resolve(cfg_.solution.params, out.workload, dims);
  } catch (const Error& e) {
    throw Error(Status::invalid_argument, fmt::format("the tuned parameters do not fit these dimensions: {}", e.what()));
  }
  if (!cfg_.solution.params.per_workload.count(out.workload)) out.workload.clear();  // the general values were used
  out.params = std::map<std::string, std::int64_t>(values.begin(), values.end());

  Module& m = module_for(values);
  if (module_out) *module_out = &m;
  util::Vars vars = dims;
  for (const auto& [k, v] : values) vars[k] = v;
  std::set<std::string> tensors;
  std::map<std::string, DType> dtypes;
  ScalarArgs scalars;
  for (const auto& t : task.tensors) {
    if (!t.scalar) {
      tensors.insert(t.name);
      dtypes[t.name] = t.dtype;
      continue;
    }
    // A scalar input passes by value: the caller's, else that of the workload of this shape.
    ScalarArg a{t.dtype, 0};
    if (auto it = l.scalars.find(t.name); it != l.scalars.end()) a.value = it->second;
    else if (same_shape) a.value = core::scalar_value(t, *same_shape);
    else
      throw Error(Status::invalid_argument,
                  fmt::format("scalar input \"{}\" has no value (pass it among the launch's scalars)", t.name));
    if (!dtype_is_float(t.dtype)) vars[t.name] = static_cast<std::int64_t>(a.value);
    scalars[t.name] = a;
  }
  for (const auto& [name, v] : l.scalars)
    if (!scalars.count(name))
      throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no scalar input \"{}\"", task.name, name));

  KernelCatalog cat;
  if (m.handle) {
    for (const auto& k : m.cubin) cat.names.push_back(plan_name_of(k.demangled));
    KernelCatalog by_name = module_catalog(m.cubin, m.artifact.lowered_names);
    cat.find = [this, &m, by_name](const std::string& name) -> const KernelDesc* {
      auto it = m.artifact.lowered_names.find(name);
      std::string symbol;
      if (it != m.artifact.lowered_names.end()) {
        symbol = it->second;
      } else if (const KernelDesc* d = by_name.find(name)) {
        symbol = d->symbol;
      } else {
        return nullptr;
      }
      if (auto f = m.functions.find(symbol); f != m.functions.end()) return &f->second.desc;
      const DriverApi& api = driver();
      ModuleFunction fn;
      bool found = false;
      CUresult r = load_module_function(api, m.handle, symbol, m.cubin, fn, found);
      if (r != CUDA_SUCCESS) driver_failed(api, r, "cuModuleGetFunction", symbol);
      if (!found) return nullptr;
      return &m.functions.emplace(symbol, std::move(fn)).first->second.desc;
    };
  } else {
    cat = module_catalog(m.cubin, m.artifact.lowered_names);
  }
  out.plan = resolve_plan(plan_, vars, tensors, cat, limits_, scalars, dtypes);
  return out;
}

HostResolved HostKernel::resolve(const HostLaunch& l) {
  std::lock_guard lock(mu_);
  return resolve_locked(l, nullptr);
}

void HostKernel::check_sizes(const HostLaunch& l) const {
  util::Vars dims(l.dims.begin(), l.dims.end());
  for (const auto& t : cfg_.task.tensors) {
    if (t.scalar) continue;
    auto it = l.buffers.find(t.name);
    if (it == l.buffers.end() || it->second.bytes == 0) continue;
    std::uint64_t n = dtype_size(t.dtype);
    for (const auto& e : t.shape) n *= static_cast<std::uint64_t>(util::eval_int_expr(e, dims));
    if (it->second.bytes < n)
      throw Error(Status::invalid_argument,
                  fmt::format("tensor \"{}\" needs {} bytes for these dimensions, but its buffer has {}", t.name, n,
                              it->second.bytes));
  }
}

void HostKernel::launch(const HostLaunch& l) {
  if (!context_)
    throw Error(Status::state, "this kernel was compiled without loading its module (load_module off): it cannot be "
                               "launched");
  const DriverApi& api = driver();
  CUcontext current = nullptr;
  api.cuCtxGetCurrent(&current);
  if (current != context_)
    throw Error(Status::state, "the CUDA context current on this thread is not the one the kernel was loaded into");
  check_sizes(l);
  const CUstream stream = static_cast<CUstream>(l.stream);

  std::lock_guard lock(mu_);
  Module* m = nullptr;
  HostResolved r = resolve_locked(l, &m);
  // Scratch the caller did not pass: this kernel's own, grown when a larger shape needs more.
  for (const auto& s : r.plan.scratch) {
    if (auto it = l.buffers.find(s.name); it != l.buffers.end() && it->second.ptr) {
      if (it->second.bytes && it->second.bytes < s.bytes)
        throw Error(Status::invalid_argument, fmt::format("scratch \"{}\" needs {} bytes, but its buffer has {}",
                                                          s.name, s.bytes, it->second.bytes));
      continue;
    }
    Scratch& have = scratch_[s.name];
    if (have.bytes >= s.bytes && have.ptr) continue;
    if (have.ptr) {
      // An earlier launch may still use it, on any stream.
      CUresult rs = api.cuCtxSynchronize();
      if (rs != CUDA_SUCCESS) driver_failed(api, rs, "cuCtxSynchronize", "before growing scratch \"" + s.name + "\"");
      api.cuMemFree(static_cast<CUdeviceptr>(have.ptr));
      have = Scratch{};
    }
    CUdeviceptr p = 0;
    CUresult ra = api.cuMemAlloc(&p, std::max<std::size_t>(s.bytes, 1));
    if (ra != CUDA_SUCCESS) driver_failed(api, ra, "cuMemAlloc", fmt::format("allocating scratch \"{}\"", s.name));
    have = Scratch{static_cast<std::uint64_t>(p), s.bytes};
  }
  auto pointer_of = [&](const std::string& buffer, const std::string& what) {
    std::uint64_t p = 0;
    if (auto it = l.buffers.find(buffer); it != l.buffers.end()) p = it->second.ptr;
    if (!p)
      if (auto it = scratch_.find(buffer); it != scratch_.end()) p = it->second.ptr;
    if (!p)
      throw Error(Status::invalid_argument,
                  fmt::format("{} takes tensor \"{}\", which has no device pointer (pass it in the launch's tensors)",
                              what, buffer));
    return p;
  };
  for (const auto& launch : r.plan.launches) {
    if (launch.gemm) {
      gemm_step(*launch.gemm, r.plan.step_where(launch), pointer_of, l)
          .enqueue(static_cast<CUdeviceptr>(gemm_workspace(stream)), stream);
      continue;
    }
    auto sym = m->functions.find(launch.symbol);
    if (sym == m->functions.end())
      throw Error(Status::internal, fmt::format("kernel `{}` was resolved but not loaded", launch.kernel));
    std::string what;
    CUresult rp = prepare_launch(api, sym->second, launch, what);
    if (rp != CUDA_SUCCESS) driver_failed(api, rp, "cuFuncSetAttribute", what);
    std::vector<std::array<unsigned char, 8>> values;
    for (const auto& a : launch.args) {
      std::array<unsigned char, 8> v{};
      if (a.is_buffer) {
        CUdeviceptr dp = static_cast<CUdeviceptr>(pointer_of(a.buffer, fmt::format("kernel `{}`", launch.kernel)));
        std::memcpy(v.data(), &dp, sizeof dp);
      } else {
        v = a.bytes;
      }
      values.push_back(v);
    }
    std::vector<void*> params;
    for (auto& v : values) params.push_back(v.data());
    CUresult rl = enqueue_launch(api, sym->second.handle, launch, params.empty() ? nullptr : params.data(), stream);
    if (rl == CUDA_ERROR_NOT_SUPPORTED && launch.has_cluster && !api.cuLaunchKernelEx)
      throw Error(Status::cuda, "cluster launches need cuLaunchKernelEx (a CUDA 12.0 or newer driver)");
    if (rl != CUDA_SUCCESS) driver_failed(api, rl, "cuLaunchKernel", describe_launch(launch));
  }
}

GemmStep& HostKernel::gemm_step(const ResolvedGemm& g, const std::string& step,
                                const std::function<std::uint64_t(const std::string&, const std::string&)>& pointer_of,
                                const HostLaunch& l) {
  const std::string what = fmt::format("the GEMM step {}", step);
  const GemmStep::Pointers p = gemm_operands(
      g,
      [&](const std::string& name) {
        // The caller's buffer is checked where the caller gave its size; this kernel's own scratch always.
        GemmBuffer buf{static_cast<CUdeviceptr>(pointer_of(name, what)), 0, false};
        if (auto it = l.buffers.find(name); it != l.buffers.end() && it->second.ptr)
          buf.bytes = it->second.bytes, buf.size_known = it->second.bytes != 0;
        else if (auto s = scratch_.find(name); s != scratch_.end())
          buf.bytes = s->second.bytes, buf.size_known = true;
        return buf;
      },
      what);
  // Descriptors and the algorithm are made once per GEMM and buffers. The
  // description has the transposes, epilogue, compute and algo; the dtypes
  // are keyed too (a variant's scratch buffer may have another).
  const std::string key =
      fmt::format("{}|{}|{}|{}|{}|{}|{}x{}x{}|{}|{}/{}/{}/{}|{}/{}/{}/{}|{}|{}|{}/{}/{}", g.describe(), p.a, p.b, p.c,
                  p.d, p.bias, g.m, g.n, g.k, g.batch, g.lda, g.ldb, g.ldc, g.ldd, g.stride_a, g.stride_b, g.stride_c,
                  g.stride_d, g.alpha, g.beta, to_string(g.a_type), to_string(g.b_type), to_string(g.d_type));
  if (auto it = gemm_steps_.find(key); it != gemm_steps_.end()) return *it->second;
  if (gemm_steps_.size() >= 256) gemm_steps_.clear();  // buffers the caller has freed, most likely
  try {
    if (!cublas_) cublas_ = std::make_unique<CublasLtHandle>();
    auto made = std::make_unique<GemmStep>(*cublas_, g, p, kGemmWorkspaceBytes);
    return *gemm_steps_.emplace(key, std::move(made)).first->second;
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", what, e.what()));
  }
}

std::uint64_t HostKernel::gemm_workspace(void* stream) {
  // One per stream: GEMM steps on two streams may run at once. The per-thread
  // default stream (CU_STREAM_PER_THREAD) is a stream of each thread.
  const bool per_thread = stream == reinterpret_cast<void*>(CU_STREAM_PER_THREAD);
  auto& w = gemm_workspaces_[{stream, per_thread ? std::this_thread::get_id() : std::thread::id()}];
  if (!w) {
    const DriverApi& api = driver();
    CUdeviceptr p = 0;
    CUresult r = api.cuMemAlloc(&p, kGemmWorkspaceBytes);
    if (r != CUDA_SUCCESS) driver_failed(api, r, "cuMemAlloc", "allocating the cuBLASLt workspace");
    w = static_cast<std::uint64_t>(p);
  }
  return w;
}

}  // namespace ks::eval::cuda
