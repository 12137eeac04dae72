#include "engine/resume_guard.hpp"

namespace ks::engine {

ResumeGuard::ResumeGuard(const std::filesystem::path& run_dir)
    : run_(run_dir),
      manifest_(run_.read("manifest.json")),
      events_(run_.file_size("events.jsonl")),
      attempts_(run_.file_size("attempts.jsonl")),
      transcript_(run_.file_size("transcript.jsonl")) {
  if (run_.kind("state.json") != util::EntryKind::none) state_ = run_.read("state.json");
}

bool ResumeGuard::nothing_new() const {
  return run_.file_size("attempts.jsonl") == attempts_ && run_.file_size("transcript.jsonl") == transcript_;
}

void ResumeGuard::restore() const {
  run_.write_atomic("manifest.json", manifest_);
  if (state_) run_.write_atomic("state.json", *state_);
  else run_.remove_file("state.json");
  if (events_ >= 0) run_.truncate("events.jsonl", events_);
}

}  // namespace ks::engine
