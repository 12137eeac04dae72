// The closed sets the C ABI and the C++ API share: one list each. capi/enums.cpp
// pins their counts and values at compile time; this compares the names the
// library gives on both sides, through the shared library a host links.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>

#include "ksearch/ksearch.h"
#include "ksearch/types.hpp"

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
