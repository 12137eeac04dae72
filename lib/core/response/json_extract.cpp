#include "core/response/json_extract.hpp"

#include <fmt/format.h>

namespace ks::detail {

namespace {

// End (exclusive) of the balanced object starting at `start`, or npos.
std::size_t balanced_end(std::string_view text, std::size_t start) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = start; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{') ++depth;
    else if (c == '}' && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<Json> extract_json_object(std::string_view text, std::string* error) {
  std::string last_error;
  std::size_t longest = 0;
  bool any_open = false, any_balanced = false;
  for (std::size_t pos = text.find('{'); pos != std::string_view::npos; pos = text.find('{', pos + 1)) {
    any_open = true;
    std::size_t end = balanced_end(text, pos);
    if (end == std::string_view::npos) continue;
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

}  // namespace ks::detail
