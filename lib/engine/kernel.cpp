// ks::Kernel: finding the solution and its task (a search's result, a run
// folder, a solution file), then eval::cuda::HostKernel does the CUDA work.
#include "ksearch/kernel.hpp"

#include <fmt/format.h>

#if KS_HAVE_CUDA_BACKEND
#include "eval/cuda/host_kernel.hpp"
#endif
#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/tasks.hpp"
#include "util/fs.hpp"

KS_NAMESPACE_BEGIN

namespace fs = std::filesystem;

#if KS_HAVE_CUDA_BACKEND
struct Kernel::Impl {
  std::unique_ptr<eval::cuda::HostKernel> host;
};

namespace {

eval::cuda::HostLaunch host_launch(const KernelLaunch& l) {
  eval::cuda::HostLaunch h;
  h.dims = l.dims;
  for (const auto& [name, b] : l.buffers) h.buffers[name] = eval::cuda::HostBuffer{b.device_ptr, b.bytes};
  h.scalars = l.scalars;
  h.stream = l.stream;
  h.workload = l.workload;
  return h;
}

std::vector<std::string> strings_of(const Json& j) {
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& s : j.as_array()) out.push_back(s.as_string());
  return out;
}

}  // namespace
#else
struct Kernel::Impl {};  // no Kernel is ever made: load() throws
#endif

Json ResolvedKernelPlan::to_json() const {
  auto dim3 = [](const std::array<unsigned, 3>& d) { return Json::arr({d[0], d[1], d[2]}); };
  Json p = Json::object();
  for (const auto& [k, v] : params) p[k] = v;
  Json ls = Json::array();
  for (const auto& l : launches)
    ls.push_back(Json::obj({{"kernel", l.kernel},
                            {"symbol", l.symbol},
                            {"grid", dim3(l.grid)},
                            {"block", dim3(l.block)},
                            {"cluster", dim3(l.cluster)},
                            {"has_cluster", l.has_cluster},
                            {"shared_bytes", static_cast<std::int64_t>(l.shared_bytes)}}));
  Json sc = Json::array();
  for (const auto& [name, bytes] : scratch)
    sc.push_back(Json::obj({{"name", name}, {"bytes", static_cast<std::int64_t>(bytes)}}));
  return Json::obj({{"variant", variant},
                    {"workload", workload.empty() ? Json() : Json(workload)},
                    {"params", p},
                    {"launches", ls},
                    {"scratch", sc}});
}

Kernel::Kernel() : impl_(std::make_unique<Impl>()) {}
Kernel::~Kernel() = default;

#if !KS_HAVE_CUDA_BACKEND
std::unique_ptr<Kernel> Kernel::load(const KernelSource&, const KernelOptions&) {
  throw Error(Status::no_device,
              "this build of libksearch has no CUDA backend (configured with KS_WITH_CUDA=OFF), so it cannot load "
              "kernels");
}
// Unreachable: without a Kernel there is nothing to call these on.
ResolvedKernelPlan Kernel::resolve(const KernelLaunch&) { throw Error(Status::no_device, "no CUDA backend"); }
void Kernel::launch(const KernelLaunch&) { throw Error(Status::no_device, "no CUDA backend"); }
const Solution& Kernel::solution() const { throw Error(Status::no_device, "no CUDA backend"); }
const TaskSpec& Kernel::task() const { throw Error(Status::no_device, "no CUDA backend"); }
const std::string& Kernel::arch() const { throw Error(Status::no_device, "no CUDA backend"); }
std::size_t Kernel::module_count() const { return 0; }
#else
std::unique_ptr<Kernel> Kernel::load(const KernelSource& src, const KernelOptions& options) {
  const int given = (src.solution ? 1 : 0) + (src.solution_file.empty() ? 0 : 1) + (src.solution_text.empty() ? 0 : 1);
  if (given > 1 || (given == 0 && src.run_dir.empty()))
    throw Error(Status::invalid_argument,
                fmt::format("give a run folder, or exactly one of a solution, a solution file and a solution text "
                            "({} given)",
                            given));
  eval::cuda::HostKernelConfig cfg;
  cfg.arch = options.cuda_arch;
  cfg.load_module = options.load_module;
  cfg.flags = options.extra_compile_flags;
  const fs::path cache = options.cache_dir.empty() ? util::default_cache_dir() : options.cache_dir;
  cfg.cache_dir = (cache / "cuda").string();

  std::shared_ptr<Task> task = src.custom_task;
  if (!task && !src.task.empty()) task = load_task(src.task);
  if (!src.run_dir.empty()) {
    RunStore store = RunStore::open_read_only(src.run_dir);
    if (given == 0) {  // else the run folder only says how the solution was built
      auto best = store.best();
      if (!best)
        throw Error(Status::not_found,
                    fmt::format("{} holds no passing solution yet (no best.json)", src.run_dir.string()));
      cfg.solution = best->solution;
    }
    Json m = store.manifest();
    const Json& tj = m["task"];
    if (!task) {
      if (tj.get_bool("custom"))
        throw Error(Status::invalid_argument,
                    fmt::format("{} was made with a task object supplied by the host program; give that task",
                                src.run_dir.string()));
      task = load_task(tj.get_string("reference"), {tj.get_string("kernelbench_dir")});
    }
    // The flags its evaluator compiled with, so the module is the evaluated one.
    if (cfg.flags.empty()) cfg.flags = strings_of(m["evaluator"]["options"]["extra_compile_flags"]);
    if (options.cache_dir.empty()) {
      const std::string run_cache = m["evaluator"].get_string("cache_dir");
      if (!run_cache.empty()) cfg.cache_dir = (fs::path(run_cache) / "cuda").string();
    }
  }
  if (!task)
    throw Error(Status::invalid_argument, "the task is needed to load a solution file or text: give its name or path");
  cfg.task = task->spec();
  if (src.solution) cfg.solution = *src.solution;
  if (!src.solution_file.empty()) cfg.solution = load_solution_file(src.solution_file, cfg.task);
  if (!src.solution_text.empty()) cfg.solution = parse_solution_text(src.solution_text, cfg.task);
  if (cfg.solution.id.empty()) cfg.solution.finalize();
  std::unique_ptr<Kernel> k(new Kernel());
  k->impl_->host = std::make_unique<eval::cuda::HostKernel>(std::move(cfg));
  return k;
}

ResolvedKernelPlan Kernel::resolve(const KernelLaunch& launch) {
  eval::cuda::HostResolved r = impl_->host->resolve(host_launch(launch));
  ResolvedKernelPlan out;
  out.variant = r.plan.variant;
  out.workload = r.workload;
  out.params = r.params;
  for (const auto& l : r.plan.launches)
    out.launches.push_back({l.kernel, l.symbol, l.grid, l.block, l.cluster, l.has_cluster, l.shared_bytes});
  for (const auto& s : r.plan.scratch) out.scratch.emplace_back(s.name, s.bytes);
  return out;
}

void Kernel::launch(const KernelLaunch& launch) { impl_->host->launch(host_launch(launch)); }
const Solution& Kernel::solution() const { return impl_->host->solution(); }
const TaskSpec& Kernel::task() const { return impl_->host->task(); }
const std::string& Kernel::arch() const { return impl_->host->arch(); }
std::size_t Kernel::module_count() const { return impl_->host->module_count(); }
#endif

KS_NAMESPACE_END
