// What a resume may change in its run folder before it records anything new
// (manifest.json, state.json, events.jsonl), kept so that a resume that fails
// there - its journal no longer replays, its evaluator cannot start, a
// callback throws - leaves the folder as it found it, byte for byte. Once it
// has recorded a new attempt or LLM answer, a failure is the run's and is
// written to the manifest instead (execute() in search.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "util/fs.hpp"

namespace ks::engine {

class ResumeGuard {
 public:
  // Reads the folder as it is now; call it before the resume writes anything.
  explicit ResumeGuard(const std::filesystem::path& run_dir);

  // Whether the journal is as it was: no attempt and no LLM answer recorded.
  bool nothing_new() const;
  // manifest.json and state.json back as they were, events.jsonl cut back
  // to its length.
  void restore() const;

 private:
  util::Folder run_;
  std::string manifest_;
  std::optional<std::string> state_;
  std::int64_t events_ = -1, attempts_ = -1, transcript_ = -1;
};

}  // namespace ks::engine
