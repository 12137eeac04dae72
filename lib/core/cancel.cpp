// CancelToken: the flag, and handlers that run once, on the cancelling thread.
#include "ksearch/cancel.hpp"

#include <vector>

KS_NAMESPACE_BEGIN

void CancelToken::cancel() {
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  std::lock_guard running(running_mu_);
  std::vector<Handler> todo;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, h] : handlers_) todo.push_back(h);
  }
  for (auto& h : todo) {
    try {
      h();
    } catch (...) {
      // A part that cannot abort still stops at its next check of the token.
    }
  }
}

std::uint64_t CancelToken::subscribe(Handler handler) {
  std::uint64_t id;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    handlers_.emplace(id, handler);
  }
  if (cancelled()) {
    // Cancelled before (or while) subscribing: the handler may have been
    // missed by cancel(); running it twice is harmless (aborting is idempotent).
    std::lock_guard running(running_mu_);
    try {
      handler();
    } catch (...) {
    }
  }
  return id;
}

void CancelToken::unsubscribe(std::uint64_t id) {
  {
    std::lock_guard lock(mu_);
    handlers_.erase(id);
  }
  std::lock_guard running(running_mu_);  // waits for handlers running now
}

CancelToken::Subscription::Subscription(CancelToken* token, Handler handler) : token_(token) {
  if (token_) id_ = token_->subscribe(std::move(handler));
}

CancelToken::Subscription::~Subscription() {
  if (token_) token_->unsubscribe(id_);
}

KS_NAMESPACE_END
