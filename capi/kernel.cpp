// Kernels the host launches, through the C ABI (ks_kernel.h).
#include "capi_internal.hpp"
#include "ksearch/kernel.hpp"

struct ks_kernel {
  std::unique_ptr<ks::Kernel> kernel;
  std::string solution_id, task, plan, params;
  std::vector<std::string> dtypes;
};

namespace ks::capi {
namespace {

KernelLaunch launch_of(const ks_kernel_launch_args& a) {
  if (a.version != 1)
    throw Error(Status::version, fmt::format("ks_kernel_launch_args version {} is not supported (this library knows "
                                             "1); initialise it with ks_kernel_launch_args_init",
                                             a.version));
  KernelLaunch l;
  if (a.dim_count && !a.dims) throw Error(Status::invalid_argument, "args.dims is NULL but dim_count is not 0");
  if (a.tensor_count && !a.tensors) throw Error(Status::invalid_argument, "args.tensors is NULL but tensor_count is not 0");
  for (std::size_t i = 0; i < a.dim_count; ++i) {
    if (!a.dims[i].name) throw Error(Status::invalid_argument, fmt::format("args.dims[{}].name is NULL", i));
    if (!l.dims.emplace(a.dims[i].name, a.dims[i].value).second)
      throw Error(Status::invalid_argument, fmt::format("dimension \"{}\" is given twice", a.dims[i].name));
  }
  for (std::size_t i = 0; i < a.tensor_count; ++i) {
    const ks_kernel_tensor& t = a.tensors[i];
    if (!t.name) throw Error(Status::invalid_argument, fmt::format("args.tensors[{}].name is NULL", i));
    if (!t.device_ptr) throw Error(Status::invalid_argument, fmt::format("tensor \"{}\" has a NULL device_ptr", t.name));
    if (!l.buffers.emplace(t.name, KernelBuffer{t.device_ptr, t.bytes}).second)
      throw Error(Status::invalid_argument, fmt::format("tensor \"{}\" is given twice", t.name));
  }
  if (a.scalar_count && !a.scalars) throw Error(Status::invalid_argument, "args.scalars is NULL but scalar_count is not 0");
  for (std::size_t i = 0; i < a.scalar_count; ++i) {
    if (!a.scalars[i].name) throw Error(Status::invalid_argument, fmt::format("args.scalars[{}].name is NULL", i));
    if (!l.scalars.emplace(a.scalars[i].name, a.scalars[i].value).second)
      throw Error(Status::invalid_argument, fmt::format("scalar \"{}\" is given twice", a.scalars[i].name));
  }
  l.stream = a.stream;
  if (a.workload) l.workload = a.workload;
  return l;
}

}  // namespace
}  // namespace ks::capi

using namespace ks::capi;

extern "C" {

ks_status ks_kernel_load_options_init(ks_kernel_load_options* o, uint32_t version) {
  if (!o) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_load_options_init: options is NULL");
  if (version != 1)
    return fail(KS_E_VERSION, fmt::format("ks_kernel_load_options_init: version {} is not one this library knows (it "
                                          "knows 1)",
                                          version));
  std::memset(o, 0, sizeof *o);
  o->version = version;
  o->load_module = ks::KernelOptions{}.load_module ? 1 : 0;
  return KS_OK;
}

ks_status ks_kernel_launch_args_init(ks_kernel_launch_args* a, uint32_t version) {
  if (!a) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_launch_args_init: args is NULL");
  if (version != 1)
    return fail(KS_E_VERSION, fmt::format("ks_kernel_launch_args_init: version {} is not one this library knows (it "
                                          "knows 1)",
                                          version));
  std::memset(a, 0, sizeof *a);
  a->version = version;
  return KS_OK;
}

ks_status ks_kernel_load(const ks_kernel_load_options* o, ks_kernel** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_load: out is NULL");
  *out = nullptr;
  if (!o) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_load: options is NULL");
  return guarded("ks_kernel_load", [&] {
    check_version("ks_kernel_load_options", o->version, KS_KERNEL_LOAD_OPTIONS_VERSION);
    ks::KernelSource src;
    const int given = (o->result ? 1 : 0) + (o->run_dir ? 1 : 0) + (o->solution_path ? 1 : 0) + (o->solution_json ? 1 : 0);
    if (given != 1)
      throw ks::Error(ks::Status::invalid_argument,
                      fmt::format("set exactly one of options.result, run_dir, solution_path and solution_json ({} "
                                  "set)",
                                  given));
    if (o->result) {
      if (!o->result->outcome.best)
        throw ks::Error(ks::Status::not_found, "options.result holds no passing solution");
      src.solution = o->result->outcome.best->solution;
      src.run_dir = o->result->run_dir;  // its task, compile flags and cache
    }
    if (o->run_dir) src.run_dir = o->run_dir;
    if (o->solution_path) src.solution_file = o->solution_path;
    if (o->solution_json) src.solution_text = o->solution_json;
    if (o->task) src.task = o->task;
    ks::KernelOptions ko;
    if (o->cuda_arch) ko.cuda_arch = o->cuda_arch;
    if (o->cache_dir) ko.cache_dir = o->cache_dir;
    ko.load_module = o->load_module != 0;
    std::unique_ptr<ks::Kernel> k = ks::Kernel::load(src, ko);
    auto h = std::make_unique<ks_kernel>();
    const ks::Solution& s = k->solution();
    h->solution_id = s.id;
    h->task = k->task().name;
    h->plan = s.launch_plan.to_json().dump(2);
    h->params = s.params.to_json().dump(2);
    for (const auto& t : k->task().tensors) h->dtypes.push_back(ks::to_string(t.dtype));
    h->kernel = std::move(k);
    *out = h.release();
    return KS_OK;
  });
}

void ks_kernel_destroy(ks_kernel* k) { delete k; }

ks_status ks_kernel_launch(ks_kernel* k, const ks_kernel_launch_args* a) {
  if (!k) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_launch: kernel is NULL");
  if (!a) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_launch: args is NULL");
  return guarded("ks_kernel_launch", [&] {
    k->kernel->launch(launch_of(*a));
    return KS_OK;
  });
}

ks_status ks_kernel_resolve(ks_kernel* k, const ks_kernel_launch_args* a, char** plan_json) {
  if (!plan_json) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_resolve: plan_json is NULL");
  *plan_json = nullptr;
  if (!k) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_resolve: kernel is NULL");
  if (!a) return fail(KS_E_INVALID_ARGUMENT, "ks_kernel_resolve: args is NULL");
  return guarded("ks_kernel_resolve", [&] {
    *plan_json = copy_out(k->kernel->resolve(launch_of(*a)).to_json().dump());
    return KS_OK;
  });
}

const char* ks_kernel_solution_id(const ks_kernel* k) { return k ? k->solution_id.c_str() : ""; }
const char* ks_kernel_task(const ks_kernel* k) { return k ? k->task.c_str() : ""; }
const char* ks_kernel_arch(const ks_kernel* k) { return k ? k->kernel->arch().c_str() : ""; }
const char* ks_kernel_launch_plan_json(const ks_kernel* k) { return k ? k->plan.c_str() : ""; }
const char* ks_kernel_params_json(const ks_kernel* k) { return k ? k->params.c_str() : ""; }
size_t ks_kernel_dim_count(const ks_kernel* k) { return k ? k->kernel->task().dims.size() : 0; }
const char* ks_kernel_dim_name(const ks_kernel* k, size_t i) {
  return k && i < k->kernel->task().dims.size() ? k->kernel->task().dims[i].c_str() : "";
}
size_t ks_kernel_tensor_count(const ks_kernel* k) { return k ? k->kernel->task().tensors.size() : 0; }
const char* ks_kernel_tensor_name(const ks_kernel* k, size_t i) {
  return k && i < k->kernel->task().tensors.size() ? k->kernel->task().tensors[i].name.c_str() : "";
}
const char* ks_kernel_tensor_dtype(const ks_kernel* k, size_t i) {
  return k && i < k->dtypes.size() ? k->dtypes[i].c_str() : "";
}
int ks_kernel_tensor_is_output(const ks_kernel* k, size_t i) {
  return k && i < k->kernel->task().tensors.size() && k->kernel->task().tensors[i].is_output ? 1 : 0;
}
size_t ks_kernel_module_count(const ks_kernel* k) { return k ? k->kernel->module_count() : 0; }

}  // extern "C"
