// File helpers with the durability rules of the run store: snapshots are
// written atomically (temp file, fsync, rename); logs are appended a whole
// line at a time and flushed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ks::util {

namespace fs = std::filesystem;

// Reads a whole regular file of at most `max_bytes`; throws ks::Error naming
// the path: not_found, io, or invalid_argument for a folder, a device, a FIFO
// or a socket (so /dev/zero or a pipe fails at once instead of reading
// forever) and for a file over the cap.
std::string read_file(const fs::path& path, std::size_t max_bytes = SIZE_MAX);

// Caps for files a user or a model hands in (see docs/security.md).
inline constexpr std::size_t kMaxSolutionFileBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxTaskFileBytes = std::size_t{64} << 20;     // task.json and the files it names
inline constexpr std::size_t kMaxTranscriptBytes = std::size_t{1} << 30;
// Writes via a temporary file in the same folder and renames it into place,
// so readers see the old or the new content, never a torn one.
void write_file_atomic(const fs::path& path, std::string_view content);
// Creates a folder and its parents; throws ks::Error(Status::io) on failure.
void make_dirs(const fs::path& path);

// An append-only text log: each append() writes one complete line with a
// single write(2) on an O_APPEND descriptor and then fdatasync()s it.
class AppendLog {
 public:
  AppendLog() = default;
  explicit AppendLog(const fs::path& path);
  ~AppendLog();
  AppendLog(AppendLog&& o) noexcept;
  AppendLog& operator=(AppendLog&& o) noexcept;
  AppendLog(const AppendLog&) = delete;
  AppendLog& operator=(const AppendLog&) = delete;

  void append(std::string_view line);  // a '\n' is added
  bool is_open() const { return fd_ >= 0; }
  const fs::path& path() const { return path_; }

 private:
  int fd_ = -1;
  fs::path path_;
};

// Reads the complete lines of a log. A final line without '\n' (a write torn
// by a kill) is dropped, and *torn is set.
std::vector<std::string> read_lines(const fs::path& path, bool* torn = nullptr);

// Cuts a final line without '\n' (a write torn by a kill) off a log, so the
// next append starts on a fresh line. Returns true when it cut something.
bool truncate_torn_tail(const fs::path& path);

// A fresh folder under the system temp dir (or $TMPDIR), removed on destruction.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "ksearch");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// $XDG_CACHE_HOME/ksearch or ~/.cache/ksearch (or $KSEARCH_CACHE_DIR).
fs::path default_cache_dir();

}  // namespace ks::util
