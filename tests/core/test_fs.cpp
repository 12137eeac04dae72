#include <doctest/doctest.h>

#include <fstream>

#include "ksearch/error.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks::util;

TEST_CASE("fs: atomic write replaces content and leaves no temp files") {
  auto dir = ks::test::scratch_dir("fs_atomic");
  auto p = dir / "sub" / "a.json";
  ks::util::write_file_atomic(p, "one");
  CHECK(ks::util::read_file(p) == "one");
  ks::util::write_file_atomic(p, "two");
  CHECK(ks::util::read_file(p) == "two");
  int files = 0;
  for (auto& e : fs::directory_iterator(dir / "sub")) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("fs: append log writes whole lines; a torn last line is dropped") {
  auto dir = ks::test::scratch_dir("fs_log");
  auto p = dir / "events.jsonl";
  {
    ks::util::AppendLog log(p);
    log.append("{\"a\":1}");
    log.append("{\"a\":2}");
  }
  {
    std::ofstream out(p, std::ios::app);
    out << "{\"a\":3";  // a write cut short by a kill
  }
  bool torn = false;
  auto lines = ks::util::read_lines(p, &torn);
  CHECK(torn);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "{\"a\":2}");
  CHECK(ks::util::read_lines(dir / "absent.jsonl").empty());
}

TEST_CASE("fs: reading a missing file says not found") {
  try {
    ks::util::read_file("/nonexistent/ksearch/file");
    FAIL("should throw");
  } catch (const ks::Error& e) {
    CHECK(e.status() == ks::Status::not_found);
  }
}

TEST_CASE("fs: reading a folder says it is a folder, not that it is empty") {
  auto dir = ks::test::scratch_dir("fs_read_dir");
  CHECK_THROWS_WITH(ks::util::read_file(dir), doctest::Contains("is a folder, not a file"));
}

TEST_CASE("fs: TempDir removes itself") {
  fs::path kept;
  {
    ks::util::TempDir t("kstest");
    kept = t.path();
    CHECK(fs::is_directory(kept));
    ks::util::write_file_atomic(kept / "x", "y");
  }
  CHECK_FALSE(fs::exists(kept));
}
