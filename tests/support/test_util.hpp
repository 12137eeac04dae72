// Helpers shared by the tests.
#pragma once

#include <filesystem>
#include <string>

namespace ks::test {

namespace fs = std::filesystem;

// Source and build trees, for fixtures and built programs.
inline fs::path source_dir() { return KS_SOURCE_DIR; }
inline fs::path binary_dir() { return KS_BINARY_DIR; }

// A fresh empty folder under the build tree, named after the test; removed
// and recreated on each call so reruns start clean.
fs::path scratch_dir(const std::string& name);

}  // namespace ks::test
