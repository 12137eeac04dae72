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

// ---------------------------------------------------------------------------
// Folder: a folder whose content may come from someone else (a run folder).

namespace {

// A folder with a private file outside it, and a folder to work in.
struct Planted {
  fs::path root, secret_dir, secret, work;
  explicit Planted(const std::string& name) : root(ks::test::scratch_dir(name)) {
    secret_dir = root / "private";
    secret = secret_dir / "id_ed25519";
    work = root / "run";
    fs::create_directories(secret_dir);
    fs::create_directories(work);
    write_file_atomic(secret, "PRIVATE-KEY-BYTES");
  }
  bool secret_intact() const {
    return fs::is_regular_file(secret) && read_file(secret) == "PRIVATE-KEY-BYTES" &&
           std::distance(fs::directory_iterator(secret_dir), fs::directory_iterator()) == 1;
  }
};

}  // namespace

TEST_CASE("fs: Folder reads and writes beneath itself") {
  Planted p("fs_folder_plain");
  Folder f(p.work);
  f.write_atomic("a/b/c.json", "one");
  CHECK(f.read("a/b/c.json") == "one");
  CHECK(f.kind("a/b") == EntryKind::folder);
  CHECK(f.kind("a/b/c.json") == EntryKind::file);
  CHECK(f.kind("a/x/y") == EntryKind::none);
  {
    AppendLog log = f.append_log("events.jsonl");
    log.append("1");
  }
  CHECK(f.read_lines("events.jsonl") == std::vector<std::string>{"1"});
  CHECK(f.read_lines("absent.jsonl").empty());
  f.link_or_copy("a/b/c.json", "best/c.json");
  CHECK(fs::hard_link_count(p.work / "a/b/c.json") == 2);
  f.remove_files_in("best");
  CHECK(f.list("best").empty());
  CHECK_THROWS_WITH(f.read("../private/id_ed25519"), doctest::Contains("would leave"));
  CHECK_THROWS_WITH(f.read(p.secret), doctest::Contains("is not a path beneath"));
}

TEST_CASE("fs: Folder never reads through a link, and says which file it refused") {
  Planted p("fs_folder_read_link");
  fs::create_symlink(p.secret, p.work / "kernel.cpp");
  fs::create_directories(p.work / "attempts");
  fs::create_directory_symlink(p.secret_dir, p.work / "attempts" / "0000-x");
  Folder f(p.work);
  try {
    f.read("kernel.cpp");
    FAIL("a link was read");
  } catch (const ks::Error& e) {
    CHECK(std::string(e.what()).find((p.work / "kernel.cpp").string()) != std::string::npos);
    CHECK(std::string(e.what()).find("symbolic link") != std::string::npos);
    CHECK(std::string(e.what()).find("PRIVATE") == std::string::npos);
  }
  // A link as a folder on the way is refused too.
  CHECK_THROWS_WITH(f.read("attempts/0000-x/id_ed25519"), doctest::Contains("0000-x is a symbolic link"));
  CHECK_THROWS_WITH(f.list("attempts/0000-x"), doctest::Contains("symbolic link"));
  CHECK(f.kind("kernel.cpp") == EntryKind::link);
  CHECK(f.kind("attempts/0000-x") == EntryKind::link);
  CHECK_THROWS_WITH(f.link_or_copy("kernel.cpp", "best/kernel.cpp"), doctest::Contains("symbolic link"));
}

TEST_CASE("fs: Folder never writes through a link, for a file or a folder on the way") {
  Planted p("fs_folder_write_link");
  fs::create_symlink(p.secret, p.work / "events.jsonl");
  fs::create_directory_symlink(p.secret_dir, p.work / "world_model");
  Folder f(p.work);
  CHECK_THROWS_WITH(f.append_log("events.jsonl"), doctest::Contains("symbolic link"));
  CHECK_THROWS_WITH(f.write_atomic("events.jsonl", "x"), doctest::Contains("symbolic link"));
  CHECK_THROWS_WITH(f.truncate_torn_tail("events.jsonl"), doctest::Contains("symbolic link"));
  CHECK_THROWS_WITH(f.write_atomic("world_model/v000001.json", "{}"), doctest::Contains("world_model is a symbolic link"));
  CHECK_THROWS_WITH(f.make_dirs("world_model/sub"), doctest::Contains("symbolic link"));
  CHECK_THROWS_WITH(f.open_lock_file("events.jsonl"), doctest::Contains("symbolic link"));
  CHECK(p.secret_intact());
}

TEST_CASE("fs: Folder deletes nothing outside itself: a linked folder is refused, a link inside goes alone") {
  Planted p("fs_folder_remove");
  fs::create_directory_symlink(p.secret_dir, p.work / "best");
  Folder f(p.work);
  CHECK_THROWS_WITH(f.remove_files_in("best"), doctest::Contains("best is a symbolic link"));
  CHECK(p.secret_intact());
  fs::remove(p.work / "best");
  fs::create_directories(p.work / "best");
  fs::create_symlink(p.secret, p.work / "best" / "kernel.cpp");
  f.remove_files_in("best");
  CHECK(f.list("best").empty());
  CHECK(p.secret_intact());
}

TEST_CASE("fs: read_file refuses kernel files (/proc, /sys), which look regular but can block") {
  CHECK_THROWS_WITH(read_file("/proc/self/status"), doctest::Contains("the kernel's (/proc, /sys)"));
  if (fs::exists("/sys/kernel/mm/transparent_hugepage/enabled"))
    CHECK_THROWS_WITH(read_file("/sys/kernel/mm/transparent_hugepage/enabled"), doctest::Contains("/sys"));
}

TEST_CASE("fs: write_file_atomic replaces, refuses or follows a link at the path, as asked") {
  Planted p("fs_atomic_link");
  const fs::path out = p.work / "submission.py";
  fs::create_symlink(p.secret, out);
  CHECK_THROWS_WITH(write_file_atomic(out, "x", LinkAtPath::refuse), doctest::Contains("is a symbolic link"));
  CHECK(p.secret_intact());
  write_file_atomic(out, "followed", LinkAtPath::follow);
  CHECK(fs::is_symlink(out));
  CHECK(read_file(p.secret) == "followed");
  write_file_atomic(p.secret, "PRIVATE-KEY-BYTES");
  write_file_atomic(out, "replaced");  // the default: the link itself is replaced
  CHECK_FALSE(fs::is_symlink(out));
  CHECK(read_file(out) == "replaced");
  CHECK(p.secret_intact());
  // No temporary file is left beside it.
  CHECK(std::distance(fs::directory_iterator(p.work), fs::directory_iterator()) == 1);
}
