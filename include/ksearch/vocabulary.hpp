// The closed sets of a search's configuration, typed: the built-in
// strategies, evaluation backends, sandbox modes, timing rules, LLM sources
// and where a replay goes when it leaves its recording. Each has one name
// table (lib/core/vocabulary.cpp): to_string gives the name the CLI, the run
// folder's JSON and the C ABI use; <set>_from_string reads it back (nullopt
// for any other); parse_<set> throws ks::Error(Status::invalid_argument)
// naming the bad value and listing the good ones. Strings are read only at
// the edges (CLI, JSON files, the C ABI's string setters); inside, these
// values are compared. Where the C ABI has the set (ks_enums.h), the values
// are its values, so a cast converts (capi/enums.cpp checks each).
#pragma once

#include <optional>
#include <string_view>

#include "ksearch/export.h"

KS_NAMESPACE_BEGIN

// The built-in search strategies (--strategy; ks_strategy without its
// "auto", which the C ABI resolves before a run).
enum class StrategyKind { world_model = 1, greedy = 2, tune = 3, evolve = 4 };

// Where candidates are evaluated (--backend; ks_backend). automatic ("auto"):
// CUDA candidates on the GPU, host candidates on the CPU.
enum class EvalBackend { automatic = 0, cuda = 1, host = 2 };

// Confinement of candidates and their compilers (--sandbox; ks_sandbox_mode;
// docs/security.md): automatic ("auto": bubblewrap where it works, one
// warning where it does not), required ("on": refuse to evaluate without
// it), off ("off").
enum class SandboxMode { automatic = 0, required = 1, off = 2 };

// How timed workloads are measured (--timing): standard ("default":
// libksearch's rules, architecture decision 4) or upstream ("upstream":
// GPUMode's eval.py rules, for side-by-side figures; docs/evaluation.md).
enum class TimingMode { standard = 0, upstream = 1 };

// Who answers the prompts (--llm; LlmChoice::kind). ks_llm_source's
// callback and batch_callback are both `custom` here: a policy object the
// host supplies.
enum class LlmSource { openai = 0, offline = 1, replay = 2, command = 3, custom = 4 };

// Where a replay goes when the search asks for what its recording does not
// hold (--on-divergence; ks_replay_divergence, which has stop and skip):
// stop there and say why; skip (take recorded answers by kind and recorded
// evaluations by solution id, measure the rest); or live (continue with a
// model; a run folder's replay only). docs/search.md, "Replay".
enum class ReplayDivergence { stop = 0, skip = 1, live = 2 };

// What `ksearch export` writes (--format; ExportOptions::format;
// docs/export.md): a GPUMode submission, a KernelBench ModelNew, a
// FlashInfer-Bench Solution, or the bundle manifest itself.
enum class ExportFormat { gpumode = 0, kernelbench = 1, flashinfer = 2, bundle = 3 };

KS_API const char* to_string(StrategyKind v);
KS_API const char* to_string(EvalBackend v);
KS_API const char* to_string(SandboxMode v);
KS_API const char* to_string(TimingMode v);
KS_API const char* to_string(LlmSource v);
KS_API const char* to_string(ReplayDivergence v);
KS_API const char* to_string(ExportFormat v);

KS_API std::optional<StrategyKind> strategy_kind_from_string(std::string_view s);
KS_API std::optional<EvalBackend> backend_from_string(std::string_view s);
KS_API std::optional<SandboxMode> sandbox_mode_from_string(std::string_view s);
KS_API std::optional<TimingMode> timing_mode_from_string(std::string_view s);
KS_API std::optional<LlmSource> llm_source_from_string(std::string_view s);
KS_API std::optional<ReplayDivergence> replay_divergence_from_string(std::string_view s);
KS_API std::optional<ExportFormat> export_format_from_string(std::string_view s);

// `what` names the setting in the message: unknown strategy "x" (known:
// world_model, greedy, evolve, tune).
KS_API StrategyKind parse_strategy_kind(std::string_view s, std::string_view what = "strategy");
KS_API EvalBackend parse_backend(std::string_view s, std::string_view what = "backend");
KS_API SandboxMode parse_sandbox_mode(std::string_view s, std::string_view what = "sandbox");
KS_API TimingMode parse_timing_mode(std::string_view s, std::string_view what = "timing");
KS_API LlmSource parse_llm_source(std::string_view s, std::string_view what = "LLM kind");
KS_API ReplayDivergence parse_replay_divergence(std::string_view s, std::string_view what = "on_divergence");
KS_API ExportFormat parse_export_format(std::string_view s, std::string_view what = "export format");

KS_NAMESPACE_END
