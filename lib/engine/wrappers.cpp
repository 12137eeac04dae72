// The wrappers around a run's evaluator and LLM policy (engine/wrappers.hpp).
#include "engine/wrappers.hpp"

#include <fmt/format.h>

#include <mutex>

#include "ksearch/error.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"

namespace ks::engine {
namespace {

// With a cancel token, every LLM call and evaluation is checked against it
// before and after: one that was cut short (or returned after the cancel)
// throws Status::cancelled, so the session journals nothing of it.
void check_cancel(const CancelToken& t, const char* what) {
  if (t.cancelled()) throw Error(Status::cancelled, fmt::format("the run was cancelled ({})", what));
}

class CancellableLlm final : public LlmPolicy {
 public:
  CancellableLlm(std::shared_ptr<LlmPolicy> inner, std::shared_ptr<CancelToken> token)
      : inner_(std::move(inner)), token_(std::move(token)) {}
  LlmResponse complete(const LlmRequest& r) override {
    check_cancel(*token_, "before an LLM call");
    LlmResponse out = inner_->complete(r);
    check_cancel(*token_, "during an LLM call");
    return out;
  }
  std::vector<LlmResponse> complete_batch(const std::vector<LlmRequest>& r) override {
    check_cancel(*token_, "before an LLM call");
    auto out = inner_->complete_batch(r);
    check_cancel(*token_, "during an LLM call");
    return out;
  }
  std::string describe() const override { return inner_->describe(); }
  bool exhausted() const override { return inner_->exhausted(); }
  LlmUsage total_usage() const override { return inner_->total_usage(); }
  void cancel() override { inner_->cancel(); }

 private:
  std::shared_ptr<LlmPolicy> inner_;
  std::shared_ptr<CancelToken> token_;
};

class CancellableEvaluator final : public Evaluator {
 public:
  CancellableEvaluator(std::shared_ptr<Evaluator> inner, std::shared_ptr<CancelToken> token)
      : inner_(std::move(inner)), token_(std::move(token)) {}
  EvalResult evaluate(const Task& task, const Solution& s) override {
    check_cancel(*token_, "before an evaluation");
    EvalResult r = inner_->evaluate(task, s);
    check_cancel(*token_, "during an evaluation");
    return r;
  }
  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& s) override {
    check_cancel(*token_, "before an evaluation");
    auto r = inner_->evaluate_batch(task, s);
    check_cancel(*token_, "during an evaluation");
    return r;
  }
  DeviceInfo device() const override { return inner_->device(); }
  EvalOptions& options() override { return inner_->options(); }
  void cancel() override { inner_->cancel(); }

 private:
  std::shared_ptr<Evaluator> inner_;
  std::shared_ptr<CancelToken> token_;
};

// The evaluator of a reproduction: made on first use, so replaying recorded
// evaluations needs no GPU (and starts no worker). Until then it reports the
// recorded device, which the recorded prompts named.
class LazyEvaluator final : public Evaluator {
 public:
  LazyEvaluator(std::function<std::shared_ptr<Evaluator>()> make, DeviceInfo recorded)
      : make_(std::move(make)), recorded_(std::move(recorded)) {}
  EvalResult evaluate(const Task& task, const Solution& s) override { return get().evaluate(task, s); }
  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& s) override {
    return get().evaluate_batch(task, s);
  }
  DeviceInfo device() const override { return real_ ? real_->device() : recorded_; }
  EvalOptions& options() override { return get().options(); }
  // From another thread: the evaluator made (or about to be) hears of it.
  void cancel() override {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (real_) real_->cancel();
  }

 private:
  Evaluator& get() {
    std::lock_guard lock(mu_);
    if (!real_) {
      real_ = make_();
      if (cancelled_) real_->cancel();
    }
    return *real_;
  }
  std::function<std::shared_ptr<Evaluator>()> make_;
  DeviceInfo recorded_;
  std::mutex mu_;
  bool cancelled_ = false;
  std::shared_ptr<Evaluator> real_;
};

}  // namespace

std::shared_ptr<LlmPolicy> cancellable_llm(std::shared_ptr<LlmPolicy> inner, std::shared_ptr<CancelToken> token) {
  return std::make_shared<CancellableLlm>(std::move(inner), std::move(token));
}

std::shared_ptr<Evaluator> cancellable_evaluator(std::shared_ptr<Evaluator> inner, std::shared_ptr<CancelToken> token) {
  return std::make_shared<CancellableEvaluator>(std::move(inner), std::move(token));
}

std::shared_ptr<Evaluator> lazy_evaluator(std::function<std::shared_ptr<Evaluator>()> make, DeviceInfo recorded) {
  return std::make_shared<LazyEvaluator>(std::move(make), std::move(recorded));
}

}  // namespace ks::engine
