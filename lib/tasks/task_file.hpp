// Reading task files (docs/task-format.md): a JSON TaskSpec whose sources,
// plans and prompt texts may live in files beside it.
#pragma once

#include <filesystem>

#include "ksearch/json.hpp"

namespace ks::tasks {

// Replaces every {"file": "relative/path"} reference in a task file's JSON
// with what the file holds (text for sources and prompts, parsed JSON for
// plans and parameters) and fills defaults (a reference's language from its
// key). Throws ks::Error(Status::invalid_argument) naming the field, e.g.
// "references.cpp.sources[0]: file \"ref.cpp\" not found (looked at /abs/ref.cpp)".
Json resolve_task_file_json(const Json& task_json, const std::filesystem::path& base_dir);

}  // namespace ks::tasks
