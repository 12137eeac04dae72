// Tasks and single evaluations through the C ABI.
#include "capi_internal.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"

struct ks_task {
  std::unique_ptr<ks::Task> task;
  std::string json;
};

struct ks_evaluator {
  std::unique_ptr<ks::Evaluator> evaluator;
};

using namespace ks::capi;

extern "C" {

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
      // A program built with version 1 passed the shorter struct (an unknown
      // version is refused there, before a byte past the version is read).
      const ks_eval_options current = eval_options_in_current_layout(options);
      apply_eval_options(current, c, "options");
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
