// Finding a JSON object inside an LLM answer that may wrap it in prose or
// code fences.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ksearch/json.hpp"

namespace ks::detail {

// Returns the first balanced {...} in `text` that parses as JSON (strings and
// escapes are respected while balancing; a candidate that fails to parse is
// skipped and the scan resumes at the next '{'). On failure returns nullopt
// and sets *error to a sentence naming the problem: no '{' at all, braces
// never balanced (a truncated answer), or the parser's message for the
// longest balanced candidate.
std::optional<Json> extract_json_object(std::string_view text, std::string* error = nullptr);

}  // namespace ks::detail
