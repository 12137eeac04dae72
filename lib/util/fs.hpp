// File helpers with the durability rules of the run store: snapshots are
// written atomically (temp file, fsync, rename); logs are appended a whole
// line at a time and flushed. Folder reads and writes beneath a folder whose
// content may come from someone else (a run folder) without following links.
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
// forever), for a file of a kernel file system (/proc, /sys: /proc/kmsg looks
// regular and blocks) and for a file over the cap. With follow_link false, a
// symbolic link as the last name is refused too.
std::string read_file(const fs::path& path, std::size_t max_bytes = SIZE_MAX, bool follow_link = true);

// Caps for files a user or a model hands in (see docs/security.md).
inline constexpr std::size_t kMaxSolutionFileBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxTaskFileBytes = std::size_t{64} << 20;     // task.json and the files it names
inline constexpr std::size_t kMaxTranscriptBytes = std::size_t{1} << 30;
// What write_file_atomic does with a symbolic link at the path: replace the
// link itself (its target is never written), refuse with an error naming it,
// or write the file the link leads to (the link stays).
enum class LinkAtPath { replace, refuse, follow };
// Writes via a temporary file in the same folder (created exclusively, never
// through a link) and renames it into place, so readers see the old or the
// new content, never a torn one.
void write_file_atomic(const fs::path& path, std::string_view content, LinkAtPath link = LinkAtPath::replace);
// Creates a folder and its parents; throws ks::Error(Status::io) on failure.
void make_dirs(const fs::path& path);
// Whether `name` is one of the temporary files the atomic writes above make
// ("<name>.tmp.<pid>.<tid>.<n>"), which a kill between the write and the
// rename leaves behind.
bool is_atomic_write_temporary(std::string_view name);

// An append-only text log: each append() writes one complete line with a
// single write(2) on an O_APPEND descriptor and then fdatasync()s it.
class AppendLog {
 public:
  AppendLog() = default;
  // Opens (creating) `path`; a symbolic link there is refused.
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
  friend class Folder;
  AppendLog(int fd, fs::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  fs::path path_;
};

// Reads the complete lines of a log. A final line without '\n' (a write torn
// by a kill) is dropped, and *torn is set.
std::vector<std::string> read_lines(const fs::path& path, bool* torn = nullptr);

// Cuts a final line without '\n' (a write torn by a kill) off a log, so the
// next append starts on a fresh line. Returns true when it cut something.
bool truncate_torn_tail(const fs::path& path);

// What a name in a folder is, the link itself when it is a symbolic link.
enum class EntryKind { none, file, folder, link, other };

// A folder opened once (the path to it may pass through links: its caller
// chose it), then read and written only beneath itself. Every path given to
// it is relative and walked one name at a time from the folder's descriptor
// with O_NOFOLLOW, so a symbolic link anywhere under it - a file, a folder on
// the way - is never followed but refused with an error (Status::invalid_argument)
// that names it, and an absolute path or ".." is refused. Nothing outside the
// folder is read, written or deleted through it. For folders whose content
// may come from someone else: run folders are shared and downloaded.
class Folder {
 public:
  Folder() = default;
  // Throws not_found when `path` is absent, invalid_argument when it is not a folder.
  explicit Folder(const fs::path& path);
  ~Folder();
  Folder(Folder&& o) noexcept;
  Folder& operator=(Folder&& o) noexcept;
  Folder(const Folder&) = delete;
  Folder& operator=(const Folder&) = delete;

  const fs::path& path() const { return path_; }
  bool is_open() const { return fd_ >= 0; }

  // none when the name, or a folder on the way to it, is absent.
  EntryKind kind(const fs::path& rel) const;
  // Throws the error for a link when `rel` is one.
  void refuse_link(const fs::path& rel) const;
  // The names in folder `rel` with their kinds, sorted; empty when it is absent.
  std::vector<std::pair<std::string, EntryKind>> list(const fs::path& rel) const;
  // read_file's rules, beneath the folder.
  std::string read(const fs::path& rel, std::size_t max_bytes = SIZE_MAX) const;
  // read_lines' rules; empty when the file is absent.
  std::vector<std::string> read_lines(const fs::path& rel, bool* torn = nullptr) const;

  // Creates the folder `rel` and those on the way to it.
  void make_dirs(const fs::path& rel) const;
  // write_file_atomic, the folders on the way created; a link at `rel` is refused.
  void write_atomic(const fs::path& rel, std::string_view content) const;
  AppendLog append_log(const fs::path& rel) const;
  bool truncate_torn_tail(const fs::path& rel) const;
  // Opened (created) for reading and writing, for a lock; the caller closes it.
  int open_lock_file(const fs::path& rel) const;
  // The size of the regular file `rel`; -1 when it is absent.
  std::int64_t file_size(const fs::path& rel) const;
  // Cuts the regular file `rel` to `size` bytes (nothing when it is shorter).
  void truncate(const fs::path& rel, std::int64_t size) const;
  // Deletes the file (or the link itself) `rel`; nothing when it is absent.
  void remove_file(const fs::path& rel) const;
  // Deletes the files and links directly in folder `rel` (a link, not what
  // it leads to); subfolders are left.
  void remove_files_in(const fs::path& rel) const;
  // `to` as a hard link to the regular file `from` (the same bytes stored
  // once), or a copy where the file system cannot link; `to` is replaced.
  void link_or_copy(const fs::path& from, const fs::path& to) const;

 private:
  int fd_ = -1;
  fs::path path_;
};

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
