#include "ksearch/io.hpp"

#include "util/fs.hpp"
#include "util/text.hpp"

KS_NAMESPACE_BEGIN

std::string read_file(const std::filesystem::path& path, std::size_t max_bytes, bool follow_link) {
  return util::read_file(path, max_bytes, follow_link);
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content, bool follow_link) {
  util::write_file_atomic(path, content, follow_link ? util::LinkAtPath::follow : util::LinkAtPath::refuse);
}

std::string terminal_text(std::string_view text) { return util::terminal_safe(text); }

KS_NAMESPACE_END
