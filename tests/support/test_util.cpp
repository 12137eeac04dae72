#include "support/test_util.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace ks::test {

fs::path scratch_dir(const std::string& name) {
  fs::path p = binary_dir() / "test-scratch" / name;
  std::error_code ec;
  fs::remove_all(p, ec);
  fs::create_directories(p);
  return p;
}

std::string read_proc_file(const fs::path& p) {
  std::string out;
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

}  // namespace ks::test
