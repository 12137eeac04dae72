// A unified diff of two texts, line by line, for `ksearch show --attempt`.
#pragma once

#include <string>

namespace ks::cli {

// "--- from_name / +++ to_name" and hunks with `context` lines around each
// change; "" when the texts are equal. Texts too long to compare line by line
// (over 20 million line pairs) get a one-line note instead.
std::string unified_diff(const std::string& from, const std::string& to, const std::string& from_name,
                         const std::string& to_name, int context = 3);

}  // namespace ks::cli
