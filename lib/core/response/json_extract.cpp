#include "core/response/json_extract.hpp"

#include <fmt/format.h>

#include <unordered_map>
#include <vector>

namespace ks::core {

namespace {

// Calls `on(i, c)` for every character of `text` outside JSON strings
// (escapes respected): the one scanner the depth check and the brace
// matching share.
template <class F>
void for_each_structural(std::string_view text, F&& on) {
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else {
      on(i, c);
    }
  }
}

}  // namespace

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  for_each_structural(text, [&](std::size_t, char c) {
    if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
    else if ((c == '}' || c == ']') && depth > 0) --depth;
  });
  return deepest;
}

std::string json_depth_problem(std::string_view text) {
  const int depth = json_nesting_depth(text);
  if (depth <= kMaxAnswerJsonDepth) return {};
  return fmt::format("the answer's JSON nests {} levels deep, beyond the limit of {}; write flat objects as the "
                     "answer format shows",
                     depth, kMaxAnswerJsonDepth);
}

std::optional<Json> extract_json_object(std::string_view text, std::string* error) {
  // Checked first and in one pass: a hostile answer nested thousands of
  // levels deep is refused in milliseconds, before any parser sees it.
  if (std::string deep = json_depth_problem(text); !deep.empty()) {
    if (error) *error = deep;
    return std::nullopt;
  }
  // Where each '{' closes, found in one pass (strings and escapes respected).
  std::unordered_map<std::size_t, std::size_t> close_of;
  std::vector<std::size_t> open;
  for_each_structural(text, [&](std::size_t i, char c) {
    if (c == '{') {
      open.push_back(i);
    } else if (c == '}' && !open.empty()) {
      close_of[open.back()] = i + 1;
      open.pop_back();
    }
  });
  std::string last_error;
  std::size_t longest = 0;
  bool any_open = false, any_balanced = false;
  for (std::size_t pos = text.find('{'); pos != std::string_view::npos; pos = text.find('{', pos + 1)) {
    any_open = true;
    auto it = close_of.find(pos);
    if (it == close_of.end()) continue;
    const std::size_t end = it->second;
    any_balanced = true;
    std::string err;
    auto j = Json::try_parse(text.substr(pos, end - pos), &err);
    if (j && j->is_object()) return j;
    if (end - pos > longest) {
      longest = end - pos;
      last_error = err;
    }
  }
  if (error) {
    if (!any_open) *error = "the answer contains no JSON object (no '{' found)";
    else if (!any_balanced)
      *error = "the JSON object in the answer is never closed (unbalanced braces; was the answer cut off?)";
    else
      *error = fmt::format("the answer's JSON object does not parse: {}", last_error);
  }
  return std::nullopt;
}

}  // namespace ks::core
