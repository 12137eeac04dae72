// Attacks on the verdict itself, as a hostile model would write them: a host
// candidate that finds the worker's result pipe (the only write-only FIFO
// among its descriptors that is not stderr, or one reached through /proc) and
// writes well-formed worker frames into it, made here with the real codec;
// or that answers for its own process before it is asked. Each must end as
// the candidate's own failure, and the next honest candidate must get its own
// verdict (docs/security.md, "Verdicts").
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "eval/protocol.hpp"
#include "fixtures.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::eval;

namespace {

const char* kIncludes =
    "#include <csignal>\n#include <cstring>\n#include <string>\n#include <dirent.h>\n#include <sys/ptrace.h>\n"
    "#include <sys/socket.h>\n#include <sys/uio.h>\n";

std::string frames(const std::vector<msg::Reply>& replies) {
  std::string bytes;
  for (const auto& r : replies) bytes += encode_frame(msg::to_json(r));
  return bytes;
}

// C++ source for `bytes` as an array initialiser.
std::string byte_array(const std::string& bytes) {
  std::string s = "static const unsigned char forged[] = {";
  for (unsigned char c : bytes) s += std::to_string(static_cast<int>(c)) + ",";
  return s + "};\n";
}

// The attack: the forged bytes go to every write-only FIFO it holds except
// stderr, and to every such descriptor of every process /proc shows it;
// then `then` runs. It computes nothing, so its honest verdict is a failure.
Solution forging_candidate(const std::string& bytes, const std::string& then, const std::string& name) {
  const std::string body = byte_array(bytes) + R"CODE(
    auto spray = [](int fd) {
      struct stat st;
      if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
      int fl = fcntl(fd, F_GETFL);
      if (fl < 0 || (fl & O_ACCMODE) != O_WRONLY) return;
      if (write(fd, forged, sizeof forged) < 0) return;
    };
    for (int fd = 3; fd < 1024; ++fd) spray(fd);
    if (DIR* procs = opendir("/proc")) {
      while (dirent* p = readdir(procs)) {
        std::string dir = std::string("/proc/") + p->d_name + "/fd";
        if (DIR* fds = opendir(dir.c_str())) {
          while (dirent* f = readdir(fds)) {
            int fd = open((dir + "/" + f->d_name).c_str(), O_WRONLY | O_NONBLOCK);
            if (fd >= 0) { spray(fd); close(fd); }
          }
          closedir(fds);
        }
      }
      closedir(procs);
    }
    (void)x; (void)y; (void)z; (void)n;
  )CODE" + then;
  Solution s = test::vadd_candidate(body, name);
  s.sources[0].content = kIncludes + s.sources[0].content;
  return s.finalize();
}

WorkloadResult passed_workload(const std::string& name, double ms) {
  WorkloadResult w;
  w.name = name;
  w.status = EvalStatus::passed;
  w.benchmark = name == "b1";
  w.timing.mean_ms = w.timing.median_ms = w.timing.min_ms = ms;
  w.timing.count = 10;
  return w;
}

EvalResult passed_result(const std::string& id) {
  EvalResult r;
  r.solution_id = id;
  r.status = EvalStatus::passed;
  r.workloads = {passed_workload("t1", 0.0042), passed_workload("b1", 0.0042)};
  r.compute_summary();
  return r;
}

EvaluatorConfig config(const std::string& name) {
  return test::test_config(test::scratch_dir(name).string());
}

// The honest candidate after an attack: its own verdict, its own timing,
// and a reference time measured, not forged.
void check_honest_after(Evaluator& ev, const Task& task, double honest_reference_ms) {
  Solution good = test::vadd_candidate(test::kGoodBody, "honest-after");
  EvalResult r = ev.evaluate(task, good);
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);
  CHECK(r.solution_id == good.id);
  REQUIRE(r.workloads.size() == 2);
  CHECK(r.workloads[1].timing.count >= 3);
  if (honest_reference_ms > 0) CHECK(r.workloads[1].reference_ms < 100 * honest_reference_ms + 1.0);
}

}  // namespace

TEST_CASE("attack: forged worker frames end as the candidate's own failure, and the next candidate gets its own verdict") {
  auto ev = make_evaluator(config("forged_frames"));
  SpecTask task(test::vadd_task());
  EvalResult honest = ev->evaluate(task, test::vadd_candidate(test::kGoodBody, "honest"));
  REQUIRE(honest.status == EvalStatus::passed);
  MESSAGE("candidate process isolation: " << honest.metrics.get_string("candidate_isolation"));
  const double reference_ms = honest.workloads.at(1).reference_ms;

  struct Attack {
    const char* name;
    std::vector<msg::Reply> replies;
    std::string then;         // what the candidate does after writing
    EvalStatus expected;
    const char* words;        // in the candidate's failure message
  };
  msg::Phase reference_phase{"t1", FlowPhase{"reference", "computing the reference outputs", 0, true}};
  msg::Phase long_phase{"t1", FlowPhase{"timing", "forged", 1e9, false}};
  std::vector<Attack> attacks = {
      {"passed", {msg::WorkloadFinished{passed_workload("t1", 0.0042)}, msg::WorkloadFinished{passed_workload("b1", 0.0042)},
                  msg::Finished{passed_result("forged"), false}},
       "", EvalStatus::incorrect, "never written"},
      {"reference-timing", {msg::ReferenceTimed{"b1", TimingStats{.mean_ms = 1000, .median_ms = 1000}}}, "",
       EvalStatus::incorrect, "never written"},
      {"error", {msg::Failed{Status::internal, "forged: the evaluator broke"}}, "", EvalStatus::incorrect, "never written"},
      {"cancel", {msg::Failed{Status::cancelled, "forged: cancelled by the user"}}, "std::_Exit(130);",
       EvalStatus::crashed, "exited with code 130"},
      {"reference-blame", {reference_phase}, "std::abort();", EvalStatus::crashed, "SIGABRT"},
      {"out-of-step",
       {msg::Finished{passed_result("forged"), false}, msg::WorkloadStarted{"t1"},
        msg::WorkloadFinished{passed_workload("t1", 0.0042)}, msg::Finished{passed_result("forged"), false}},
       "", EvalStatus::incorrect, "never written"},
  };
  for (const auto& a : attacks) {
    CAPTURE(a.name);
    Solution s = forging_candidate(frames(a.replies), a.then, std::string("forges-") + a.name);
    EvalResult r;
    CHECK_NOTHROW(r = ev->evaluate(task, s));  // never an error of the evaluator, the task or the user
    INFO(r.to_json().dump(2));
    CHECK(r.status == a.expected);
    CHECK(r.solution_id == s.id);
    CHECK(r.score == 0);
    REQUIRE(!r.workloads.empty());
    CHECK(r.workloads.back().message.find(a.words) != std::string::npos);
    check_honest_after(*ev, task, reference_ms);
  }
}

TEST_CASE("attack: a forged phase and then pause() ends as the candidate's timeout") {
  EvaluatorConfig c = config("forged_pause");
  c.options.run_timeout_s = 3;
  auto ev = make_evaluator(c);
  SpecTask task(test::vadd_task());
  msg::Phase long_phase{"t1", FlowPhase{"timing", "forged", 1e9, false}};
  Solution s = forging_candidate(frames({long_phase}), "pause();", "forges-phase-then-pauses");
  EvalResult r;
  CHECK_NOTHROW(r = ev->evaluate(task, s));
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::timeout);
  check_honest_after(*ev, task, 0);
}

TEST_CASE("attack: answers queued on the candidate's own channel are refused as a protocol breach") {
  auto ev = make_evaluator(config("forged_answers"));
  SpecTask task(test::vadd_task());
  // Every plausible answer, with every token it could guess, on every socket it holds.
  const std::string body = R"CODE(
    for (int fd = 3; fd < 64; ++fd) {
      int type = 0;
      socklen_t len = sizeof type;
      if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) continue;
      for (unsigned op = 16; op < 24; ++op)
        for (unsigned long long token = 0; token < 4; ++token) {
          unsigned char packet[20] = {'K', 'S', 'C', '1'};
          std::memcpy(packet, "KSC1", 4);
          unsigned magic = 0x3143534bu;
          std::memcpy(packet, &magic, 4);
          std::memcpy(packet + 4, &op, 4);
          std::memcpy(packet + 8, &token, 8);
          std::memset(packet + 16, 0, 4);
          send(fd, packet, sizeof packet, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
    }
    (void)x; (void)y; (void)z; (void)n;)CODE";
  Solution s = test::vadd_candidate(body, "queues-answers");
  s.sources[0].content = kIncludes + s.sources[0].content;
  s.finalize();
  EvalResult r;
  CHECK_NOTHROW(r = ev->evaluate(task, s));
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::runtime_error);
  REQUIRE(!r.workloads.empty());
  CHECK(r.workloads.back().message.find("broke the evaluator's protocol") != std::string::npos);
  check_honest_after(*ev, task, 0);
}

TEST_CASE("attack: a candidate cannot start processes, trace, signal or read the worker") {
  auto ev = make_evaluator(config("forged_reach"));
  SpecTask task(test::vadd_task());
  // It tries, prints what worked, and crashes so that its output comes back.
  const std::string body = R"CODE(
    int forked = fork();
    if (forked == 0) _exit(0);
    long traced = 0;
    for (int pid = 1; pid < 8; ++pid) if (ptrace(PTRACE_ATTACH, pid, nullptr, nullptr) == 0) ++traced;
    int signalled = 0;
    for (int pid = 2; pid < 64; ++pid) if (kill(pid, SIGSTOP) == 0) ++signalled;
    int mem = 0;
    for (int pid = 2; pid < 64; ++pid) {
      int fd = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR);
      if (fd >= 0) { ++mem; close(fd); }
    }
    char buf[8];
    iovec local{buf, sizeof buf}, remote{buf, sizeof buf};
    long vm = process_vm_readv(getppid() > 0 ? getppid() : 2, &local, 1, &remote, 1, 0);
    std::printf("REACH fork=%d traced=%ld signalled=%d mem=%d vm=%ld\n", forked < 0 ? -1 : 1, traced, signalled, mem, vm);
    std::fflush(stdout);
    (void)x; (void)y; (void)z; (void)n;
    std::abort();)CODE";
  Solution s = test::vadd_candidate(body, "reaches-out");
  s.sources[0].content = kIncludes + s.sources[0].content;
  s.finalize();
  EvalResult r = ev->evaluate(task, s);
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::crashed);
  CHECK(r.log.find("REACH fork=-1 traced=0 signalled=0 mem=0 vm=-1") != std::string::npos);
  check_honest_after(*ev, task, 0);
}
