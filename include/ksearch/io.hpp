// Files and text that may come from someone else, handled as the library
// handles them (docs/security.md): a file a user names is read only when it
// is a regular file (not a device, a FIFO or the kernel's /proc and /sys);
// an output file is written atomically and never through a link unless
// asked; text a model or a candidate wrote is printed without the sequences
// a terminal would act on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "ksearch/export.h"

KS_NAMESPACE_BEGIN

// The whole file, at most `max_bytes`. Throws ks::Error naming the path:
// not_found; invalid_argument for a folder, a device, a FIFO, a socket, a
// file of a kernel file system (/proc, /sys) or one over the cap, and for a
// symbolic link when `follow_link` is false.
KS_API std::string read_file(const std::filesystem::path& path, std::size_t max_bytes = SIZE_MAX,
                             bool follow_link = true);

// Writes `content` to `path` via a temporary file in the same folder and a
// rename: a reader sees the old file or the new one, and no temporary file
// is left. A symbolic link at `path` is refused (ks::Error invalid_argument,
// the link and its target unchanged) unless `follow_link`, which writes the
// file it leads to.
KS_API void write_file_atomic(const std::filesystem::path& path, std::string_view content, bool follow_link = false);

// `text` without escape sequences and control characters other than
// newline and tab (CR and backspace included: nothing can overwrite what is
// on screen); invalid UTF-8 shown as U+FFFD.
KS_API std::string terminal_text(std::string_view text);

KS_NAMESPACE_END
