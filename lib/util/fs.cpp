#include "util/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "ksearch/error.hpp"

namespace ks::util {
namespace {

[[noreturn]] void io_error(const std::string& what, const fs::path& path) {
  throw Error(Status::io, fmt::format("{} {}: {}", what, path.string(), std::strerror(errno)));
}

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

}  // namespace

std::string read_file(const fs::path& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer. Whether it is a
  // regular file is checked on the descriptor, not the name, so nothing can
  // be swapped in between.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw Error(Status::not_found, fmt::format("file not found: {}", path.string()));
    io_error("cannot read", path);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) io_error("cannot read", path);
  if (S_ISDIR(st.st_mode))
    throw Error(Status::invalid_argument, fmt::format("{} is a folder, not a file", path.string()));
  if (!S_ISREG(st.st_mode))
    throw Error(Status::invalid_argument,
                fmt::format("{} is not a regular file (a device, FIFO or socket); give a file", path.string()));
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

void make_dirs(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec)
    throw Error(Status::io, fmt::format("cannot create folder {}: {}", path.string(), ec.message()));
}

void write_file_atomic(const fs::path& path, std::string_view content) {
  fs::path dir = path.parent_path();
  if (!dir.empty()) make_dirs(dir);
  // Unique per process, thread and call: two threads may write the same path.
  static std::atomic<std::uint64_t> counter{0};
  std::string tmp = path.string() + fmt::format(".tmp.{}.{}.{}", ::getpid(), ::gettid(), counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("cannot create", tmp);
  try {
    write_all(fd, content, tmp);
    if (::fsync(fd) != 0) io_error("cannot sync", tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    io_error("cannot rename into", path);
  }
  // Make the rename itself durable.
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

AppendLog::AppendLog(const fs::path& path) : path_(path) {
  if (!path.parent_path().empty()) make_dirs(path.parent_path());
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) io_error("cannot open", path);
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
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(path, ec)) return out;
  std::string data = read_file(path);
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

bool truncate_torn_tail(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  std::string data = read_file(path);
  if (data.empty() || data.back() == '\n') return false;
  std::size_t keep = data.rfind('\n');
  keep = keep == std::string::npos ? 0 : keep + 1;
  fs::resize_file(path, keep, ec);
  if (ec) throw Error(Status::io, fmt::format("cannot repair {}: {}", path.string(), ec.message()));
  return true;
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
