#include "export/bundle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/inputs.hpp"
#include "core/param_space.hpp"
#include "eval/evaluator_common.hpp"
#if KS_HAVE_CUDA_BACKEND
#include "eval/cuda/cubin.hpp"
#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/launch_plan.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#endif
#include "ksearch/error.hpp"
#include "ksearch/version.h"
#include "util/fs.hpp"
#include "util/sha256.hpp"
#include "util/text.hpp"

namespace ks::exporter {
#if KS_HAVE_CUDA_BACKEND
namespace {

namespace fs = std::filesystem;
using eval::CompileError;
using eval::CompileRequest;
using eval::PreparedSolution;

Json strings(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

Json params_json(const util::Vars& v) {
  Json o = Json::object();
  for (const auto& [k, x] : v) o[k] = x;
  return o;
}

// The task's tensors in order; a scalar input has "shape": null (it is
// passed by value, in its own type).
Json tensors_json(const TaskSpec& task) {
  Json out = Json::array();
  for (const auto& t : task.tensors) {
    Json shape = nullptr;
    if (!t.scalar) shape = strings(t.shape);
    out.push_back(Json::obj({{"name", t.name}, {"dtype", to_string(t.dtype)}, {"shape", shape},
                             {"output", t.is_output}}));
  }
  return out;
}

Json build_json(const Solution& sol, const PreparedSolution::Build& b, const std::string& arch,
                const std::vector<std::string>& name_exprs) {
  const std::string cubin = util::read_file(b.artifact.path);
  Json kernels = Json::array();
  for (const auto& k : eval::cuda::inspect_cubin(cubin)) {
    Json params = nullptr;
    if (k.params) {
      params = Json::array();
      for (const auto& p : *k.params) params.push_back(Json::arr({static_cast<std::int64_t>(p.offset),
                                                                  static_cast<std::int64_t>(p.size)}));
    }
    kernels.push_back(Json::obj({{"symbol", k.symbol},
                                 {"name", eval::cuda::plan_name_of(k.demangled)},
                                 {"params", params}}));
  }
  // The translation unit NVRTC compiled, for a rebuild on another GPU.
  const util::Vars compiled = core::compiled_values(sol.params, b.params);
  const eval::cuda::ProgramSource src =
      eval::cuda::assemble_source(sol.sources, std::map<std::string, std::int64_t>(compiled.begin(), compiled.end()));
  Json headers = Json::array();
  for (const auto& [name, text] : src.headers) headers.push_back(Json::arr({name, text}));
  Json lowered = Json::object();
  for (const auto& [k, v] : b.artifact.lowered_names) lowered[k] = v;
  return Json::obj({{"params", params_json(b.params)},
                    {"arch", arch},
                    {"origin", b.artifact.cache_hit ? "evaluator cache" : "NVRTC"},
                    {"cubin_bytes", static_cast<std::int64_t>(cubin.size())},
                    {"cubin_sha256", util::sha256_hex(cubin)},
                    {"cubin", util::base64_encode(cubin)},
                    {"program", Json::obj({{"name", src.name}, {"text", src.text}, {"headers", headers}})},
                    {"name_expressions", strings(name_exprs)},
                    {"lowered_names", lowered},
                    {"kernels", kernels}});
}

#if KS_HAVE_CUDA_BACKEND
// The build that shapes outside the task's workloads run: the solution's
// default parameter values, when they are admissible (checked per shape at
// run time); compiled and added when no workload used them. -1, and why in
// `note`, where there is none.
int add_default_build(const TaskSpec& task, PreparedSolution& p, const EvalOptions& eo, const std::string& arch,
                      const std::string& cache_dir, eval::cuda::CudaCompiler& compiler, std::string& note) {
  try {
    const util::Vars defaults = core::resolve_param_values(p.solution.params, "", {});
    for (std::size_t i = 0; i < p.builds.size(); ++i)
      if (p.builds[i].params == defaults) return static_cast<int>(i);
    CompileRequest req = eval::make_compile_request(task, p.solution, defaults, eo, arch, cache_dir);
    try {
      p.builds.push_back({defaults, compiler.compile(req)});
      return static_cast<int>(p.builds.size()) - 1;
    } catch (const CompileError& e) {
      note = fmt::format("the default parameter values do not compile ({}); only the task's workload shapes can run",
                         e.what());
    }
  } catch (const Error& e) {
    note = fmt::format("no default parameter values ({}); only the task's workload shapes can run", e.what());
  }
  return -1;
}

// Each workload's shape, the build it runs, and its scalar inputs' values
// as the evaluation passed them.
Json workloads_json(const TaskSpec& task, const PreparedSolution& p) {
  Json workloads = Json::array();
  for (const auto& w : task.workloads) {
    Json dims = Json::object();
    for (const auto& [k, v] : w.dims) dims[k] = v;
    Json wj = Json::obj({{"name", w.name}, {"dims", dims}, {"build", p.workload_build.at(w.name)}});
    const auto scalars = core::scalar_values(task, w);
    if (!scalars.empty()) {
      Json sj = Json::object();
      for (const auto& [k, v] : scalars) sj[k] = v;
      wj["scalars"] = sj;
    }
    workloads.push_back(std::move(wj));
  }
  return workloads;
}
#endif

}  // namespace
#endif

std::string json_for_python(const Json& j) {
  std::string text = j.dump(1);
  // In JSON a quote can only stand inside a string, where \u0027 means the same.
  std::string out = "r'''";
  out.reserve(text.size() + 16);
  for (char c : text) {
    if (c == '\'') out += "\\u0027";
    else out += c;
  }
  out += "'''";
  return out;
}

Json make_bundle(const TaskSpec& task, const Solution& solution, const BundleOptions& o,
                 std::vector<std::string>* notes) {
#if !KS_HAVE_CUDA_BACKEND
  // An export holds the cubins the CUDA backend's compiler builds.
  (void)task, (void)solution, (void)o, (void)notes;
  throw Error(Status::no_device,
              "this build of libksearch has no CUDA backend (configured with KS_WITH_CUDA=OFF), so it cannot build "
              "the cubins an export holds");
#else
  if (solution.language != Language::cuda)
    throw Error(Status::invalid_argument,
                fmt::format("only CUDA solutions (NVRTC device code plus a launch plan) can be exported; this one "
                            "is written in {}",
                            to_string(solution.language)));
  if (solution.launch_plan.empty())
    throw Error(Status::invalid_argument, "the solution has no launch plan, so there is nothing to launch");
  if (task.workloads.empty())
    throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no workloads", task.name));
  Solution sol = solution;
  if (sol.id.empty()) sol.finalize();
  const eval::cuda::LaunchPlan plan = eval::cuda::LaunchPlan::parse(sol.launch_plan);

  const fs::path root = o.cache_root.empty() ? util::default_cache_dir() : fs::path(o.cache_root);
  const std::string cache_dir = (root / "cuda").string();
  // The compiler a compile worker runs (worker_main.cpp): same options,
  // same cache, precompiled headers on.
  eval::CudaCompilerOptions co;
  co.arch = o.arch;
  co.cache_dir = cache_dir;
  eval::cuda::CudaCompiler compiler(co);
  auto compile = [&](const CompileRequest& r) { return compiler.compile(r); };

  EvalOptions eo;
  eo.extra_compile_flags = o.flags;
  eo.compile_timeout_s = o.compile_timeout_s;
  std::vector<std::string> names;
  for (const auto& w : task.workloads) names.push_back(w.name);
  auto prepared = eval::prepare_solution(task, sol, names, eo, o.arch, cache_dir, compile);
  if (auto* failed = std::get_if<EvalResult>(&prepared))
    throw Error(Status::compile, fmt::format("the solution does not compile for {}: {}", o.arch, failed->log));
  PreparedSolution p = std::get<PreparedSolution>(std::move(prepared));

  std::string default_note;
  const int default_build = add_default_build(task, p, eo, o.arch, cache_dir, compiler, default_note);

  const std::vector<std::string> name_exprs = eval::cuda::name_expressions_of(&plan);
  Json builds = Json::array();
  for (std::size_t i = 0; i < p.builds.size(); ++i) {
    builds.push_back(build_json(p.solution, p.builds[i], o.arch, name_exprs));
    if (notes) {
      std::string params;
      for (const auto& [k, v] : p.builds[i].params) params += fmt::format("{}{}={}", params.empty() ? "" : ", ", k, v);
      notes->push_back(fmt::format("build {}{}: {} cubin, {} bytes, sha256 {}", i,
                                   params.empty() ? "" : " (" + params + ")",
                                   p.builds[i].artifact.cache_hit ? "the evaluator's cached" : "a fresh NVRTC",
                                   builds[i].get_int("cubin_bytes"), builds[i].get_string("cubin_sha256")));
    }
  }
  if (notes && !default_note.empty()) notes->push_back(default_note);

  const Json workloads = workloads_json(task, p);
  Json constraints = Json::array();
  const core::ParamSpace space(sol.params);
  for (const auto& c : space.constraints()) constraints.push_back(c.text());

  const eval::cuda::NvrtcApi& api = eval::cuda::nvrtc();
  CompileRequest any = eval::make_compile_request(task, p.solution, p.builds.front().params, eo, o.arch, cache_dir);
  return Json::obj(
      {{"format", "ksearch-export"},
       {"format_version", 1},
       {"library_version", KS_VERSION_STRING},
       {"task", Json::obj({{"name", task.name},
                           {"dims", strings(task.dims)},
                           {"tensors", tensors_json(task)},
                           {"workloads", workloads}})},
       {"solution", Json::obj({{"id", p.solution.id},
                               {"name", sol.name},
                               {"description", sol.description},
                               {"sources", [&] {
                                  Json a = Json::array();
                                  for (const auto& f : sol.sources) a.push_back(f.path);
                                  return a;
                                }()}})},
       {"plan", sol.launch_plan.to_json()},
       {"constraints", constraints},
       {"arch", o.arch},
       {"nvrtc", Json::obj({{"version", api.version_string()},
                            {"library", api.library},
                            {"options", strings(compiler.nvrtc_options(any, o.arch))},
                            {"toolkit_include_dirs", strings(eval::cuda::toolkit_include_dirs())}})},
       {"builds", builds},
       {"default_build", default_build}});
#endif
}

Json bundle_summary(const Json& bundle) {
  Json s = bundle;
  if (Json* builds = s.find("builds"))
    for (auto& b : builds->as_array()) {
      b.erase("cubin");
      b.erase("program");
    }
  return s;
}

}  // namespace ks::exporter
