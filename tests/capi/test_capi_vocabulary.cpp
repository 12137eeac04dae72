// The closed sets the C ABI and the C++ API share: one list each. capi/enums.cpp
// pins their counts and values at compile time; this compares the names the
// library gives on both sides, through the shared library a host links.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>

#include "ksearch/ksearch.h"
#include "ksearch/llm.hpp"
#include "ksearch/types.hpp"
#include "ksearch/vocabulary.hpp"

TEST_CASE("vocabulary: every stop reason has one name, the same in C and C++") {
  for (int i = 0; i < KS_STOP_REASON_COUNT; ++i) {
    const auto r = static_cast<ks::StopReason>(i);
    const std::string name = ks::to_string(r);
    CHECK(!name.empty());
    CHECK(name == ks_stop_reason_name(static_cast<ks_stop_reason>(i)));
    CHECK(ks::stop_reason_from_string(name) == r);
    ks_stop_reason parsed = KS_STOP_MAX_ROUNDS;
    CHECK(ks_stop_reason_parse(name.c_str(), &parsed) == KS_OK);
    CHECK(static_cast<int>(parsed) == i);
  }
  CHECK(std::string(ks_stop_reason_name(static_cast<ks_stop_reason>(KS_STOP_REASON_COUNT))).empty());
  CHECK(!ks::stop_reason_from_string("done"));
  ks_stop_reason parsed = KS_STOP_MAX_ROUNDS;
  CHECK(ks_stop_reason_parse("done", &parsed) == KS_E_INVALID_ARGUMENT);
  CHECK(std::string(ks_last_error_message()).find("recording_ended") != std::string::npos);
}

TEST_CASE("vocabulary: a result without a search says nothing") {
  CHECK(std::string(ks_result_stop_reason(nullptr)).empty());
  CHECK(ks_result_stop_reason_code(nullptr) == KS_STOP_MAX_ROUNDS);
}

namespace {

// Every value of a C enum from 0 to its count: the C++ value of the same
// number (where `mirrored` says C++ has one) has the same name, and each
// side parses that name back to the value. Returns the names C++ lacks.
template <typename CEnum, typename E, typename Name, typename Parse, typename FromString>
std::string compare_names(int count, Name c_name, Parse c_parse, FromString cpp_from_string, bool (*mirrored)(int)) {
  std::string c_only;
  for (int i = 0; i < count; ++i) {
    const std::string name = c_name(static_cast<CEnum>(i));
    INFO("C value " << i << " \"" << name << "\"");
    CHECK(!name.empty());
    CEnum parsed{};
    CHECK(c_parse(name.c_str(), &parsed) == KS_OK);
    CHECK(static_cast<int>(parsed) == i);
    if (!mirrored(i)) {
      CHECK(!cpp_from_string(name));
      c_only += (c_only.empty() ? "" : " ") + name;
      continue;
    }
    CHECK(std::string(ks::to_string(static_cast<E>(i))) == name);
    CHECK(cpp_from_string(name) == static_cast<E>(i));
  }
  CHECK(std::string(c_name(static_cast<CEnum>(count))).empty());
  return c_only;
}

bool all(int) { return true; }

}  // namespace

TEST_CASE("vocabulary: every C enum's names are the C++ enum's names") {
  CHECK(compare_names<ks_strategy, ks::StrategyKind>(KS_STRATEGY_COUNT, ks_strategy_name, ks_strategy_parse,
                                                     ks::strategy_kind_from_string,
                                                     [](int i) { return i != KS_STRATEGY_AUTO; }) == "auto");
  CHECK(compare_names<ks_backend, ks::EvalBackend>(KS_BACKEND_COUNT, ks_backend_name, ks_backend_parse,
                                                   ks::backend_from_string, all) == "");
  CHECK(compare_names<ks_sandbox_mode, ks::SandboxMode>(KS_SANDBOX_MODE_COUNT, ks_sandbox_mode_name,
                                                        ks_sandbox_mode_parse, ks::sandbox_mode_from_string,
                                                        all) == "");
  CHECK(compare_names<ks_timing_mode, ks::TimingMode>(KS_TIMING_MODE_COUNT, ks_timing_mode_name, ks_timing_mode_parse,
                                                      ks::timing_mode_from_string, all) == "");
  // The C ABI's two callback sources are one custom policy in C++.
  CHECK(compare_names<ks_llm_source, ks::LlmSource>(KS_LLM_SOURCE_COUNT, ks_llm_source_name, ks_llm_source_parse,
                                                    ks::llm_source_from_string,
                                                    [](int i) { return i < KS_LLM_CALLBACK; }) ==
        "callback batch_callback");
  CHECK(compare_names<ks_replay_divergence, ks::ReplayDivergence>(
            KS_REPLAY_DIVERGENCE_COUNT, ks_replay_divergence_name, ks_replay_divergence_parse,
            ks::replay_divergence_from_string, all) == "");
  CHECK(compare_names<ks_language, ks::Language>(KS_LANGUAGE_COUNT, ks_language_name, ks_language_parse,
                                                 ks::language_from_string, all) == "");
  CHECK(compare_names<ks_prompt_kind, ks::PromptKind>(KS_PROMPT_KIND_COUNT, ks_prompt_kind_name,
                                                      ks_prompt_kind_parse, ks::prompt_kind_from_string, all) == "");
  CHECK(compare_names<ks_eval_status, ks::EvalStatus>(KS_EVAL_STATUS_COUNT, ks_eval_status_name,
                                                      ks_eval_status_parse, ks::eval_status_from_string, all) == "");
  CHECK(compare_names<ks_stop_reason, ks::StopReason>(KS_STOP_REASON_COUNT, ks_stop_reason_name,
                                                      ks_stop_reason_parse, ks::stop_reason_from_string, all) == "");
}

TEST_CASE("vocabulary: C++ values the C ABI does not have are the ones documented") {
  // A replay of a run folder may go live; a transcript (all C can replay
  // through KS_LLM_REPLAY) cannot, so C has no name for it.
  CHECK(std::string(ks::to_string(ks::ReplayDivergence::live)) == "live");
  ks_replay_divergence d{};
  CHECK(ks_replay_divergence_parse("live", &d) == KS_E_INVALID_ARGUMENT);
  // The custom LLM source is a callback in C.
  ks_llm_source s{};
  CHECK(ks_llm_source_parse("custom", &s) == KS_E_INVALID_ARGUMENT);
}

TEST_CASE("vocabulary: a bad name is refused with the good ones listed") {
  CHECK_THROWS_WITH(ks::parse_strategy_kind("beam"), "unknown strategy \"beam\" (known: world_model, greedy, evolve, tune)");
  CHECK_THROWS_WITH(ks::parse_backend("gpu", "--backend"), "unknown --backend \"gpu\" (known: auto, cuda, host)");
  CHECK_THROWS_WITH(ks::parse_sandbox_mode("yes"), "unknown sandbox \"yes\" (known: auto, on, off)");
  CHECK_THROWS_WITH(ks::parse_timing_mode("fast"), "unknown timing \"fast\" (known: default, upstream)");
  CHECK_THROWS_WITH(ks::parse_llm_source("claude"),
                    "unknown LLM kind \"claude\" (known: openai, offline, replay, command, custom)");
  CHECK_THROWS_WITH(ks::parse_replay_divergence("retry"),
                    "unknown on_divergence \"retry\" (known: stop, skip, live)");
}
