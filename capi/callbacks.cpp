// The host's parts behind the C++ interfaces: LLM callbacks as LlmPolicy,
// evaluator callbacks as Evaluator, and the progress and event callbacks.
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "capi_internal.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"

// Opaque handle definitions (global namespace, as declared in the headers).
struct ks_llm_answer {
  std::string text;
  bool has_text = false;
  std::string error;
  ks::LlmUsage usage;
};

struct ks_eval_answer {
  std::optional<ks::EvalResult> result;
};

namespace ks::capi {
namespace {

// The answer a callback left, as a response (usage counts either way).
LlmResponse response_of(ks_llm_answer& a, const char* what) {
  LlmResponse r;
  r.usage = a.usage;
  if (!a.error.empty()) {
    r.error = fmt::format("{}: {}", what, a.error);
  } else if (!a.has_text) {
    r.error = fmt::format("{} left the answer without text", what);
  } else {
    r.ok = true;
    r.text = std::move(a.text);
    r.finish_reason = "stop";
  }
  return r;
}

[[noreturn]] void stop_requested(const char* what) {
  throw Error(Status::cancelled, fmt::format("{} asked to stop the run (KS_E_USER)", what));
}

class CallbackPolicy final : public LlmPolicy {
 public:
  CallbackPolicy(ks_llm_callback cb, void* user) : cb_(cb), user_(user) {}
  LlmResponse complete(const LlmRequest& req) override {
    ks_llm_request r{prompt_kind_to_c(req.kind), req.system.c_str(), req.prompt.c_str()};
    ks_llm_answer answer;
    int rc = 0;
    try {
      rc = cb_(&r, &answer, user_);
    } catch (...) {
      rc = KS_E_INTERNAL;  // a C++ host's callback threw; treat as a failed generation
    }
    if (rc == KS_E_USER) stop_requested("the LLM callback");
    LlmResponse resp;
    if (rc != 0) {
      resp.usage = answer.usage;
      resp.error = fmt::format("the LLM callback returned {}", rc);
    } else {
      resp = response_of(answer, "the LLM callback");
    }
    total_ += resp.usage;
    return resp;
  }
  std::string describe() const override { return "c-callback"; }
  LlmUsage total_usage() const override { return total_; }

 private:
  ks_llm_callback cb_;
  void* user_;
  LlmUsage total_;
};

class BatchCallbackPolicy final : public LlmPolicy {
 public:
  BatchCallbackPolicy(ks_llm_batch_callback cb, void* user) : cb_(cb), user_(user) {}
  LlmResponse complete(const LlmRequest& req) override { return std::move(complete_batch({req}).front()); }
  std::vector<LlmResponse> complete_batch(const std::vector<LlmRequest>& reqs) override {
    std::vector<ks_llm_request> r;
    for (const auto& q : reqs) r.push_back({prompt_kind_to_c(q.kind), q.system.c_str(), q.prompt.c_str()});
    std::vector<ks_llm_answer> answers(reqs.size());
    std::vector<ks_llm_answer*> ptrs;
    for (auto& a : answers) ptrs.push_back(&a);
    int rc = 0;
    try {
      rc = cb_(r.data(), ptrs.data(), r.size(), user_);
    } catch (...) {
      rc = KS_E_INTERNAL;
    }
    if (rc == KS_E_USER) stop_requested("the LLM batch callback");
    std::vector<LlmResponse> out;
    for (auto& a : answers) {
      LlmResponse resp;
      if (rc != 0) {
        resp.usage = a.usage;
        resp.error = fmt::format("the LLM batch callback returned {}", rc);
      } else {
        resp = response_of(a, "the LLM batch callback");
      }
      total_ += resp.usage;
      out.push_back(std::move(resp));
    }
    return out;
  }
  std::string describe() const override { return "c-batch-callback"; }
  LlmUsage total_usage() const override { return total_; }

 private:
  ks_llm_batch_callback cb_;
  void* user_;
  LlmUsage total_;
};

DeviceInfo device_of(const char* json) {
  DeviceInfo d;
  d.backend = "callback";
  if (!json) return d;
  Json j;
  try {
    j = Json::parse(json);
  } catch (const Error& e) {
    throw Error(Status::invalid_argument, fmt::format("eval.callback_device_json is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw Error(Status::invalid_argument, "eval.callback_device_json must be a JSON object");
  // The callback's own defaults where the host leaves a field out (absent or null).
  const auto absent = [&](std::string_view key) {
    const Json* v = j.find(key);
    return !v || v->is_null();
  };
  d = DeviceInfo::from_json(j);
  if (absent("backend")) d.backend = "callback";
  if (absent("count")) d.count = 1;
  return d;
}

// The requests handed to evaluator callbacks right now, with the options
// each batch is evaluated under: ks_eval_request stays frozen, and
// ks_eval_request_options_json finds a request's batch by its address (a
// batch callback may pass requests on to other threads).
struct LiveBatch {
  const ks_eval_request* first;
  std::size_t count;
  const std::string* options_json;
};
std::mutex g_live_mutex;
std::vector<LiveBatch> g_live;

class LiveBatchScope {
 public:
  LiveBatchScope(const std::vector<ks_eval_request>& reqs, const std::string& options_json)
      : first_(reqs.data()) {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    g_live.push_back({reqs.data(), reqs.size(), &options_json});
  }
  ~LiveBatchScope() {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    std::erase_if(g_live, [&](const LiveBatch& b) { return b.first == first_; });
  }
  LiveBatchScope(const LiveBatchScope&) = delete;
  LiveBatchScope& operator=(const LiveBatchScope&) = delete;

 private:
  const ks_eval_request* first_;
};

class CallbackEvaluator final : public Evaluator {
 public:
  CallbackEvaluator(ks_evaluate_callback cb, ks_evaluate_batch_callback batch, void* user, DeviceInfo device)
      : cb_(cb), batch_(batch), user_(user), device_(std::move(device)) {}

  EvalResult evaluate(const Task& task, const Solution& s) override { return std::move(evaluate_batch(task, {s}).front()); }

  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& solutions) override {
    const std::string& task_json = json_of(task);
    std::vector<std::string> sol_json;
    for (const auto& s : solutions) sol_json.push_back(s.to_json().dump());
    std::vector<ks_eval_request> reqs;
    for (std::size_t i = 0; i < solutions.size(); ++i)
      reqs.push_back({task.name().c_str(), task_json.c_str(), sol_json[i].c_str(), solutions[i].id.c_str(),
                      static_cast<ks_language>(static_cast<int>(solutions[i].language))});
    const std::string options_json = options_.to_json().dump();
    const LiveBatchScope live(reqs, options_json);
    std::vector<ks_eval_answer> answers(solutions.size());
    std::vector<ks_eval_answer*> ptrs;
    for (auto& a : answers) ptrs.push_back(&a);
    const char* what = batch_ ? "the evaluator batch callback" : "the evaluator callback";
    for (std::size_t i = 0; i < reqs.size(); i += batch_ ? reqs.size() : 1) {
      int rc = 0;
      try {
        rc = batch_ ? batch_(reqs.data(), ptrs.data(), reqs.size(), user_) : cb_(&reqs[i], ptrs[i], user_);
      } catch (...) {
        rc = KS_E_INTERNAL;
      }
      if (rc == KS_E_USER) stop_requested(what);
      if (rc != 0)
        throw Error(Status::subprocess, fmt::format("{} failed (it returned {}) on solution {}", what, rc,
                                                    batch_ ? std::string("batch") : solutions[i].id));
    }
    std::vector<EvalResult> out;
    for (std::size_t i = 0; i < answers.size(); ++i) {
      if (!answers[i].result)
        throw Error(Status::subprocess,
                    fmt::format("{} returned 0 without a result for solution {}", what, solutions[i].id));
      EvalResult r = std::move(*answers[i].result);
      r.solution_id = solutions[i].id;
      if (r.device.empty()) r.device = device_.name;
      out.push_back(std::move(r));
    }
    return out;
  }

  DeviceInfo device() const override { return device_; }
  EvalOptions& options() override { return options_; }

 private:
  const std::string& json_of(const Task& task) {
    auto it = task_json_.find(&task);
    if (it == task_json_.end()) it = task_json_.emplace(&task, task.spec().to_json().dump()).first;
    return it->second;
  }

  ks_evaluate_callback cb_;
  ks_evaluate_batch_callback batch_;
  void* user_;
  DeviceInfo device_;
  EvalOptions options_;
  std::map<const Task*, std::string> task_json_;
};

}  // namespace

std::shared_ptr<LlmPolicy> llm_callback_policy(ks_llm_callback cb, void* user) {
  return std::make_shared<CallbackPolicy>(cb, user);
}

std::shared_ptr<LlmPolicy> llm_batch_callback_policy(ks_llm_batch_callback cb, void* user) {
  return std::make_shared<BatchCallbackPolicy>(cb, user);
}

std::shared_ptr<Evaluator> evaluator_callback_of(ks_evaluate_callback cb, ks_evaluate_batch_callback batch, void* user,
                                                 const char* device_json) {
  if (!cb && !batch) return nullptr;
  return std::make_shared<CallbackEvaluator>(cb, batch, user, device_of(device_json));
}

ProgressCallback progress_of(ks_progress_callback cb, void* user) {
  if (!cb) return {};
  return [cb, user](const RoundReport& r) {
    ks_round_report c{};
    c.round = r.round;
    c.max_rounds = r.max_rounds;
    c.action = r.action.c_str();
    c.status = eval_status_to_c(r.status);
    c.solution_id = r.solution_id.c_str();
    c.latency_ms = r.latency_ms;
    c.best_latency_ms = r.best_latency_ms;
    c.best_speedup = r.best_speedup;
    c.improved = r.improved ? 1 : 0;
    c.replayed = r.replayed ? 1 : 0;
    c.elapsed_s = r.elapsed_s;
    c.cost_usd = r.llm_usage.cost_usd;
    return cb(&c, user) == 0;
  };
}

EventCallback events_of(ks_event_callback cb, void* user) {
  if (!cb) return {};
  return [cb, user](const Json& e) {
    const std::string json = e.dump();
    const std::string type = e.get_string("type");
    ks_event c{e.get_int("seq"), type.c_str(), json.c_str()};
    cb(&c, user);
  };
}

}  // namespace ks::capi

using namespace ks::capi;

extern "C" {

ks_status ks_llm_answer_set_text(ks_llm_answer* answer, const char* text, size_t length) {
  // Each message names the NULL argument: "NULL argument" alone leaves the caller guessing.
  if (!answer) return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_text: answer is NULL");
  if (!text && length > 0)
    return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_text: text is NULL but length is not 0");
  return guarded("ks_llm_answer_set_text", [&] {
    answer->text.assign(text ? text : "", length);
    answer->has_text = true;
    answer->error.clear();
    return KS_OK;
  });
}

ks_status ks_llm_answer_set_usage(ks_llm_answer* answer, int64_t input_tokens, int64_t output_tokens, double cost_usd) {
  if (!answer) return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_usage: answer is NULL");
  if (input_tokens < 0 || output_tokens < 0 || cost_usd < 0)
    return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_usage: negative usage");
  // NaN passes `< 0`: a NaN cost would make the run's total NaN (written as
  // null) and silently switch max_cost_usd off; an infinite one is no cost either.
  if (!std::isfinite(cost_usd))
    return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_usage: cost_usd is not a finite number");
  answer->usage.input_tokens = input_tokens;
  answer->usage.output_tokens = output_tokens;
  answer->usage.cost_usd = cost_usd;
  answer->usage.attempts = 1;
  return KS_OK;
}

ks_status ks_llm_answer_set_error(ks_llm_answer* answer, const char* message) {
  if (!answer) return fail(KS_E_INVALID_ARGUMENT, "ks_llm_answer_set_error: answer is NULL");
  return guarded("ks_llm_answer_set_error", [&] {
    answer->error = message && *message ? message : "the host's model failed";
    answer->has_text = false;
    answer->text.clear();
    return KS_OK;
  });
}

const char* ks_eval_request_options_json(const ks_eval_request* request) {
  if (!request) return nullptr;
  std::lock_guard<std::mutex> lock(g_live_mutex);
  for (const auto& b : g_live)
    // std::less: a total order even for pointers into unrelated arrays.
    if (!std::less<>{}(request, b.first) && std::less<>{}(request, b.first + b.count)) return b.options_json->c_str();
  return nullptr;
}

ks_status ks_eval_answer_set_json(ks_eval_answer* answer, const char* result_json) {
  if (!answer) return fail(KS_E_INVALID_ARGUMENT, "ks_eval_answer_set_json: answer is NULL");
  if (!result_json) return fail(KS_E_INVALID_ARGUMENT, "ks_eval_answer_set_json: result_json is NULL");
  return guarded("ks_eval_answer_set_json", [&] {
    ks::EvalResult r = ks::EvalResult::from_json(ks::Json::parse(result_json));
    if (r.passed() && !(r.latency_ms > 0))
      throw ks::Error(ks::Status::invalid_argument, "a passed result needs a latency_ms above 0");
    if (r.passed() && r.score <= 0) r.score = 1.0 / r.latency_ms;
    answer->result = std::move(r);
    return KS_OK;
  });
}

ks_status ks_eval_answer_set_result(ks_eval_answer* answer, ks_eval_status status, double latency_ms,
                                    double reference_latency_ms, const char* log) {
  if (!answer) return fail(KS_E_INVALID_ARGUMENT, "ks_eval_answer_set_result: answer is NULL");
  return guarded("ks_eval_answer_set_result", [&] {
    ks::EvalResult r;
    r.status = eval_status_of(status, "status");
    if (!std::isfinite(latency_ms) || latency_ms < 0 || !std::isfinite(reference_latency_ms) ||
        reference_latency_ms < 0)
      throw ks::Error(ks::Status::invalid_argument, "latencies must be finite numbers >= 0");
    if (r.passed() && latency_ms <= 0)
      throw ks::Error(ks::Status::invalid_argument, "a passed result needs a latency_ms above 0");
    if (r.passed()) {
      r.latency_ms = latency_ms;
      r.score = 1.0 / latency_ms;
      r.reference_latency_ms = reference_latency_ms;
      if (reference_latency_ms > 0) r.speedup = reference_latency_ms / latency_ms;
    }
    r.log = log ? log : "";
    answer->result = std::move(r);
    return KS_OK;
  });
}

}  // extern "C"
