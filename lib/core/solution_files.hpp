// Solution JSON whose sources live in files beside it: a run folder stores
// each source once, as a readable file, and its solution.json refers to it
// ({"path": "kernel.cu", "file": "kernel.cu"}) instead of repeating it.
#pragma once

#include <cstddef>
#include <filesystem>

#include "ksearch/json.hpp"
#include "util/fs.hpp"

namespace ks::core {

// True when some entry of j["sources"] has "file" instead of "content".
bool has_source_file_refs(const Json& solution);

// The same solution with every {"file": NAME} read from folder `dir` of
// `folder` into "content". NAME must be a plain file name (no folders, no
// ".."), a regular file and not a link (a run folder may come from someone
// else); each file holds at most `max_bytes`. Throws ks::Error naming the
// entry or the file.
Json inline_source_files(const Json& solution, const util::Folder& folder, const std::filesystem::path& dir,
                         std::size_t max_bytes);

}  // namespace ks::core
