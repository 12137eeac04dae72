#include "eval/evaluator_common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "core/param_space.hpp"
#if KS_HAVE_CUDA_BACKEND
#include "eval/cuda/cuda_backend.hpp"
#endif
#include "ksearch/error.hpp"
#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace ks::eval {

const char* to_string(Backend b) { return b == Backend::cuda ? "cuda" : "host"; }

void validate_config_sets(const EvaluatorConfig& config) {
  // Membership is the name table's (vocabulary.hpp): to_string gives "?" for a value cast from outside the set.
  if (!backend_from_string(to_string(config.backend)))
    throw Error(Status::invalid_argument, fmt::format("evaluator backend {} is not one of auto, cuda, host",
                                                      static_cast<int>(config.backend)));
  if (!sandbox_mode_from_string(to_string(config.sandbox)))
    throw Error(Status::invalid_argument,
                fmt::format("sandbox {} is not one of auto, on, off", static_cast<int>(config.sandbox)));
}

Backend backend_for(Language language, EvalBackend configured, bool gpu_usable) {
  if (language == Language::python) {
    if (configured == EvalBackend::cuda) return Backend::cuda;
    if (configured == EvalBackend::host) return Backend::host;
    return gpu_usable ? Backend::cuda : Backend::host;
  }
  Backend b = language == Language::cuda || language == Language::triton ? Backend::cuda : Backend::host;
  const EvalBackend wanted = b == Backend::cuda ? EvalBackend::cuda : EvalBackend::host;
  if (configured != EvalBackend::automatic && configured != wanted)
    throw Error(Status::invalid_argument,
                fmt::format("the {} backend evaluates only {} candidates, and these are written in {}; use "
                            "--backend auto or {}{}",
                            ks::to_string(configured),
                            configured == EvalBackend::cuda ? "GPU (cuda, triton, python)" : "CPU (cpp, python)",
                            ks::to_string(language), ks::to_string(wanted),
                            language == Language::triton ? ", or --language python for PyTorch on the CPU"
                            : language == Language::cuda ? ", or --language cpp where the task has a host version"
                                                         : ""));
  return b;
}

Language reference_language(Backend b) { return b == Backend::cuda ? Language::cuda : Language::cpp; }

const char* cache_folder(Language l) {
  return l == Language::cuda ? "cuda" : l == Language::cpp ? "host" : "python";
}

std::vector<std::string> select_workloads(const TaskSpec& task, const EvalOptions& o) {
  for (const auto& name : o.only_workloads)
    if (!task.find_workload(name)) {
      std::string known;
      for (const auto& w : task.workloads) known += (known.empty() ? "" : ", ") + w.name;
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\" has no workload \"{}\" (workloads: {})", task.name, name, known));
    }
  auto wanted = [&](const WorkloadSpec& w) {
    if (!o.only_workloads.empty())
      return std::find(o.only_workloads.begin(), o.only_workloads.end(), w.name) != o.only_workloads.end();
    return w.benchmark ? o.run_benchmarks : o.run_tests;
  };
  std::vector<std::string> out;
  for (bool bench : {false, true})
    for (const auto& w : task.workloads)
      if (w.benchmark == bench && wanted(w)) out.push_back(w.name);
  if (out.empty())
    throw Error(Status::invalid_argument,
                fmt::format("no workload of task \"{}\" is selected by the evaluation options", task.name));
  return out;
}

void check_solution_fits(const TaskSpec& task, const Solution& s, Backend backend) {
  if (std::find(task.languages.begin(), task.languages.end(), s.language) == task.languages.end())
    throw Error(Status::invalid_argument,
                fmt::format("task \"{}\" cannot be evaluated in {} (it supports: {})", task.name,
                            ks::to_string(s.language), [&] {
                              std::string l;
                              for (auto x : task.languages) l += (l.empty() ? "" : ", ") + std::string(ks::to_string(x));
                              return l;
                            }()));
  const Language ref = reference_language(backend);
  if (!task.references.count(ref) && task.oracle.is_null())
    throw Error(Status::invalid_argument,
                fmt::format("task \"{}\" has no {} reference solution to check {} candidates against on the {}",
                            task.name, ks::to_string(ref), ks::to_string(s.language),
                            backend == Backend::cuda ? "GPU" : "CPU"));
}

std::string task_key(const TaskSpec& task) { return util::sha256_hex(task.to_json().dump()).substr(0, 24); }

CompileRequest make_compile_request(const TaskSpec& task, const Solution& solution, const util::Vars& values,
                                    const EvalOptions& options, const std::string& arch, const std::string& cache_dir) {
  CompileRequest req;
  req.solution = solution;
  req.arch = arch;
  req.flags = options.extra_compile_flags;
  const util::Vars compiled = core::compiled_values(solution.params, values);
  req.params = std::map<std::string, std::int64_t>(compiled.begin(), compiled.end());
  req.cache_dir = cache_dir;
  req.tensors = task.tensors;
  req.python_entry = task.python;
  req.timeout_s = options.compile_timeout_s;
  return req;
}

std::variant<PreparedSolution, EvalResult> prepare_solution(const TaskSpec& task, const Solution& solution,
                                                            const std::vector<std::string>& workloads,
                                                            const EvalOptions& options, const std::string& arch,
                                                            const std::string& cache_dir, const CompileFn& compile) {
  PreparedSolution p;
  p.solution = solution;
  if (p.solution.id.empty()) p.solution.finalize();
  p.flags = options.extra_compile_flags;
  double failed_compile_s = 0;  // time spent on a compilation that failed
  auto failed = [&](const Failure& f) {
    EvalResult r;
    f.record(r);
    r.solution_id = p.solution.id;
    double compile_s = failed_compile_s;
    for (const auto& b : p.builds) compile_s += b.artifact.compile_s;
    r.metrics = Json::obj({{"compile_s", compile_s}, {"builds", static_cast<int>(p.builds.size())}});
    return r;
  };
  std::map<util::Vars, int> by_params;
  // The solution's parameters are read once (Solution::params); each workload
  // resolves its values from them.
  std::optional<core::ParamSpace> space;
  try {
    space.emplace(solution.params);
  } catch (const Error& e) {
    return failed(Failure{.status = EvalStatus::compile_error, .message = e.what()});
  }
  for (const auto& name : workloads) {
    const WorkloadSpec* w = task.find_workload(name);
    if (!w) throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no workload \"{}\"", task.name, name));
    util::Vars dims;
    for (const auto& [k, v] : w->dims) dims[k] = v;
    util::Vars values;
    try {
      values = space->resolve(solution.params, name, dims);
    } catch (const Error& e) {
      return failed(Failure{.status = EvalStatus::compile_error, .message = e.what()});
    }
    auto it = by_params.find(values);
    if (it == by_params.end()) {
      CompileRequest req = make_compile_request(task, p.solution, values, options, arch, cache_dir);
      const auto start = std::chrono::steady_clock::now();
      try {
        p.builds.push_back({values, compile(req)});
      } catch (const CompileError& e) {
        failed_compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        Failure f = e.failure();
        if (!values.empty()) {
          std::string where;
          for (const auto& [k, v] : values) where += (where.empty() ? "" : ", ") + fmt::format("{}={}", k, v);
          f.message += " (parameters " + where + ")";
        }
        return failed(f);
      }
      it = by_params.emplace(values, static_cast<int>(p.builds.size()) - 1).first;
    }
    p.workload_build[name] = it->second;
  }
  return p;
}

PreparedSolution prepare_reference(const TaskSpec& task, Language l, const EvalOptions& options,
                                   const std::string& arch, const std::string& cache_dir, const CompileFn& compile) {
  EvalOptions o = options;
  o.extra_compile_flags.clear();
  std::vector<std::string> all;
  for (const auto& w : task.workloads) all.push_back(w.name);
  auto prepared = prepare_solution(task, task.references.at(l), all, o, arch, cache_dir, compile);
  if (auto* failed = std::get_if<EvalResult>(&prepared))
    throw Error(Status::compile, fmt::format("the {} reference of task \"{}\" does not compile: {}",
                                             ks::to_string(l), task.name, failed->log));
  return std::get<PreparedSolution>(std::move(prepared));
}

void add_compile_info(EvalResult& result, const PreparedSolution& prepared) {
  double compile_s = 0;
  int hits = 0, pch_used = 0, pch_created = 0;
  std::string log;
  for (const auto& b : prepared.builds) {
    compile_s += b.artifact.compile_s;
    hits += b.artifact.cache_hit ? 1 : 0;
    pch_used += b.artifact.pch == "used" ? 1 : 0;
    pch_created += b.artifact.pch == "created" ? 1 : 0;
    if (!b.artifact.log.empty() && log.find(b.artifact.log) == std::string::npos) log += b.artifact.log;
  }
  if (!result.metrics.is_object()) result.metrics = Json::object();
  // A Python candidate compiles in its first calls (Triton's JIT, autotuning),
  // or when loaded (an imported C++/CUDA Solution's extension build).
  for (const char* k : {"first_calls_s", "extension_build_s"})
    if (result.metrics.contains(k)) compile_s += result.metrics.at(k).as_number();
  result.metrics["compile_s"] = compile_s;
  result.metrics["compile_cache_hits"] = hits;
  result.metrics["builds"] = static_cast<int>(prepared.builds.size());
  // NVRTC's precompiled headers: builds that read one, builds that wrote one.
  if (prepared.solution.language == Language::cuda) {
    result.metrics["compile_pch_used"] = pch_used;
    result.metrics["compile_pch_created"] = pch_created;
  }
  if (result.log.empty() && !log.empty()) result.log = "compiler output:\n" + log;
}

namespace {
std::string ref_key(const std::string& task_key, const std::string& device, const std::string& workload) {
  return task_key + "\n" + device + "\n" + workload;
}
}  // namespace

// Bump when the timing code changes what it measures (warm-up, flushes,
// poisoning, how calls are timed, which statistic is kept): latencies
// measured before are then misses. 3: the latency statistic (p10 on the host,
// median on a GPU, mean under upstream timing) instead of the mean.
constexpr int kTimingCodeVersion = 3;

std::string timing_identity(const DeviceInfo& device, const PreparedSolution& reference, const EvalOptions& options,
                            bool in_process) {
  std::string driver = "none";
#if KS_HAVE_CUDA_BACKEND
  if (device.backend == "cuda") driver = std::to_string(cuda_driver_version());
#endif
  std::string builds;
  for (const auto& b : reference.builds) builds += std::filesystem::path(b.artifact.path).filename().string() + ",";
  return fmt::format("{}|{}|{}|{:.6g}|{:.6g}|driver {}|reference {}|timing {} flush {} target {:.3g} code {}|{}",
                     device.name, device.arch, device.memory_bytes, device.peak_flops, device.peak_bytes_per_s,
                     driver, util::sha256_hex(builds).substr(0, 16), ks::to_string(options.timing), options.flush_l2 ? 1 : 0,
                     options.target_rel_stderr, kTimingCodeVersion, in_process ? "in-process" : "worker");
}

std::filesystem::path ReferenceTimes::file_for(const std::string& key) const {
  return dir_ / (util::sha256_hex(key).substr(0, 32) + ".json");
}

std::optional<double> ReferenceTimes::find(const std::string& task_key, const std::string& device,
                                           const std::string& workload) const {
  const std::string key = ref_key(task_key, device, workload);
  if (auto it = ms_.find(key); it != ms_.end()) return it->second;
  if (dir_.empty()) return std::nullopt;
  std::error_code ec;
  const auto path = file_for(key);
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  try {
    Json j = Json::parse(util::read_file(path, 1 << 16));
    const Json* ms = j.find("ms");
    if (j.get_string("key") != key || !ms || !ms->is_number() || !(ms->as_number() > 0)) return std::nullopt;
    ms_[key] = ms->as_number();
    return ms->as_number();
  } catch (const Error&) {
    return std::nullopt;  // torn or foreign: measured again and rewritten
  }
}

void ReferenceTimes::put(const std::string& task_key, const std::string& device, const std::string& workload,
                         double ms) {
  const std::string key = ref_key(task_key, device, workload);
  ms_[key] = ms;
  if (dir_.empty() || !(ms > 0)) return;
  try {
    util::make_dirs(dir_);
    util::write_file_atomic(file_for(key), Json::obj({{"key", key}, {"ms", ms}}).dump());
  } catch (const Error&) {
    // A read-only or full cache costs a measurement next time, nothing else.
  }
}

std::vector<std::string> ReferenceTimes::missing(const TaskSpec& task, const std::string& task_key,
                                                 const std::string& device,
                                                 const std::vector<std::string>& workloads) const {
  std::vector<std::string> out;
  for (const auto& name : workloads) {
    const WorkloadSpec* w = task.find_workload(name);
    if (w && w->benchmark && !find(task_key, device, name)) out.push_back(name);
  }
  return out;
}

void ReferenceTimes::apply(EvalResult& result, const std::string& task_key, const std::string& device) const {
  for (auto& w : result.workloads)
    if (w.benchmark && w.reference_ms <= 0)
      if (auto ms = find(task_key, device, w.name)) w.reference_ms = *ms;
  result.compute_summary();
}

}  // namespace ks::eval
