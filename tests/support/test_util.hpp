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

// A /proc file of a process that may exit while it is read (read(2) then fails
// with ESRCH, which std::filebuf throws from): what could be read, "" if none.
std::string read_proc_file(const fs::path& p);

}  // namespace ks::test
