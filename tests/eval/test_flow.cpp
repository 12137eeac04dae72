// The evaluation flow on its own, in this process: real host builds of the
// vadd candidates, a device double that runs out of memory on cue, and a
// task reference that fails. What the flow blames on whom is checked here
// without worker processes in between.
#include <doctest/doctest.h>

#include <optional>

#include "eval/evaluator_common.hpp"
#include "eval/flow.hpp"
#include "eval/host/host_compiler.hpp"
#include "eval/host/host_device.hpp"
#include "fixtures.hpp"
#include "ksearch/error.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::eval;

namespace {

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// The host device, except that the first cache flush finds no memory left
// (as a GPU's flush buffer may, while cached reference outputs fill it) and
// later ones succeed only once less memory is in use than at that moment.
class TightDevice final : public Device {
 public:
  DeviceInfo info() const override { return host_.info(); }
  Buffer alloc(std::size_t bytes) override {
    Buffer b = host_.alloc(bytes);
    live_ += b.bytes;
    return b;
  }
  void free(Buffer b) override {
    live_ -= b.bytes;
    host_.free(b);
  }
  void upload(Buffer dst, const void* src, std::size_t bytes) override { host_.upload(dst, src, bytes); }
  void download(void* dst, Buffer src, std::size_t bytes) override { host_.download(dst, src, bytes); }
  void copy(Buffer dst, Buffer src, std::size_t bytes) override { host_.copy(dst, src, bytes); }
  void generate(Buffer b, DType dtype, std::size_t count, Distribution::Kind kind, double p0, double p1,
                std::uint64_t seed, std::uint64_t stream) override {
    host_.generate(b, dtype, count, kind, p0, p1, seed, stream);
  }
  void poison(Buffer b, std::size_t bytes) override { host_.poison(b, bytes); }
  CompareStats compare(Buffer out, Buffer ref, DType dtype, std::size_t count, const Tolerance& tol) override {
    return host_.compare(out, ref, dtype, count, tol);
  }
  void flush_cache() override {
    if (!limit_) limit_ = live_;
    if (live_ >= *limit_) {
      ++refusals;
      throw RunError({EvalStatus::runtime_error, "out of device memory: no room for the flush buffer", true});
    }
    host_.flush_cache();
  }
  void synchronize() override {}
  void label(Buffer b, std::string_view name) override { host_.label(b, name); }
  std::unique_ptr<Program> load(const Artifact& a, const Solution& s) override { return host_.load(a, s); }

  int refusals = 0;

 private:
  host::HostDevice host_;
  std::size_t live_ = 0;
  std::optional<std::size_t> limit_;
};

class NoEvents final : public FlowEvents {
 public:
  void workload_started(const std::string&) override {}
  void reference_timed(const std::string&, const TimingStats&) override {}
  void workload_finished(const WorkloadResult&) override {}
};

PreparedSolution build(const TaskSpec& task, const Solution& s, const EvalOptions& o, const std::string& cache) {
  auto compiler = host::make_host_compiler({.compiler = "", .cache_dir = cache});
  std::vector<std::string> all;
  for (const auto& w : task.workloads) all.push_back(w.name);
  auto p = prepare_solution(task, s, all, o, "", cache,
                            [&](const CompileRequest& r) { return compiler->compile(r); });
  auto* failed = std::get_if<EvalResult>(&p);
  INFO((failed ? failed->log : std::string()));
  REQUIRE(failed == nullptr);
  return std::get<PreparedSolution>(std::move(p));
}

RunRequest request(const TaskSpec& task, const Solution& candidate, const std::string& cache, bool flush) {
  EvalOptions o = ks::test::test_config(cache).options;
  o.flush_l2 = flush;
  RunRequest req;
  req.candidate = build(task, candidate, o, cache);
  req.reference = build(task, task.references.at(Language::cpp), o, cache);
  req.options = o;
  req.workloads = {"t1", "b1"};
  return req;
}

}  // namespace

TEST_CASE("flow: out of memory anywhere in a workload is retried once after the reference cache lets go") {
  const std::string cache = ks::test::scratch_dir("flow_oom").string();
  TaskSpec task = ks::test::vadd_task();
  RunRequest req = request(task, ks::test::vadd_candidate(ks::test::kGoodBody), cache, true);
  // Timing caps generous enough that a busy machine still gets the minimum
  // repetitions: the count is what this test checks, not the speed.
  req.options.max_time_per_workload_s = 10;
  TightDevice device;
  ReferenceStore refs(device, {}, 1 << 30);  // memory only: t1's outputs stay cached
  NoEvents events;
  EvaluationFlow flow(device, refs);
  EvalResult r = flow.run(task, req, events);
  INFO(r.to_json().dump(2));
  CHECK(device.refusals == 1);  // b1's first attempt, while t1's reference outputs held memory
  CHECK(r.status == EvalStatus::passed);
  REQUIRE(r.workloads.size() == 2);
  CHECK(r.workloads[1].timing.count >= 3);
  CHECK_FALSE(flow.device_suspect());
}

TEST_CASE("flow: a failing reference is the task's fault, not the candidate's") {
  const std::string cache = ks::test::scratch_dir("flow_reference_fault").string();
  TaskSpec task = ks::test::vadd_task();

  SUBCASE("it throws") {
    task.references.at(Language::cpp).sources[0].content =
        "#include <cstdint>\n#include <stdexcept>\n"
        "void vadd_ref(const float*, const float*, float*, std::int64_t) { throw std::runtime_error(\"reference "
        "broke\"); }\n";
  }
  SUBCASE("its plan does not bind") {
    task.references.at(Language::cpp).launch_plan = LaunchPlan::from_json(Json::parse(
        R"({"calls": [{"fn": "vadd_ref", "args": ["X", "Y", "Z", "N"]}],
            "scratch": [{"name": "tmp", "dtype": "f32", "shape": ["N - 2000"]}]})"));
  }
  task.references.at(Language::cpp).finalize();
  RunRequest req = request(task, ks::test::vadd_candidate(ks::test::kGoodBody), cache, false);
  host::HostDevice device;
  ReferenceStore refs(device, {}, 1 << 30);
  NoEvents events;
  EvaluationFlow flow(device, refs);
  try {
    flow.run(task, req, events);
    FAIL("the reference's failure was charged to the candidate");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(contains(e.what(), "workload \"t1\": the task's reference failed while"));
    CHECK(contains(e.what(), "not the candidate"));
  }
}

TEST_CASE("flow: the key of cached reference outputs covers the reference's flags, parameters and seed") {
  TaskSpec task = ks::test::vadd_task();
  const WorkloadSpec& w = *task.find_workload("t1");
  PreparedSolution ref;
  ref.solution = task.references.at(Language::cpp);
  PreparedSolution::Build b;
  DeviceInfo dev = host::host_device_info();
  const std::string base = reference_cache_key(task, w, 7, ref, b, dev);
  CHECK(base.size() == 32);
  CHECK(reference_cache_key(task, w, 7, ref, b, dev) == base);
  CHECK(reference_cache_key(task, w, 8, ref, b, dev) != base);
  PreparedSolution flagged = ref;
  flagged.flags = {"-ffast-math"};
  CHECK(reference_cache_key(task, w, 7, flagged, b, dev) != base);
  PreparedSolution::Build tuned;
  tuned.params = {{"BLOCK", 64}};
  CHECK(reference_cache_key(task, w, 7, ref, tuned, dev) != base);
  DeviceInfo other = dev;
  other.name += " (another)";
  CHECK(reference_cache_key(task, w, 7, ref, b, other) != base);
}

namespace {

EvalResult run_in_process(const TaskSpec& task, const Solution& candidate, const std::string& cache) {
  RunRequest req = request(task, candidate, cache, false);
  req.workloads = {"t1"};
  host::HostDevice device;
  ReferenceStore refs(device, {}, 1 << 30);
  NoEvents events;
  EvaluationFlow flow(device, refs);
  return flow.run(task, req, events);
}

}  // namespace

TEST_CASE("flow: a NaN the reference does not have fails whatever the matched ratio allows") {
  TaskSpec task = ks::test::vadd_task();
  task.tolerance.min_matched_ratio = 0.9;  // 100 of t1's 1000 elements may be off
  task.tolerance.nan_policy = Tolerance::NanPolicy::must_match;
  EvalResult r = run_in_process(
      task,
      ks::test::vadd_candidate(std::string(ks::test::kGoodBody) + "\nz[3] = std::nanf(\"\");"),
      ks::test::scratch_dir("flow_nan_must_match").string());
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::incorrect);
  REQUIRE(r.workloads.size() == 1);
  CHECK(contains(r.workloads[0].message,
                 "output \"Z\" has 1 NaN or infinite values where the reference has a number"));
  CHECK(contains(r.workloads[0].message, "Z[3]"));
}

TEST_CASE("flow: under forbid, a number where the reference has NaN is no NaN in the output") {
  TaskSpec task = ks::test::vadd_task();
  task.tolerance.min_matched_ratio = 0.9;
  task.tolerance.nan_policy = Tolerance::NanPolicy::forbid;
  auto& ref = task.references.at(Language::cpp);
  ref.sources[0].content =
      "#include <cmath>\n#include <cstdint>\n"
      "void vadd_ref(const float* x, const float* y, float* z, std::int64_t n) {\n"
      "  for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];\n"
      "  z[5] = std::nanf(\"\");\n}\n";
  ref.finalize();
  const std::string cache = ks::test::scratch_dir("flow_nan_forbid").string();
  // One element of 1000 differs, within the ratio: the output has no NaN.
  EvalResult r = run_in_process(task, ks::test::vadd_candidate(ks::test::kGoodBody), cache);
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);

  // Beyond the ratio, the message says which side is non-finite.
  task.tolerance.min_matched_ratio = 1.0;
  EvalResult strict = run_in_process(task, ks::test::vadd_candidate(ks::test::kGoodBody), cache);
  INFO(strict.to_json().dump(2));
  CHECK(strict.status == EvalStatus::incorrect);
  REQUIRE(strict.workloads.size() == 1);
  CHECK(contains(strict.workloads[0].message, "1 of them numbers where the reference is NaN or infinite"));
  CHECK_FALSE(contains(strict.workloads[0].message, "forbids"));
}

TEST_CASE("flow: a tensor whose size overflows 64 bits is an error of the task, found before anything runs") {
  TaskSpec task = ks::test::vadd_task();
  for (auto& w : task.workloads)
    if (w.name == "t1") w.dims["N"] = std::int64_t{1} << 62;  // 2^62 floats: 2^64 bytes
  try {
    run_in_process(task, ks::test::vadd_candidate(ks::test::kGoodBody),
                   ks::test::scratch_dir("flow_size_overflow").string());
    FAIL("the size wrapped around");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(contains(e.what(), "tensor \"X\""));
    CHECK(contains(e.what(), "overflows 64 bits"));
  }
}

TEST_CASE("failures: one family, recorded one way") {
  // A compile error is a Failure with the compile_error status and the log.
  try {
    throw CompileError("kernel.cu(3): error: x is undefined", "full compiler output");
  } catch (const FailureError& e) {
    CHECK(e.failure().status == EvalStatus::compile_error);
    CHECK(std::string(e.what()) == "kernel.cu(3): error: x is undefined");
    CHECK(e.failure().log == "full compiler output");
    EvalResult r;
    e.failure().record(r);
    CHECK(r.status == EvalStatus::compile_error);
    CHECK(r.log == "kernel.cu(3): error: x is undefined\n\nfull compiler output");
  }
  // A log that says nothing more is not repeated.
  EvalResult r;
  Failure{.status = EvalStatus::compile_error, .message = "refused", .log = "refused"}.record(r);
  CHECK(r.log == "refused");
  // A run error keeps its flags for the flow (retry after out of memory, distrust the device).
  try {
    throw RunError({EvalStatus::runtime_error, "out of device memory", true, true});
  } catch (const FailureError& e) {
    CHECK(e.failure().out_of_memory);
    CHECK(e.failure().memory_corrupted);
    WorkloadResult w;
    e.failure().record(w);
    CHECK(w.status == EvalStatus::runtime_error);
    CHECK(w.message == "out of device memory");
  }
}
