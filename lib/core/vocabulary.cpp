// One name table per closed set of ksearch/vocabulary.hpp.
#include "ksearch/vocabulary.hpp"

#include <fmt/format.h>

#include <string>

#include "ksearch/error.hpp"

KS_NAMESPACE_BEGIN

namespace {

template <typename E>
struct Named {
  E value;
  const char* name;
};

// The order is the order names are listed in messages.
constexpr Named<StrategyKind> kStrategies[] = {{StrategyKind::world_model, "world_model"},
                                               {StrategyKind::greedy, "greedy"},
                                               {StrategyKind::evolve, "evolve"},
                                               {StrategyKind::tune, "tune"}};
constexpr Named<EvalBackend> kBackends[] = {{EvalBackend::automatic, "auto"}, {EvalBackend::cuda, "cuda"}, {EvalBackend::host, "host"}};
constexpr Named<SandboxMode> kSandboxModes[] = {
    {SandboxMode::automatic, "auto"}, {SandboxMode::required, "on"}, {SandboxMode::off, "off"}};
constexpr Named<TimingMode> kTimingModes[] = {{TimingMode::standard, "default"}, {TimingMode::upstream, "upstream"}};
constexpr Named<LlmSource> kLlmSources[] = {{LlmSource::openai, "openai"},
                                            {LlmSource::offline, "offline"},
                                            {LlmSource::replay, "replay"},
                                            {LlmSource::command, "command"},
                                            {LlmSource::custom, "custom"}};
constexpr Named<ReplayDivergence> kDivergences[] = {
    {ReplayDivergence::stop, "stop"}, {ReplayDivergence::skip, "skip"}, {ReplayDivergence::live, "live"}};
constexpr Named<ExportFormat> kExportFormats[] = {{ExportFormat::gpumode, "gpumode"},
                                                 {ExportFormat::kernelbench, "kernelbench"},
                                                 {ExportFormat::flashinfer, "flashinfer"},
                                                 {ExportFormat::bundle, "bundle"}};

template <typename E, std::size_t N>
const char* name_in(const Named<E> (&table)[N], E v) {
  for (const auto& n : table)
    if (n.value == v) return n.name;
  return "?";  // a value cast from outside the set
}

template <typename E, std::size_t N>
std::optional<E> find_in(const Named<E> (&table)[N], std::string_view s) {
  for (const auto& n : table)
    if (s == n.name) return n.value;
  return std::nullopt;
}

template <typename E, std::size_t N>
E parse_in(const Named<E> (&table)[N], std::string_view s, std::string_view what) {
  if (auto v = find_in(table, s)) return *v;
  std::string known;
  for (const auto& n : table) known += (known.empty() ? "" : ", ") + std::string(n.name);
  throw Error(Status::invalid_argument, fmt::format("unknown {} \"{}\" (known: {})", what, s, known));
}

}  // namespace

const char* to_string(StrategyKind v) { return name_in(kStrategies, v); }
const char* to_string(EvalBackend v) { return name_in(kBackends, v); }
const char* to_string(SandboxMode v) { return name_in(kSandboxModes, v); }
const char* to_string(TimingMode v) { return name_in(kTimingModes, v); }
const char* to_string(LlmSource v) { return name_in(kLlmSources, v); }
const char* to_string(ReplayDivergence v) { return name_in(kDivergences, v); }
const char* to_string(ExportFormat v) { return name_in(kExportFormats, v); }

std::optional<StrategyKind> strategy_kind_from_string(std::string_view s) { return find_in(kStrategies, s); }
std::optional<EvalBackend> backend_from_string(std::string_view s) { return find_in(kBackends, s); }
std::optional<SandboxMode> sandbox_mode_from_string(std::string_view s) { return find_in(kSandboxModes, s); }
std::optional<TimingMode> timing_mode_from_string(std::string_view s) { return find_in(kTimingModes, s); }
std::optional<LlmSource> llm_source_from_string(std::string_view s) { return find_in(kLlmSources, s); }
std::optional<ReplayDivergence> replay_divergence_from_string(std::string_view s) { return find_in(kDivergences, s); }
std::optional<ExportFormat> export_format_from_string(std::string_view s) { return find_in(kExportFormats, s); }

StrategyKind parse_strategy_kind(std::string_view s, std::string_view what) { return parse_in(kStrategies, s, what); }
EvalBackend parse_backend(std::string_view s, std::string_view what) { return parse_in(kBackends, s, what); }
SandboxMode parse_sandbox_mode(std::string_view s, std::string_view what) { return parse_in(kSandboxModes, s, what); }
TimingMode parse_timing_mode(std::string_view s, std::string_view what) { return parse_in(kTimingModes, s, what); }
LlmSource parse_llm_source(std::string_view s, std::string_view what) { return parse_in(kLlmSources, s, what); }
ReplayDivergence parse_replay_divergence(std::string_view s, std::string_view what) {
  return parse_in(kDivergences, s, what);
}
ExportFormat parse_export_format(std::string_view s, std::string_view what) {
  return parse_in(kExportFormats, s, what);
}

KS_NAMESPACE_END
