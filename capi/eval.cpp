// Tasks and single evaluations through the C ABI.
#include "capi_internal.hpp"
#include "util/fs.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"

struct ks_task {
  std::unique_ptr<ks::Task> task;
  std::string json;
};

struct ks_evaluator {
  std::unique_ptr<ks::Evaluator> evaluator;
};

namespace ks::capi {

void apply_eval_options(const ks_eval_options& o, EvaluatorConfig& e, const char* prefix) {
  const std::string p = prefix;
  check_version(prefix, o.version, KS_EVAL_OPTIONS_VERSION);
  e.backend = backend_of(o.backend, (p + ".backend").c_str());
  if (o.device_count > 0 && !o.devices)
    throw Error(Status::invalid_argument, fmt::format("{}.devices is NULL but device_count is {}", p, o.device_count));
  e.devices.assign(o.devices, o.devices + o.device_count);
  for (int d : e.devices)
    if (d < 0) throw Error(Status::invalid_argument, fmt::format("{}.devices holds {}, not a GPU ordinal", p, d));
  e.in_process = o.in_process != 0;
  e.cache_dir = str(o.cache_dir);
  e.cuda_arch = str(o.cuda_arch);
  e.sandbox = sandbox_of(o.sandbox, (p + ".sandbox").c_str());
  e.memory_limit_bytes = o.memory_limit_bytes;
  e.worker_path = str(o.worker_path);
  if (o.compile_workers < 0) throw Error(Status::invalid_argument, p + ".compile_workers must be >= 0");
  e.compile_workers = o.compile_workers;
  EvalOptions& x = e.options;
  x.max_time_per_workload_s = finite_at_least(o.timing_cap_s, 0, p + ".timing_cap_s", true);
  if (o.seeds < 2 || o.seeds > 64)
    throw Error(Status::invalid_argument,
                fmt::format("{}.seeds must be between 2 and 64 (two input sets are checked per workload), is {}", p,
                            o.seeds));
  x.seeds_per_workload = o.seeds;
  x.compile_timeout_s = finite_at_least(o.compile_timeout_s, 0, p + ".compile_timeout_s", true);
  x.run_timeout_s = finite_at_least(o.run_timeout_s, 0, p + ".run_timeout_s", true);
  x.timing = timing_of(o.timing, (p + ".timing").c_str());
  if (o.baseline_latencies_path) {
    const std::string where = p + ".baseline_latencies_path";
    std::string text;
    try {
      text = util::read_file(o.baseline_latencies_path, std::size_t{64} << 20);
    } catch (const Error& err) {
      throw Error(Status::not_found, fmt::format("{}: {}", where, err.what()));
    }
    Json b = json_object_field(text.c_str(), fmt::format("{} ({})", where, o.baseline_latencies_path));
    x.baseline_latencies = std::move(b);
  }
  if (o.options_json) {
    Json extra = json_object_field(o.options_json, p + ".options_json");
    Json merged = x.to_json();
    for (const auto& [k, v] : extra.as_object()) {
      if (!merged.contains(k)) {
        std::string names;
        for (const auto& [n, unused] : merged.as_object()) names += (names.empty() ? "" : ", ") + n;
        throw Error(Status::invalid_argument,
                    fmt::format("{}.options_json: unknown setting \"{}\" (known: {})", p, k, names));
      }
      merged[k] = v;
    }
    try {
      x = EvalOptions::from_json(merged);
    } catch (const Error& err) {
      throw Error(Status::invalid_argument, fmt::format("{}.options_json: {}", p, err.what()));
    }
  }
}

}  // namespace ks::capi

using namespace ks::capi;

extern "C" {

ks_status ks_eval_options_init(ks_eval_options* o, uint32_t version) {
  if (ks_status s = init_struct("ks_eval_options_init", o, version, KS_EVAL_OPTIONS_VERSION); s != KS_OK) return s;
  ks::EvaluatorConfig d;
  o->backend = static_cast<ks_backend>(static_cast<int>(d.backend));
  o->in_process = d.in_process ? 1 : 0;
  o->sandbox = static_cast<ks_sandbox_mode>(static_cast<int>(d.sandbox));
  o->memory_limit_bytes = d.memory_limit_bytes;
  o->timing_cap_s = d.options.max_time_per_workload_s;
  o->seeds = d.options.seeds_per_workload;
  o->compile_timeout_s = d.options.compile_timeout_s;
  o->run_timeout_s = d.options.run_timeout_s;
  o->compile_workers = d.compile_workers;
  o->timing = static_cast<ks_timing_mode>(static_cast<int>(d.options.timing));
  return KS_OK;
}

ks_status ks_task_load(const char* name_or_path, ks_task** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_task_load: out is NULL");
  *out = nullptr;
  if (!name_or_path) return fail(KS_E_INVALID_ARGUMENT, "ks_task_load: name_or_path is NULL");
  return guarded("ks_task_load", [&] {
    auto t = std::make_unique<ks_task>();
    t->task = ks::load_task(name_or_path);
    t->json = t->task->spec().to_json().dump(2);
    *out = t.release();
    return KS_OK;
  });
}

void ks_task_destroy(ks_task* task) { delete task; }
const char* ks_task_name(const ks_task* t) { return t ? t->task->name().c_str() : ""; }
const char* ks_task_json(const ks_task* t) { return t ? t->json.c_str() : ""; }

ks_status ks_evaluator_create(const ks_eval_options* options, ks_evaluator** out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluator_create: out is NULL");
  *out = nullptr;
  return guarded("ks_evaluator_create", [&] {
    ks::EvaluatorConfig c;
    if (options) {
      apply_eval_options(*options, c, "options");
    }
    auto e = std::make_unique<ks_evaluator>();
    e->evaluator = ks::make_evaluator(c);
    *out = e.release();
    return KS_OK;
  });
}

void ks_evaluator_destroy(ks_evaluator* e) { delete e; }

ks_status ks_evaluate(ks_evaluator* evaluator, const ks_task* task, const char* solution, char** result_json) {
  if (!result_json) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluate: result_json is NULL");
  *result_json = nullptr;
  if (!evaluator) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluate: evaluator is NULL");
  if (!task) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluate: task is NULL");
  if (!solution) return fail(KS_E_INVALID_ARGUMENT, "ks_evaluate: solution is NULL");
  return guarded("ks_evaluate", [&] {
    ks::Solution s = ks::parse_solution_text(solution, task->task->spec());
    ks::EvalResult r = evaluator->evaluator->evaluate(*task->task, s);
    *result_json = copy_out(r.to_json().dump(2));
    return KS_OK;
  });
}

void ks_string_free(char* s) { std::free(s); }

}  // extern "C"
