// What a replay follows: another run folder (its answers and evaluations) or
// a transcript (answers only), as the session's Recording, and the policy
// that stands for the model while the run follows it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "search/session.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/run_store.hpp"

namespace ks::engine {

// Stands for the model while a replay follows its recording: the session
// answers from the recording, so this is asked only once the run has left it
// (and says so). `source` names the recording in messages.
std::shared_ptr<LlmPolicy> recording_only_policy(std::string source);

// Another run folder as a recording: its answers and its evaluations.
core::Recording recording_from_run(const RunStore& src, core::Recording::Mode mode, bool check_prompts);

// A transcript as a recording: answers only, the candidates are measured
// again; it answers from LLM call `joins_at` on. Mode live is refused (there
// is no model to go on with).
core::Recording recording_from_transcript(const std::filesystem::path& path, core::Recording::Mode mode,
                                          std::size_t joins_at);

}  // namespace ks::engine
