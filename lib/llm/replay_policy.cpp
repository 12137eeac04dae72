// The replay policy: a recorded transcript answers again, in order.
#include <fmt/format.h>

#include <mutex>

#include "ksearch/error.hpp"
#include "ksearch/llm_policies.hpp"
#include "ksearch/sys/llm_policy.hpp"

KS_NAMESPACE_BEGIN
namespace {

class ReplayPolicy final : public LlmPolicy {
 public:
  ReplayPolicy(std::filesystem::path path, std::size_t start)
      : path_(std::move(path)), entries_(read_transcript(path_)), next_(start) {
    if (start > entries_.size())
      throw Error(Status::invalid_argument,
                  fmt::format("transcript {} has {} answers; cannot start replaying at answer {}", path_.string(),
                              entries_.size(), start + 1));
  }

  LlmResponse complete(const LlmRequest& request) override {
    std::lock_guard lock(mu_);
    if (next_ >= entries_.size())
      throw Error(Status::llm, fmt::format("transcript {} has {} answers; answer {} (kind {}) was asked for",
                                           path_.string(), entries_.size(), next_ + 1, to_string(request.kind)));
    const TranscriptEntry& e = entries_[next_];
    if (e.request.kind != request.kind)
      throw Error(Status::llm,
                  fmt::format("transcript {}: answer {} was recorded for kind {}, but kind {} was asked for; "
                              "the run no longer follows the recording",
                              path_.string(), next_ + 1, to_string(e.request.kind), to_string(request.kind)));
    ++next_;
    total_ += e.response.usage;
    return e.response;
  }

  std::string describe() const override { return "replay:" + path_.string(); }

  LlmUsage total_usage() const override {
    std::lock_guard lock(mu_);
    return total_;
  }

 private:
  std::filesystem::path path_;
  std::vector<TranscriptEntry> entries_;
  mutable std::mutex mu_;  // answers are handed out in order, whatever thread asks
  std::size_t next_;
  LlmUsage total_;
};

}  // namespace

std::unique_ptr<LlmPolicy> make_replay_policy(const std::filesystem::path& transcript, std::size_t start) {
  return std::make_unique<ReplayPolicy>(transcript, start);
}

KS_NAMESPACE_END
