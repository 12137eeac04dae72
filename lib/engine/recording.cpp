// Recordings a replay follows (engine/recording.hpp).
#include "engine/recording.hpp"

#include <fmt/format.h>

#include <variant>

#include "core/run_events.hpp"
#include "ksearch/error.hpp"
#include "ksearch/llm_policies.hpp"

namespace ks::engine {

namespace fs = std::filesystem;

namespace {

class RecordingOnlyPolicy final : public LlmPolicy {
 public:
  explicit RecordingOnlyPolicy(std::string source) : source_(std::move(source)) {}
  LlmResponse complete(const LlmRequest& req) override {
    throw Error(Status::llm, fmt::format("{} has no answer for this {} request (the run has left the recording); "
                                         "resume it with --llm to continue with a model",
                                         source_, to_string(req.kind)));
  }
  std::string describe() const override { return "replay:" + source_; }

 private:
  std::string source_;
};

// The "decision" events of a run folder, for explaining a divergence.
std::vector<Json> recorded_decisions(const std::vector<core::events::RunEvent>& events) {
  std::vector<Json> out;
  for (const auto& e : events)
    if (const auto* d = std::get_if<core::events::Decision>(&e.payload); d && e.journal_seq)
      out.push_back(d->fields);
  return out;
}

}  // namespace

std::shared_ptr<LlmPolicy> recording_only_policy(std::string source) {
  return std::make_shared<RecordingOnlyPolicy>(std::move(source));
}

// Another run folder as a recording: its answers and its evaluations.
core::Recording recording_from_run(const RunStore& src, core::Recording::Mode mode, bool check_prompts) {
  core::Recording r;
  r.source = fs::absolute(src.dir()).lexically_normal().string();
  r.answers = src.transcript();
  r.has_evaluations = true;
  r.attempts = src.attempts();
  const auto events = core::events::decode_all(src.events());
  r.strategy_events = 0;
  for (const auto& e : events)
    if (e.journal_seq) ++r.strategy_events;
  r.decisions = recorded_decisions(events);
  r.mode = mode;
  r.check_prompts = check_prompts;
  return r;
}

// A transcript as a recording: answers only, the candidates are measured
// again. When it is a run folder's transcript, that run's decisions come
// along, so a divergence can be explained on both runs' timings.
core::Recording recording_from_transcript(const fs::path& path, core::Recording::Mode mode, std::size_t joins_at) {
  if (mode == core::Recording::Mode::live)
    throw Error(Status::invalid_argument,
                "a replay transcript cannot go live (there is no model to continue with): use on_divergence stop or "
                "skip, or replay the run folder with `ksearch replay RUN --llm ...`");
  core::Recording r;
  r.source = path.string();
  for (const auto& e : read_transcript(path)) r.answers.push_back(e.to_json());
  r.mode = mode;
  r.joins_at = joins_at;
  std::error_code ec;
  fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (path.filename() == "transcript.jsonl" && fs::exists(dir / "manifest.json", ec)) {
    try {
      r.decisions = recorded_decisions(core::events::decode_all(RunStore::open_read_only(dir).events()));
    } catch (const std::exception&) {
      // Only an explanation aid; the answers are what the replay needs.
    }
  }
  return r;
}

}  // namespace ks::engine
