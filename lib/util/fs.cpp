#include "util/fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <utility>

#include "ksearch/error.hpp"
#include "util/unique_fd.hpp"

namespace ks::util {
namespace {

[[noreturn]] void io_error(const std::string& what, const fs::path& path) {
  throw Error(Status::io, fmt::format("{} {}: {}", what, path.string(), std::strerror(errno)));
}

[[noreturn]] void link_refused(const fs::path& path) {
  throw Error(Status::invalid_argument,
              fmt::format("refused: {} is a symbolic link, and links are not followed here (a run folder is read and "
                          "written only beneath itself: it may come from someone else); remove the link",
                          path.string()));
}

[[noreturn]] void not_found(const fs::path& path) {
  throw Error(Status::not_found, fmt::format("file not found: {}", path.string()));
}

using Fd = UniqueFd;

void write_all(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error("cannot write", path);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

bool is_link(int dirfd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

// openat without following a link at `name` (one there is refused, naming
// `shown`); -1 with errno for other failures.
int open_nofollow(int dirfd, const std::string& name, const fs::path& shown, int flags, mode_t mode = 0) {
  for (;;) {
    int fd = ::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) return fd;
    if (errno == EINTR) continue;
    int err = errno;
    if (err == ELOOP || ((err == ENOTDIR || err == ENXIO) && is_link(dirfd, name))) link_refused(shown);
    errno = err;
    return -1;
  }
}

// Files of the kernel look regular, but reading one can block forever
// (/proc/kmsg, trace_pipe) or never end. Known by the file system of the open
// descriptor, or by where it resolved to (/proc, /sys and what is mounted
// below them).
bool kernel_file(int fd) {
  char buf[PATH_MAX];
  const std::string self = fmt::format("/proc/self/fd/{}", fd);
  const ssize_t n = ::readlink(self.c_str(), buf, sizeof buf);
  const std::string_view where(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  if (where.starts_with("/proc/") || where.starts_with("/sys/")) return true;
  struct statfs sf {};
  if (::fstatfs(fd, &sf) != 0) return false;
  switch (static_cast<unsigned long>(sf.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case BPF_FS_MAGIC:
      return true;
    default:
      return false;
  }
}

// The content of an open descriptor (opened O_NONBLOCK, so a FIFO did not
// wait for a writer). Whether it is a regular file is checked on the
// descriptor, not the name, so nothing can be swapped in between.
std::string read_open(int fd, const fs::path& path, std::size_t max_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) io_error("cannot read", path);
  if (S_ISDIR(st.st_mode))
    throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", path.string()));
  if (!S_ISREG(st.st_mode))
    throw Error(Status::invalid_argument,
                fmt::format("{} is not a regular file (a device, FIFO or socket); give a file", path.string()));
  if (kernel_file(fd))
    throw Error(Status::invalid_argument,
                fmt::format("{} is not a regular file but the kernel's (/proc, /sys): reading one can block or never "
                            "end; give a file",
                            path.string()));
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw Error(Status::invalid_argument, fmt::format("{} is {} bytes, over the limit of {} bytes for this kind of file",
                                                      path.string(), st.st_size, max_bytes));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string out;
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  for (;;) {
    if (got == out.size()) {
      // The file grew since fstat: read on, still within the cap.
      if (out.size() >= max_bytes) {
        char probe;
        ssize_t n = ::read(fd, &probe, 1);
        if (n == 0) break;
        throw Error(Status::invalid_argument,
                    fmt::format("{} grew past the limit of {} bytes while being read", path.string(), max_bytes));
      }
      out.resize(std::min<std::size_t>(max_bytes, std::max<std::size_t>(out.size() * 2, 4096)));
    }
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error("cannot read", path);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

std::vector<std::string> split_lines(const std::string& data, bool* torn) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < data.size()) {
    std::size_t nl = data.find('\n', start);
    if (nl == std::string::npos) {
      if (torn) *torn = true;
      break;
    }
    if (nl > start) out.emplace_back(data.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// Cuts a final line without '\n' off the file open for reading and writing.
bool cut_torn_tail(int fd, const fs::path& path) {
  std::string data = read_open(fd, path, SIZE_MAX);
  if (data.empty() || data.back() == '\n') return false;
  std::size_t keep = data.rfind('\n');
  keep = keep == std::string::npos ? 0 : keep + 1;
  if (::ftruncate(fd, static_cast<off_t>(keep)) != 0) io_error("cannot repair", path);
  return true;
}

// An append log's descriptor: a regular file, created when absent. A FIFO
// would block the open (O_NONBLOCK) and the writes.
int open_log(int dirfd, const std::string& name, const fs::path& shown) {
  Fd fd(open_nofollow(dirfd, name, shown, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK, 0644));
  if (fd.get() < 0) io_error("cannot open", shown);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) io_error("cannot open", shown);
  if (!S_ISREG(st.st_mode))
    throw Error(Status::invalid_argument, fmt::format("{} is not a regular file", shown.string()));
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd.release();
}

// Writes `name` in the open folder `dirfd` via an exclusively created
// temporary file and a rename: the rename replaces a link at `name`, never
// writing through it.
void write_in(int dirfd, const std::string& name, const fs::path& shown, std::string_view content) {
  // Unique per process, thread and call: two threads may write the same path.
  static std::atomic<std::uint64_t> counter{0};
  const std::string tmp = name + fmt::format(".tmp.{}.{}.{}", ::getpid(), ::gettid(), counter.fetch_add(1));
  const fs::path tmp_shown = shown.parent_path() / tmp;
  int fd = open_nofollow(dirfd, tmp, tmp_shown, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) io_error("cannot create", tmp_shown);
  try {
    write_all(fd, content, tmp_shown);
    if (::fsync(fd) != 0) io_error("cannot sync", tmp_shown);
  } catch (...) {
    ::close(fd);
    ::unlinkat(dirfd, tmp.c_str(), 0);
    throw;
  }
  ::close(fd);
  if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    int saved = errno;
    ::unlinkat(dirfd, tmp.c_str(), 0);
    errno = saved;
    io_error("cannot rename into", shown);
  }
  ::fsync(dirfd);  // the rename itself durable
}

EntryKind kind_of(mode_t m) {
  return S_ISREG(m)   ? EntryKind::file
         : S_ISDIR(m) ? EntryKind::folder
         : S_ISLNK(m) ? EntryKind::link
                      : EntryKind::other;
}

EntryKind kind_at(int dirfd, const std::string& name, const fs::path& shown) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return kind_of(st.st_mode);
  if (errno == ENOENT || errno == ENOTDIR) return EntryKind::none;
  io_error("cannot inspect", shown);
}

// The names of a path relative to a Folder; absolute paths and ".." are
// refused, so nothing resolves outside it.
std::vector<std::string> names_of(const fs::path& rel, const fs::path& root) {
  if (rel.is_absolute() || rel.has_root_name())
    throw Error(Status::invalid_argument, fmt::format("{} is not a path beneath {}", rel.string(), root.string()));
  std::vector<std::string> out;
  for (const auto& c : rel) {
    std::string n = c.string();
    if (n.empty() || n == ".") continue;
    if (n == "..")
      throw Error(Status::invalid_argument,
                  fmt::format("{}: \"..\" would leave {}; refused", rel.string(), root.string()));
    out.push_back(std::move(n));
  }
  return out;
}

fs::path shown_path(const fs::path& root, const std::vector<std::string>& names, std::size_t n) {
  fs::path p = root;
  for (std::size_t i = 0; i < n; ++i) p /= names[i];
  return p;
}

// The folder reached from `root` by the first `n` names, each opened without
// following a link; an absent one is created when `create`, else the result
// holds -1.
Fd walk(int root, const fs::path& root_path, const std::vector<std::string>& names, std::size_t n, bool create) {
  Fd cur(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (cur.get() < 0) io_error("cannot open", root_path);
  for (std::size_t i = 0; i < n; ++i) {
    const fs::path shown = shown_path(root_path, names, i + 1);
    int next = open_nofollow(cur.get(), names[i], shown, O_RDONLY | O_DIRECTORY);
    if (next < 0 && errno == ENOENT && create) {
      if (::mkdirat(cur.get(), names[i].c_str(), 0755) != 0 && errno != EEXIST) io_error("cannot create folder", shown);
      next = open_nofollow(cur.get(), names[i], shown, O_RDONLY | O_DIRECTORY);
    }
    if (next < 0) {
      if (errno == ENOENT) return Fd();
      if (errno == ENOTDIR) throw Error(Status::invalid_argument, fmt::format("{} is not a folder", shown.string()));
      io_error("cannot open", shown);
    }
    cur = Fd(next);
  }
  return cur;
}

}  // namespace

std::string read_file(const fs::path& path, std::size_t max_bytes, bool follow_link) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int nofollow = follow_link ? 0 : O_NOFOLLOW;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | nofollow));
  if (fd.get() < 0) {
    if (errno == ELOOP && !follow_link) link_refused(path);
    if (errno == ENOENT || errno == ENOTDIR) not_found(path);
    io_error("cannot read", path);
  }
  return read_open(fd.get(), path, max_bytes);
}

void make_dirs(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec)
    throw Error(Status::io, fmt::format("cannot create folder {}: {}", path.string(), ec.message()));
}

bool is_atomic_write_temporary(std::string_view name) {
  // write_in's suffix: ".tmp." and three numbers separated by dots.
  const auto at = name.rfind(".tmp.");
  if (at == std::string_view::npos || at == 0) return false;
  std::string_view rest = name.substr(at + 5);
  for (int part = 0; part < 3; ++part) {
    const auto dot = rest.find('.');
    const std::string_view digits = rest.substr(0, dot);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
    if ((dot == std::string_view::npos) != (part == 2)) return false;
    if (dot != std::string_view::npos) rest.remove_prefix(dot + 1);
  }
  return true;
}

void write_file_atomic(const fs::path& path, std::string_view content, LinkAtPath link) {
  fs::path target = path;
  std::error_code ec;
  if (link != LinkAtPath::replace && fs::is_symlink(path, ec)) {
    if (link == LinkAtPath::refuse)
      throw Error(Status::invalid_argument,
                  fmt::format("refused: {} is a symbolic link; it is not written through unless asked to follow it",
                              path.string()));
    target = fs::weakly_canonical(path, ec);
    if (ec) throw Error(Status::io, fmt::format("cannot resolve the link {}: {}", path.string(), ec.message()));
  }
  const fs::path dir = target.parent_path();
  if (!dir.empty()) make_dirs(dir);
  Fd dfd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0) io_error("cannot open folder", dir.empty() ? fs::path(".") : dir);
  write_in(dfd.get(), target.filename().string(), target, content);
}

AppendLog::AppendLog(const fs::path& path) : path_(path) {
  if (!path.parent_path().empty()) make_dirs(path.parent_path());
  fd_ = open_log(AT_FDCWD, path.string(), path);
}

AppendLog::~AppendLog() {
  if (fd_ >= 0) ::close(fd_);
}

AppendLog::AppendLog(AppendLog&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }

AppendLog& AppendLog::operator=(AppendLog&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

void AppendLog::append(std::string_view line) {
  if (fd_ < 0) throw Error(Status::state, "append to a closed log");
  std::string buf;
  buf.reserve(line.size() + 1);
  buf.append(line);
  buf.push_back('\n');
  write_all(fd_, buf, path_);
  ::fdatasync(fd_);
}

std::vector<std::string> read_lines(const fs::path& path, bool* torn) {
  if (torn) *torn = false;
  std::error_code ec;
  if (!fs::exists(path, ec)) return {};
  return split_lines(read_file(path), torn);
}

bool truncate_torn_tail(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  Fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  if (fd.get() < 0) {
    if (errno == ELOOP) link_refused(path);
    io_error("cannot repair", path);
  }
  return cut_torn_tail(fd.get(), path);
}

// ---------------------------------------------------------------------------
// Folder

Folder::Folder(const fs::path& path) : path_(path) {
  fd_ = ::open(path.empty() ? "." : path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == ENOENT) throw Error(Status::not_found, fmt::format("folder not found: {}", path.string()));
    if (errno == ENOTDIR) throw Error(Status::invalid_argument, fmt::format("{} is not a folder", path.string()));
    io_error("cannot open folder", path);
  }
}

Folder::~Folder() {
  if (fd_ >= 0) ::close(fd_);
}

Folder::Folder(Folder&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

Folder& Folder::operator=(Folder&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

EntryKind Folder::kind(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  if (names.empty()) return EntryKind::folder;
  Fd dir = walk(fd_, path_, names, names.size() - 1, false);
  if (dir.get() < 0) return EntryKind::none;
  return kind_at(dir.get(), names.back(), path_ / rel);
}

void Folder::refuse_link(const fs::path& rel) const {
  if (kind(rel) == EntryKind::link) link_refused(path_ / rel);
}

std::vector<std::pair<std::string, EntryKind>> Folder::list(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  std::vector<std::pair<std::string, EntryKind>> out;
  Fd dir = walk(fd_, path_, names, names.size(), false);
  if (dir.get() < 0) return out;
  Fd it(::fcntl(dir.get(), F_DUPFD_CLOEXEC, 0));
  DIR* d = it.get() >= 0 ? ::fdopendir(it.get()) : nullptr;
  if (!d) io_error("cannot list", path_ / rel);
  it.release();  // closedir closes it
  while (const dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    out.emplace_back(n, kind_at(dir.get(), n, path_ / rel / n));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Folder::read(const fs::path& rel, std::size_t max_bytes) const {
  auto names = names_of(rel, path_);
  const fs::path shown = path_ / rel;
  if (names.empty()) throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", shown.string()));
  Fd dir = walk(fd_, path_, names, names.size() - 1, false);
  if (dir.get() < 0) not_found(shown);
  Fd fd(open_nofollow(dir.get(), names.back(), shown, O_RDONLY | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) not_found(shown);
    io_error("cannot read", shown);
  }
  return read_open(fd.get(), shown, max_bytes);
}

std::vector<std::string> Folder::read_lines(const fs::path& rel, bool* torn) const {
  if (torn) *torn = false;
  if (kind(rel) == EntryKind::none) return {};
  return split_lines(read(rel), torn);
}

void Folder::make_dirs(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  walk(fd_, path_, names, names.size(), true);
}

void Folder::write_atomic(const fs::path& rel, std::string_view content) const {
  auto names = names_of(rel, path_);
  const fs::path shown = path_ / rel;
  if (names.empty()) throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", shown.string()));
  Fd dir = walk(fd_, path_, names, names.size() - 1, true);
  switch (kind_at(dir.get(), names.back(), shown)) {
    case EntryKind::link: link_refused(shown);
    case EntryKind::folder:
      throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", shown.string()));
    default: break;
  }
  write_in(dir.get(), names.back(), shown, content);
}

AppendLog Folder::append_log(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  const fs::path shown = path_ / rel;
  if (names.empty()) throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", shown.string()));
  Fd dir = walk(fd_, path_, names, names.size() - 1, true);
  return AppendLog(open_log(dir.get(), names.back(), shown), shown);
}

bool Folder::truncate_torn_tail(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  const fs::path shown = path_ / rel;
  if (names.empty()) return false;
  Fd dir = walk(fd_, path_, names, names.size() - 1, false);
  if (dir.get() < 0) return false;
  Fd fd(open_nofollow(dir.get(), names.back(), shown, O_RDWR | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) return false;
    io_error("cannot repair", shown);
  }
  return cut_torn_tail(fd.get(), shown);
}

int Folder::open_lock_file(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  const fs::path shown = path_ / rel;
  if (names.empty()) throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", shown.string()));
  Fd dir = walk(fd_, path_, names, names.size() - 1, true);
  Fd fd(open_nofollow(dir.get(), names.back(), shown, O_RDWR | O_CREAT | O_NONBLOCK, 0644));
  if (fd.get() < 0) io_error("cannot open", shown);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(Status::invalid_argument, fmt::format("{} is not a regular file", shown.string()));
  return fd.release();
}

std::int64_t Folder::file_size(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  const fs::path shown = path_ / rel;
  if (names.empty()) throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", shown.string()));
  Fd dir = walk(fd_, path_, names, names.size() - 1, false);
  if (dir.get() < 0) return -1;
  struct stat st {};
  if (::fstatat(dir.get(), names.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return -1;
    io_error("cannot inspect", shown);
  }
  if (S_ISLNK(st.st_mode)) link_refused(shown);
  if (!S_ISREG(st.st_mode))
    throw Error(Status::invalid_argument, fmt::format("{} is not a regular file", shown.string()));
  return static_cast<std::int64_t>(st.st_size);
}

void Folder::truncate(const fs::path& rel, std::int64_t size) const {
  auto names = names_of(rel, path_);
  const fs::path shown = path_ / rel;
  if (names.empty()) throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", shown.string()));
  Fd dir = walk(fd_, path_, names, names.size() - 1, false);
  if (dir.get() < 0) not_found(shown);
  Fd fd(open_nofollow(dir.get(), names.back(), shown, O_RDWR | O_NONBLOCK));
  if (fd.get() < 0) io_error("cannot open", shown);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(Status::invalid_argument, fmt::format("{} is not a regular file", shown.string()));
  if (st.st_size > size && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) io_error("cannot cut", shown);
}

void Folder::remove_file(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  const fs::path shown = path_ / rel;
  if (names.empty()) throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", shown.string()));
  Fd dir = walk(fd_, path_, names, names.size() - 1, false);
  if (dir.get() < 0) return;
  if (::unlinkat(dir.get(), names.back().c_str(), 0) != 0 && errno != ENOENT) io_error("cannot remove", shown);
}

void Folder::remove_files_in(const fs::path& rel) const {
  auto names = names_of(rel, path_);
  Fd dir = walk(fd_, path_, names, names.size(), false);
  if (dir.get() < 0) return;
  for (const auto& [name, k] : list(rel)) {
    if (k == EntryKind::folder) continue;
    if (::unlinkat(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT) io_error("cannot remove", path_ / rel / name);
  }
}

void Folder::link_or_copy(const fs::path& from, const fs::path& to) const {
  auto fnames = names_of(from, path_);
  auto tnames = names_of(to, path_);
  if (fnames.empty() || tnames.empty())
    throw Error(Status::invalid_argument, fmt::format("link {} to {}: both must be files", from.string(), to.string()));
  Fd fdir = walk(fd_, path_, fnames, fnames.size() - 1, false);
  if (fdir.get() < 0) not_found(path_ / from);
  switch (kind_at(fdir.get(), fnames.back(), path_ / from)) {
    case EntryKind::file: break;
    case EntryKind::none: not_found(path_ / from);
    case EntryKind::link: link_refused(path_ / from);
    default: throw Error(Status::invalid_argument, fmt::format("{} is not a regular file", (path_ / from).string()));
  }
  Fd tdir = walk(fd_, path_, tnames, tnames.size() - 1, true);
  const fs::path tshown = path_ / to;
  if (kind_at(tdir.get(), tnames.back(), tshown) == EntryKind::folder)
    throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", tshown.string()));
  if (::unlinkat(tdir.get(), tnames.back().c_str(), 0) != 0 && errno != ENOENT) io_error("cannot replace", tshown);
  // Flags 0: a link at `from` would be linked itself, never what it leads to.
  if (::linkat(fdir.get(), fnames.back().c_str(), tdir.get(), tnames.back().c_str(), 0) == 0) return;
  write_in(tdir.get(), tnames.back(), tshown, read(from));
}

TempDir::TempDir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  fs::path root = base && *base ? fs::path(base) : fs::temp_directory_path();
  std::string templ = (root / (std::string(prefix) + "-XXXXXX")).string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) io_error("cannot create a temporary folder in", root);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path default_cache_dir() {
  if (const char* d = std::getenv("KSEARCH_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "ksearch";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "ksearch";
  return fs::temp_directory_path() / "ksearch-cache";
}

}  // namespace ks::util
