#include "core/solution_files.hpp"

#include <fmt/format.h>

#include "ksearch/error.hpp"
#include "util/fs.hpp"

namespace ks::core {

bool has_source_file_refs(const Json& solution) {
  const Json* sources = solution.is_object() ? solution.find("sources") : nullptr;
  if (!sources || !sources->is_array()) return false;
  for (const auto& s : sources->as_array())
    if (s.is_object() && s.contains("file") && !s.contains("content")) return true;
  return false;
}

Json inline_source_files(const Json& solution, const util::Folder& folder, const std::filesystem::path& dir,
                         std::size_t max_bytes) {
  Json out = solution;
  for (auto& s : out["sources"].as_array()) {
    if (!s.is_object() || !s.contains("file") || s.contains("content")) continue;
    const Json& f = s["file"];
    if (!f.is_string())
      throw Error(Status::invalid_argument, "solution source: \"file\" must be a string (a file name beside the JSON)");
    const std::string name = f.as_string();
    const std::filesystem::path p(name);
    if (name.empty() || p.has_parent_path() || name == "." || name == ".." || p.is_absolute())
      throw Error(Status::invalid_argument,
                  fmt::format("solution source: \"file\" must name a file beside the solution JSON, not \"{}\"", name));
    s["content"] = folder.read(dir / p, max_bytes);
    s.erase("file");
  }
  return out;
}

}  // namespace ks::core
