#include "support/test_util.hpp"

namespace ks::test {

fs::path scratch_dir(const std::string& name) {
  fs::path p = binary_dir() / "test-scratch" / name;
  std::error_code ec;
  fs::remove_all(p, ec);
  fs::create_directories(p);
  return p;
}

}  // namespace ks::test
