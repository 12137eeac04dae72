// Attacks on the evaluator as a hostile model would write them (issue:
// secrets and the host out of reach of candidates). Each test is the attack
// and what must not happen. Where a layer depends on bubblewrap, the test
// asks sandbox_status() and checks the unconfined promise otherwise.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "eval/include_check.hpp"
#include "eval/isolation/sandbox.hpp"
#include "fixtures.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/secrets.hpp"

using namespace ks;
using namespace ks::eval;
namespace fs = std::filesystem;

namespace {

constexpr const char* kKey = "sk-test-never-leak-5e1f0a9b";

std::string reversed(std::string s) {
  std::reverse(s.begin(), s.end());
  return s;
}

std::string slurp(const fs::path& p) { return ks::test::read_proc_file(p); }

// Every process below `root` in the process tree, by parent links.
std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, pid_t> parent;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = slurp(e.path() / "stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream f(stat.substr(close + 2));
    char state;
    long ppid;
    f >> state >> ppid;
    parent[static_cast<pid_t>(std::stol(name))] = static_cast<pid_t>(ppid);
  }
  std::vector<pid_t> out;
  for (const auto& [pid, pp] : parent) {
    for (pid_t p = pp; p > 1; p = parent.count(p) ? parent[p] : 0)
      if (p == root) {
        out.push_back(pid);
        break;
      }
  }
  return out;
}

bool marker_process_alive(const std::string& marker) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp(e.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    std::string stat = slurp(e.path() / "stat");
    auto close = stat.rfind(')');
    bool zombie = close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
    if (!zombie && cmd.find(marker) != std::string::npos) return true;
  }
  return false;
}

EvaluatorConfig config(const std::string& name) {
  EvaluatorConfig c = test::test_config(test::scratch_dir(name).string());
  c.options.run_benchmarks = false;
  return c;
}

}  // namespace

TEST_CASE("include check: directives that name files outside the candidate's sources are refused") {
  auto check = [](const std::string& code) { return check_includes({{"kernel.cu", code}}); };
  CHECK(check("#include <cuda_fp16.h>\n#include \"helpers.cuh\"\n#include <cuda/std/cstdint>\n").empty());
  CHECK(check("  #  include   <cstdint>\nint x = a.include(3);\n").empty());  // a member call is no directive
  CHECK(check("// #include \"/etc/passwd\"\n/* #include \"/etc/shadow\" */\nint y;\n").empty());  // comments
  CHECK(check("const char* s = \"#include </etc/passwd>\";\n").empty());  // inside a string, not a directive

  std::string abs = check("#include <cstdint>\n#include \"/etc/passwd\"\n");
  CHECK(abs.find("kernel.cu:2") != std::string::npos);
  CHECK(abs.find("absolute path") != std::string::npos);
  CHECK(abs.find("refused before compiling") != std::string::npos);
  CHECK(check("#include \"../../../etc/passwd\"\n").find("\"..\"") != std::string::npos);
  CHECK(check("#include <../secret.h>\n").find("\"..\"") != std::string::npos);
  CHECK(check("#define F \"/etc/passwd\"\n#include F\n").find("literally") != std::string::npos);
  CHECK(!check("#include_next </etc/passwd>\n").empty());
  CHECK(!check("%:include \"/etc/passwd\"\n").empty());               // the digraph of '#'
  CHECK(!check("#inc\\\nlude \"/etc/passwd\"\n").empty());             // a line splice inside the directive
  CHECK(!check("#if __has_include(\"/root/.ssh/id_rsa\")\n#endif\n").empty());
  CHECK(!check("#pragma GCC dependency \"/etc/passwd\"\n").empty());
  CHECK(!check("#embed \"/etc/passwd\"\n").empty());
  CHECK(check("asm(\".incbin \\\"/etc/passwd\\\"\");\n").find(".incbin") != std::string::npos);
  CHECK(!check("asm(\".include \\\"/etc/passwd\\\"\");\n").empty());
  // Every file of the answer is checked, headers too.
  CHECK(!check_includes({{"kernel.cu", "#include \"util.cuh\"\n"}, {"util.cuh", "#include \"/proc/self/environ\"\n"}})
             .empty());
}

TEST_CASE("candidate environment: an allowlist, never credentials") {
  ::setenv("KS_TEST_GITHUB_TOKEN", "ghp_should_not_pass_123", 1);
  ::setenv("OPENAI_API_KEY", kKey, 1);
  ::setenv("KS_TEST_UNRELATED", "fine-but-not-needed", 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  ::setenv("CUDA_AUTH_SECRET", "also-a-credential-name", 1);
  auto env = isolation::candidate_environment(true);
  CHECK(env.count("PATH") == 1);
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "0");
  CHECK(env.at("TMPDIR") == "/tmp");
  CHECK(env.count("OPENAI_API_KEY") == 0);
  CHECK(env.count("KS_TEST_GITHUB_TOKEN") == 0);
  CHECK(env.count("KS_TEST_UNRELATED") == 0);   // not on the allowlist
  CHECK(env.count("CUDA_AUTH_SECRET") == 0);    // allowed prefix, credential name
  // A value that holds a registered secret is dropped whatever its name.
  util::register_secret("cuda-arch-but-secret-991");
  ::setenv("CUDA_EXTRA_FLAGS", "x=cuda-arch-but-secret-991", 1);
  CHECK(isolation::candidate_environment(false).count("CUDA_EXTRA_FLAGS") == 0);
  // Variables named in KSEARCH_WORKER_ENV pass, credentials still do not.
  ::setenv("KSEARCH_WORKER_ENV", "KS_TEST_UNRELATED,KS_TEST_GITHUB_TOKEN", 1);
  auto extra = isolation::candidate_environment(false);
  CHECK(extra.count("KS_TEST_UNRELATED") == 1);
  CHECK(extra.count("KS_TEST_GITHUB_TOKEN") == 0);
  ::unsetenv("KSEARCH_WORKER_ENV");
  ::unsetenv("CUDA_EXTRA_FLAGS");
  ::unsetenv("CUDA_AUTH_SECRET");
}

TEST_CASE("redaction: registered secrets never survive, whatever carries them") {
  util::register_secret("short");  // too short to be a key: ignored
  util::register_secret("sk-redact-me-0123456789");
  CHECK(util::redact("short text") == "short text");
  CHECK(util::redact("key=sk-redact-me-0123456789; again sk-redact-me-0123456789") ==
        "key=[redacted]; again [redacted]");
  Json j = Json::obj({{"log", "printed sk-redact-me-0123456789"}, {"list", Json::arr({"x sk-redact-me-0123456789"})}});
  CHECK(util::redact_json(j).dump().find("sk-redact-me") == std::string::npos);
  CHECK(util::looks_like_credential_name("MY_API_KEY"));
  CHECK(util::looks_like_credential_name("hf_token"));
  CHECK_FALSE(util::looks_like_credential_name("PATH"));
}

TEST_CASE("bounded reads: devices, FIFOs and oversized files fail at once, naming the file") {
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(util::read_file("/dev/zero"), doctest::Contains("not a regular file"));
  const fs::path dir = test::scratch_dir("bounded_reads");
  const fs::path fifo = dir / "fifo";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(util::read_file(fifo), doctest::Contains("not a regular file"));  // no writer: must not block
  util::write_file_atomic(dir / "big", std::string(1000, 'x'));
  CHECK_THROWS_WITH(util::read_file(dir / "big", 999), doctest::Contains("over the limit of 999 bytes"));
  CHECK(util::read_file(dir / "big", 1000).size() == 1000);
  // Instant when refused, forever when not: 60 s tells them apart on any load.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
}

TEST_CASE("sandbox: a confined process sees a read-only system, a private /tmp, no home and no network") {
  const isolation::SandboxStatus& st = isolation::sandbox_status();
  INFO(st.problem);
  if (!st.available) {
    MESSAGE("bubblewrap is not available here (" << st.problem << "); the confinement checks are skipped");
    isolation::Sandbox automatic(SandboxMode::automatic);  // warns, does not throw
    CHECK_FALSE(automatic.active());
    CHECK_THROWS_AS(isolation::Sandbox(SandboxMode::required), Error);
    return;
  }
  isolation::Sandbox box(SandboxMode::required);
  REQUIRE(box.active());
  const fs::path mine = test::scratch_dir("sandbox_rw");
  const fs::path hidden = test::scratch_dir("sandbox_hidden");
  util::write_file_atomic(hidden / "secret.txt", "hidden-content");
  util::write_file_atomic("/tmp/ks-sandbox-host-tmp-probe", "host tmp");
  const std::string script =
      "echo pid=$$; "
      "test -e " + (hidden / "secret.txt").string() + " && echo SEES-HIDDEN; "
      "test -e /tmp/ks-sandbox-host-tmp-probe && echo SEES-HOST-TMP; "
      "test -e /etc/shadow && echo SEES-SHADOW; "
      "test -e /etc/passwd && echo SEES-PASSWD; "
      "test -e \"$HOME/.bashrc\" && echo SEES-HOME; "
      "touch /usr/ks-write-probe 2>/dev/null && echo WROTE-SYSTEM; "
      "echo ok > " + (mine / "out.txt").string() + " && echo WROTE-MINE; "
      "cat /proc/net/dev | grep -c : ";
  util::SpawnOptions o;
  o.argv = box.wrap({"/bin/sh", "-c", script}, isolation::SandboxView{.read_only = {}, .read_write = {mine}, .gpu = false,
                                                           .cwd = mine, .die_with_parent = true});
  o.clear_env = true;
  o.env_set = isolation::candidate_environment(true);
  o.env_set["HOME"] = "/root";
  auto r = util::run_command(o, "", 30);
  INFO(r.out << r.err);
  CHECK(r.ok());
  CHECK(r.out.find("pid=2") != std::string::npos);  // its own PID namespace
  for (const char* leak : {"SEES-HIDDEN", "SEES-HOST-TMP", "SEES-SHADOW", "SEES-PASSWD", "SEES-HOME", "WROTE-SYSTEM"})
    CHECK_MESSAGE(r.out.find(leak) == std::string::npos, leak);
  CHECK(r.out.find("WROTE-MINE") != std::string::npos);
  // Only the loopback interface: no network (the header lines and lo).
  CHECK(r.out.find("\n1\n") != std::string::npos);
  fs::remove("/tmp/ks-sandbox-host-tmp-probe");
}

TEST_CASE("attack: a candidate that prints the API key and crashes leaks nothing, and no child holds the key") {
  ::setenv("OPENAI_API_KEY", kKey, 1);
  util::register_secret(kKey);
  auto ev = make_evaluator(config("attack_key"));
  SpecTask task(test::vadd_task());
  // It prints the key, the key reversed (redaction cannot catch that: only a
  // clean environment keeps it out), its whole environment and its parent's,
  // lingers so the scanner below can look at every process, then crashes.
  const std::string body = R"CODE(
    const char* k = std::getenv("OPENAI_API_KEY");
    std::string key = k ? k : "(unset)";
    std::printf("KEY=%s REVERSED=%s\n", key.c_str(), std::string(key.rbegin(), key.rend()).c_str());
    for (const char* f : {"/proc/self/environ", "/proc/1/environ"}) {
      int fd = open(f, O_RDONLY);
      char buf[8192];
      long n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
      for (long i = 0; i < n; ++i) if (buf[i] == 0) buf[i] = ' ';
      if (n > 0) { buf[n] = 0; std::printf("ENV(%s)=%s\n", f, buf); }
    }
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    std::abort();)CODE";
  std::atomic<bool> done{false};
  std::set<std::string> seen_with_key;
  std::atomic<int> scanned{0};
  std::thread scanner([&] {
    while (!done) {
      for (pid_t p : descendants(::getpid())) {
        std::string env = slurp("/proc/" + std::to_string(p) + "/environ");
        if (env.empty()) continue;
        ++scanned;
        if (env.find(kKey) != std::string::npos) {
          std::string cmd = slurp("/proc/" + std::to_string(p) + "/cmdline");
          std::replace(cmd.begin(), cmd.end(), '\0', ' ');
          seen_with_key.insert(cmd);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  struct Stop {  // however evaluate() ends, the scanner stops
    std::atomic<bool>& done;
    std::thread& t;
    ~Stop() {
      done = true;
      if (t.joinable()) t.join();
    }
  } stop{done, scanner};
  EvalResult r = ev->evaluate(task, test::vadd_candidate(body, "leaks-key"));
  done = true;
  scanner.join();
  std::string all = r.to_json().dump();
  INFO(all);
  CHECK(r.status == EvalStatus::crashed);
  CHECK(all.find("KEY=") != std::string::npos);        // the candidate's output did come back
  CHECK(all.find(kKey) == std::string::npos);
  CHECK(all.find(reversed(kKey)) == std::string::npos);  // not even in a form redaction misses
  CHECK(scanned > 0);                                    // the compiler and the worker were seen
  for (const auto& cmd : seen_with_key) FAIL_CHECK("a child process holds the key: " << cmd);
}

TEST_CASE("attack: #include \"/etc/passwd\" is refused before the compiler runs") {
  auto ev = make_evaluator(config("attack_include"));
  SpecTask task(test::vadd_task());
  Solution s = test::vadd_candidate(test::kGoodBody, "includes-passwd");
  s.sources[0].content = "#include \"/etc/passwd\"\n" + s.sources[0].content;
  EvalResult r = ev->evaluate(task, s.finalize());
  INFO(r.log);
  CHECK(r.status == EvalStatus::compile_error);
  CHECK(r.log.find("refused before compiling") != std::string::npos);
  CHECK(r.log.find("root:") == std::string::npos);  // nothing of the file in the log
}

TEST_CASE("attack: a candidate cannot start a double-forked setsid child") {
  auto ev = make_evaluator(config("attack_setsid"));
  SpecTask task(test::vadd_task());
  const std::string marker = "ks-orphan-" + std::to_string(::getpid());
  // A host candidate's process may start threads, never processes
  // (candidate_process.hpp): fork fails, and the kernel then computes wrong.
  const std::string body = R"CODE(
    static bool forked = false;
    static bool once = false;
    if (!once) {
      once = true;
      pid_t child = fork();
      if (child == 0) {
        setsid();
        if (fork() == 0) { execl("/bin/sh", "sh", "-c", "sleep 600", ")CODE" + marker + R"CODE(", (char*)0); _exit(0); }
        _exit(0);
      }
      forked = child > 0;
    }
    for (std::int64_t i = 0; i < n; ++i) z[i] = forked ? 0.0f : x[i] + 2.0f * y[i];)CODE";
  EvalResult r = ev->evaluate(task, test::vadd_candidate(body, "forks"));
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);
  CHECK_FALSE(marker_process_alive(marker));
  EvalResult after = ev->evaluate(task, test::vadd_candidate(test::kGoodBody, "good-after"));
  CHECK(after.status == EvalStatus::passed);
}

TEST_CASE("attack: a candidate that touches far more memory than the limit ends as memory_limit, quickly") {
  EvaluatorConfig c = config("attack_memory");
  c.memory_limit_bytes = std::uint64_t{1} << 30;  // small, so the test is safe on any machine
  auto ev = make_evaluator(c);
  SpecTask task(test::vadd_task());
  // 64 GiB in 64 MiB steps, every page written.
  const std::string body = R"CODE(
    std::vector<char*> blocks;
    for (int i = 0; i < 1024; ++i) {
      char* p = static_cast<char*>(std::malloc(std::size_t{64} << 20));
      for (std::size_t j = 0; j < (std::size_t{64} << 20); j += 4096) p[j] = 1;
      blocks.push_back(p);
    }
    for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i] + blocks[0][0] - 1;)CODE";
  auto t0 = std::chrono::steady_clock::now();
  EvalResult r = ev->evaluate(task, test::vadd_candidate(body, "hog"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::memory_limit);
  REQUIRE(!r.workloads.empty());
  CHECK(r.workloads.back().message.find("memory limit of 1024 MiB") != std::string::npos);
  MESSAGE("memory_limit reached after " << s << " s (compile included)");
  // The same with C++ allocation: the new_handler path.
  const std::string cpp_body = R"CODE(
    std::vector<std::vector<char>> blocks;
    for (int i = 0; i < 1024; ++i) blocks.emplace_back(std::size_t{64} << 20, 1);
    for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i] + blocks[0][0] - 1;)CODE";
  EvalResult r2 = ev->evaluate(task, test::vadd_candidate(cpp_body, "hog-cpp"));
  INFO(r2.to_json().dump(2));
  CHECK(r2.status == EvalStatus::memory_limit);
  // And the worker that replaces it works.
  CHECK(ev->evaluate(task, test::vadd_candidate(test::kGoodBody, "good-after")).status == EvalStatus::passed);
}

TEST_CASE("attack: a sandboxed host candidate cannot read the reference cache or the user's files") {
  if (!isolation::sandbox_status().available) {
    MESSAGE("no sandbox here: host candidates run with the user's file access (docs/security.md)");
    return;
  }
  EvaluatorConfig c = config("attack_refs");
  auto ev = make_evaluator(c);
  SpecTask task(test::vadd_task());
  CHECK(ev->evaluate(task, test::vadd_candidate(test::kGoodBody, "warm")).status == EvalStatus::passed);
  const std::string refs = (c.cache_dir / "refs").string();
  const std::string body = R"CODE(
    struct stat st;
    std::printf("REFS=%d SRC=%d\n", stat(")CODE" + refs + R"CODE(", &st) == 0 ? 1 : 0,
                stat(")CODE" + (test::source_dir() / "README.md").string() + R"CODE(", &st) == 0 ? 1 : 0);
    std::fflush(stdout);
    std::abort();)CODE";
  EvalResult r = ev->evaluate(task, test::vadd_candidate(body, "snoops"));
  INFO(r.log);
  CHECK(r.log.find("REFS=0 SRC=0") != std::string::npos);
}
