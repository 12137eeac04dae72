// The closed sets of the C ABI: one name table per enum, each checked at
// compile time against the enum's count (and, where the C++ API has the same
// set, against it), so a value added to one side cannot go unnamed.
#include <array>
#include <string_view>

#include "capi_internal.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/types.hpp"
#include "ksearch/vocabulary.hpp"

namespace ks::capi {
namespace {

constexpr std::array kStrategy{"auto", "world_model", "greedy", "tune", "evolve"};
constexpr std::array kLanguage{"cuda", "cpp", "triton", "python"};
constexpr std::array kBackend{"auto", "cuda", "host"};
constexpr std::array kSandbox{"auto", "on", "off"};
constexpr std::array kTimingMode{"default", "upstream"};
constexpr std::array kLlmSource{"openai", "offline", "replay", "command", "callback", "batch_callback"};
constexpr std::array kApiKind{"chat", "responses"};
constexpr std::array kCommandInput{"plain", "json"};
constexpr std::array kReplayDivergence{"stop", "skip"};
constexpr std::array kPromptKind{"wm_init", "wm_propose", "wm_refine", "wm_too_hard", "generate", "debug", "improve"};
constexpr std::array kEvalStatus{"passed",  "compile_error", "runtime_error",     "incorrect",   "timeout",
                                 "crashed", "invalid",       "generation_failed", "memory_limit"};
constexpr std::array kStopReason{"max_rounds",    "strategy_done", "cancelled",       "interrupted",    "max_cost",
                                 "max_wall_time", "llm_exhausted", "replay_diverged", "recording_ended"};

static_assert(kStrategy.size() == KS_STRATEGY_COUNT);
static_assert(kLanguage.size() == KS_LANGUAGE_COUNT);
static_assert(kBackend.size() == KS_BACKEND_COUNT);
static_assert(kSandbox.size() == KS_SANDBOX_MODE_COUNT);
static_assert(kTimingMode.size() == KS_TIMING_MODE_COUNT);
static_assert(kLlmSource.size() == KS_LLM_SOURCE_COUNT);
static_assert(kApiKind.size() == KS_API_KIND_COUNT);
static_assert(kCommandInput.size() == KS_COMMAND_INPUT_COUNT);
static_assert(kReplayDivergence.size() == KS_REPLAY_DIVERGENCE_COUNT);
static_assert(kPromptKind.size() == KS_PROMPT_KIND_COUNT);
static_assert(kEvalStatus.size() == KS_EVAL_STATUS_COUNT);
static_assert(kStopReason.size() == KS_STOP_REASON_COUNT);

// The C++ enums the C ones mirror: the same order, so a cast converts.
static_assert(static_cast<int>(PromptKind::improve) + 1 == KS_PROMPT_KIND_COUNT);
static_assert(static_cast<int>(PromptKind::wm_init) == KS_PROMPT_WM_INIT &&
              static_cast<int>(PromptKind::generate) == KS_PROMPT_GENERATE &&
              static_cast<int>(PromptKind::improve) == KS_PROMPT_IMPROVE);
static_assert(static_cast<int>(EvalStatus::memory_limit) + 1 == KS_EVAL_STATUS_COUNT);
static_assert(static_cast<int>(EvalStatus::passed) == KS_EVAL_PASSED &&
              static_cast<int>(EvalStatus::generation_failed) == KS_EVAL_GENERATION_FAILED &&
              static_cast<int>(EvalStatus::memory_limit) == KS_EVAL_MEMORY_LIMIT);
static_assert(static_cast<int>(Language::python) + 1 == KS_LANGUAGE_COUNT &&
              static_cast<int>(Language::cuda) == KS_LANGUAGE_CUDA &&
              static_cast<int>(Language::triton) == KS_LANGUAGE_TRITON);
static_assert(static_cast<int>(OpenAiApi::responses) + 1 == KS_API_KIND_COUNT);
static_assert(static_cast<int>(StopReason::recording_ended) + 1 == KS_STOP_REASON_COUNT &&
              static_cast<int>(StopReason::max_rounds) == KS_STOP_MAX_ROUNDS &&
              static_cast<int>(StopReason::interrupted) == KS_STOP_INTERRUPTED &&
              static_cast<int>(StopReason::recording_ended) == KS_STOP_RECORDING_ENDED);

// ksearch/vocabulary.hpp's sets, value for value where both sides have it.
static_assert(static_cast<int>(StrategyKind::world_model) == KS_STRATEGY_WORLD_MODEL &&
              static_cast<int>(StrategyKind::greedy) == KS_STRATEGY_GREEDY &&
              static_cast<int>(StrategyKind::tune) == KS_STRATEGY_TUNE &&
              static_cast<int>(StrategyKind::evolve) == KS_STRATEGY_EVOLVE && KS_STRATEGY_COUNT == 5);
static_assert(static_cast<int>(EvalBackend::automatic) == KS_BACKEND_AUTO &&
              static_cast<int>(EvalBackend::cuda) == KS_BACKEND_CUDA &&
              static_cast<int>(EvalBackend::host) == KS_BACKEND_HOST && KS_BACKEND_COUNT == 3);
static_assert(static_cast<int>(SandboxMode::automatic) == KS_SANDBOX_AUTO &&
              static_cast<int>(SandboxMode::required) == KS_SANDBOX_ON &&
              static_cast<int>(SandboxMode::off) == KS_SANDBOX_OFF && KS_SANDBOX_MODE_COUNT == 3);
static_assert(static_cast<int>(TimingMode::standard) == KS_TIMING_DEFAULT &&
              static_cast<int>(TimingMode::upstream) == KS_TIMING_UPSTREAM && KS_TIMING_MODE_COUNT == 2);
// KS_LLM_CALLBACK and KS_LLM_BATCH_CALLBACK are both LlmSource::custom.
static_assert(static_cast<int>(LlmSource::openai) == KS_LLM_OPENAI &&
              static_cast<int>(LlmSource::offline) == KS_LLM_OFFLINE &&
              static_cast<int>(LlmSource::replay) == KS_LLM_REPLAY &&
              static_cast<int>(LlmSource::command) == KS_LLM_COMMAND && KS_LLM_SOURCE_COUNT == 6);
// live has no C value: a transcript (KS_LLM_REPLAY) cannot go live, and
// ks_replay_options asks for it by giving options.llm.
static_assert(static_cast<int>(ReplayDivergence::stop) == KS_REPLAY_STOP &&
              static_cast<int>(ReplayDivergence::skip) == KS_REPLAY_SKIP && KS_REPLAY_DIVERGENCE_COUNT == 2);

template <std::size_t N>
const char* name_of(const std::array<const char*, N>& table, int v) {
  return v >= 0 && static_cast<std::size_t>(v) < N ? table[static_cast<std::size_t>(v)] : "";
}

template <std::size_t N>
std::string known(const std::array<const char*, N>& table) {
  std::string out;
  for (const char* n : table) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

template <typename E, std::size_t N>
ks_status parse(const char* where, const std::array<const char*, N>& table, const char* name, E* out) {
  if (!out) return fail(KS_E_INVALID_ARGUMENT, fmt::format("{}: out is NULL", where));
  if (!name) return fail(KS_E_INVALID_ARGUMENT, fmt::format("{}: name is NULL", where));
  for (std::size_t i = 0; i < N; ++i)
    if (std::string_view(table[i]) == name) {
      *out = static_cast<E>(i);
      return KS_OK;
    }
  return fail(KS_E_INVALID_ARGUMENT, fmt::format("{}: unknown name \"{}\" (known: {})", where, name, known(table)));
}

template <std::size_t N>
const char* checked(const std::array<const char*, N>& table, int v, const char* field) {
  const char* n = name_of(table, v);
  if (!*n)
    throw Error(Status::invalid_argument,
                fmt::format("{} is {}, which is not one of its values (0..{}: {})", field, v, N - 1, known(table)));
  return n;
}

}  // namespace

StrategyKind strategy_of(ks_strategy v, const char* field) {
  checked(kStrategy, v, field);
  if (v == KS_STRATEGY_AUTO)
    throw Error(Status::invalid_argument, fmt::format("{} is KS_STRATEGY_AUTO, which names no strategy here", field));
  return static_cast<StrategyKind>(v);
}
Language language_of(ks_language v, const char* field) {
  return *language_from_string(checked(kLanguage, v, field));
}
EvalBackend backend_of(ks_backend v, const char* field) {
  checked(kBackend, v, field);
  return static_cast<EvalBackend>(v);
}
SandboxMode sandbox_of(ks_sandbox_mode v, const char* field) {
  checked(kSandbox, v, field);
  return static_cast<SandboxMode>(v);
}
TimingMode timing_of(ks_timing_mode v, const char* field) {
  checked(kTimingMode, v, field);
  return static_cast<TimingMode>(v);
}
ReplayDivergence divergence_of(ks_replay_divergence v, const char* field) {
  checked(kReplayDivergence, v, field);
  return static_cast<ReplayDivergence>(v);
}
ks_prompt_kind prompt_kind_to_c(PromptKind k) { return static_cast<ks_prompt_kind>(static_cast<int>(k)); }
ks_eval_status eval_status_to_c(EvalStatus s) { return static_cast<ks_eval_status>(static_cast<int>(s)); }
ks_stop_reason stop_reason_to_c(StopReason r) { return static_cast<ks_stop_reason>(static_cast<int>(r)); }
EvalStatus eval_status_of(ks_eval_status s, const char* field) {
  return *eval_status_from_string(checked(kEvalStatus, s, field));
}

}  // namespace ks::capi

using namespace ks::capi;

extern "C" {

const char* ks_strategy_name(ks_strategy v) { return name_of(kStrategy, v); }
const char* ks_language_name(ks_language v) { return name_of(kLanguage, v); }
const char* ks_backend_name(ks_backend v) { return name_of(kBackend, v); }
const char* ks_sandbox_mode_name(ks_sandbox_mode v) { return name_of(kSandbox, v); }
const char* ks_timing_mode_name(ks_timing_mode v) { return name_of(kTimingMode, v); }
const char* ks_llm_source_name(ks_llm_source v) { return name_of(kLlmSource, v); }
const char* ks_api_kind_name(ks_api_kind v) { return name_of(kApiKind, v); }
const char* ks_command_input_name(ks_command_input v) { return name_of(kCommandInput, v); }
const char* ks_replay_divergence_name(ks_replay_divergence v) { return name_of(kReplayDivergence, v); }
const char* ks_prompt_kind_name(ks_prompt_kind v) { return name_of(kPromptKind, v); }
const char* ks_eval_status_name(ks_eval_status v) { return name_of(kEvalStatus, v); }
const char* ks_stop_reason_name(ks_stop_reason v) { return name_of(kStopReason, v); }

ks_status ks_strategy_parse(const char* n, ks_strategy* out) { return parse("ks_strategy_parse", kStrategy, n, out); }
ks_status ks_language_parse(const char* n, ks_language* out) { return parse("ks_language_parse", kLanguage, n, out); }
ks_status ks_backend_parse(const char* n, ks_backend* out) { return parse("ks_backend_parse", kBackend, n, out); }
ks_status ks_sandbox_mode_parse(const char* n, ks_sandbox_mode* out) {
  return parse("ks_sandbox_mode_parse", kSandbox, n, out);
}
ks_status ks_timing_mode_parse(const char* n, ks_timing_mode* out) {
  return parse("ks_timing_mode_parse", kTimingMode, n, out);
}
ks_status ks_llm_source_parse(const char* n, ks_llm_source* out) {
  return parse("ks_llm_source_parse", kLlmSource, n, out);
}
ks_status ks_api_kind_parse(const char* n, ks_api_kind* out) { return parse("ks_api_kind_parse", kApiKind, n, out); }
ks_status ks_command_input_parse(const char* n, ks_command_input* out) {
  return parse("ks_command_input_parse", kCommandInput, n, out);
}
ks_status ks_replay_divergence_parse(const char* n, ks_replay_divergence* out) {
  return parse("ks_replay_divergence_parse", kReplayDivergence, n, out);
}
ks_status ks_prompt_kind_parse(const char* n, ks_prompt_kind* out) {
  return parse("ks_prompt_kind_parse", kPromptKind, n, out);
}
ks_status ks_eval_status_parse(const char* n, ks_eval_status* out) {
  return parse("ks_eval_status_parse", kEvalStatus, n, out);
}
ks_status ks_stop_reason_parse(const char* n, ks_stop_reason* out) {
  return parse("ks_stop_reason_parse", kStopReason, n, out);
}

}  // extern "C"
