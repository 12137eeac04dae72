// Finding a JSON object inside an LLM answer that may wrap it in prose or
// code fences.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ksearch/json.hpp"

namespace ks::core {

// Returns the first balanced {...} in `text` that parses as JSON (strings and
// escapes are respected while balancing; a candidate that fails to parse is
// skipped and the scan resumes at the next '{'). On failure returns nullopt
// and sets *error to a sentence naming the problem: no '{' at all, braces
// never balanced (a truncated answer), nesting deeper than
// kMaxAnswerJsonDepth, or the parser's message for the longest balanced
// candidate. Linear in the text's length.
std::optional<Json> extract_json_object(std::string_view text, std::string* error = nullptr);

// How deep JSON written by a model may nest ({ and [ together). Plans, edits
// and parameter spaces need a handful of levels.
inline constexpr int kMaxAnswerJsonDepth = 64;

// The deepest nesting of { and [ outside strings, in one linear pass.
int json_nesting_depth(std::string_view text);
// "" when `text` nests at most kMaxAnswerJsonDepth levels, else a sentence
// for the model.
std::string json_depth_problem(std::string_view text);

}  // namespace ks::core
