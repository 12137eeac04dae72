// FlashInfer-Bench's "FILE::FUNCTION" entry points, read alike for python and
// triton solutions (types.cpp) and for imported cpp and cuda Solutions
// (fib_solution.cpp); each says in its own words what is wrong.
#pragma once

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>

namespace ks::core {

struct EntryPoint {
  std::string file, function;
};

// The two parts of `entry` when it holds exactly one "::"; nothing otherwise.
inline std::optional<EntryPoint> split_entry_point(const std::string& entry) {
  const auto sep = entry.find("::");
  if (sep == std::string::npos || entry.find("::", sep + 2) != std::string::npos) return std::nullopt;
  return EntryPoint{entry.substr(0, sep), entry.substr(sep + 2)};
}

// Letters, digits and '_', not starting with a digit: a Python or C function name.
inline bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace ks::core
