// Cancelling a run from another thread: the token a host keeps, and the
// hook the parts of a run (LLM policies, evaluators) are told through.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include "ksearch/export.h"

KS_NAMESPACE_BEGIN

// A one-way switch shared by the host and the runs it started. cancel()
// may be called from any thread; it runs the subscribed handlers (each
// part of a run aborts what it has in flight: HTTP transfers, a command's
// process, worker processes) on the cancelling thread. A token stays
// cancelled.
class KS_API CancelToken {
 public:
  using Handler = std::function<void()>;

  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void cancel();
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }

  // Runs `handler` when the token is cancelled (at once, on this thread, when
  // it already is). Returns an id for unsubscribe().
  std::uint64_t subscribe(Handler handler);
  // After this returns the handler is not running and will not run.
  void unsubscribe(std::uint64_t id);

  // Subscribes for the lifetime of the object.
  class KS_API Subscription {
   public:
    Subscription() = default;
    Subscription(CancelToken* token, Handler handler);
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

   private:
    CancelToken* token_ = nullptr;
    std::uint64_t id_ = 0;
  };

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;          // guards handlers_ and next_id_
  std::mutex running_mu_;  // held while handlers run, so unsubscribe() can wait for them
  std::map<std::uint64_t, Handler> handlers_;
  std::uint64_t next_id_ = 1;
};

KS_NAMESPACE_END
