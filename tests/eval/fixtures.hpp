// A small host task (Z = X + 2 Y) and candidates for it, good and bad in
// every way the evaluator must notice. Shared by the tests and the helper
// program that is SIGKILLed in the worker-lifetime test.
#pragma once

#include <string>

#include "ksearch/eval.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"

namespace ks::test {

// Workloads: "t1" (test, N = 1000: its end is not 64-byte aligned, so a
// one-element overrun lands in the canary bytes) and "b1" (benchmark,
// N = 4096). `flops` overrides the task's FLOP formula.
inline TaskSpec vadd_task(const std::string& flops = "2*N", const std::string& name = "test/vadd") {
  Json j = Json::parse(R"JSON({
    "name": "test/vadd", "languages": ["cpp"], "dims": ["N"],
    "tensors": [
      {"name": "X", "dtype": "f32", "shape": ["N"], "dist": {"kind": "normal", "std": 1}},
      {"name": "Y", "dtype": "f32", "shape": ["N"], "dist": {"kind": "uniform", "low": -1, "high": 1}},
      {"name": "Z", "dtype": "f32", "shape": ["N"], "role": "output"}
    ],
    "workloads": [
      {"name": "t1", "dims": {"N": 1000}, "seed": 5},
      {"name": "b1", "dims": {"N": 4096}, "seed": 6, "benchmark": true}
    ],
    "tolerance": {"atol": 1e-5, "rtol": 1e-5},
    "bytes": "12*N",
    "references": {"cpp": {
      "language": "cpp", "name": "reference",
      "sources": [{"path": "ref.cpp", "content": "#include <cstdint>\nvoid vadd_ref(const float* x, const float* y, float* z, std::int64_t n) {\n  for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];\n}\n"}],
      "launch_plan": {"calls": [{"fn": "vadd_ref", "args": ["X", "Y", "Z", "N"]}]}
    }}
  })JSON");
  TaskSpec t = TaskSpec::from_json(j);
  t.name = name;
  t.flops = flops;
  t.validate();
  return t;
}

// A cpp candidate calling vadd(X, Y, Z, N) with the given body; x, y, z, n in scope.
inline Solution vadd_candidate(const std::string& body, const std::string& name = "candidate") {
  Solution s;
  s.name = name;
  s.task = "test/vadd";
  s.language = Language::cpp;
  s.sources = {{"kernel.cpp",
                "#include <algorithm>\n#include <chrono>\n#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\n"
                "#include <map>\n#include <stdexcept>\n#include <thread>\n#include <vector>\n"
                "#include <fcntl.h>\n#include <sys/stat.h>\n#include <unistd.h>\n"
                "void vadd(const float* x, const float* y, float* z, std::int64_t n) {\n" +
                    body + "\n}\n"}};
  s.launch_plan = LaunchPlan::from_json(Json::obj({{"calls", Json::arr({Json::obj({{"fn", "vadd"}, {"args", Json::arr({"X", "Y", "Z", "N"})}})})}}));
  return s.finalize();
}

inline const char* kGoodBody = "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];";
inline const char* kWrongBody = "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];";
inline const char* kSegfaultBody = "*reinterpret_cast<volatile float*>(std::uintptr_t{64}) = 1.0f; (void)x; (void)y; (void)z; (void)n;";
inline const char* kEndlessBody = "volatile int spin = 1; while (spin) {} (void)x; (void)y; (void)z; (void)n;";
// Writes 64 floats past the end: through the canary bytes into the guard page.
inline const char* kFarOverrunBody = "for (std::int64_t i = 0; i < n + 64; ++i) z[i] = x[i % n] + 2.0f * y[i % n];";
// Writes one float past the end: stays inside the canary bytes when N*4 is not a multiple of 64.
inline const char* kNearOverrunBody = "for (std::int64_t i = 0; i <= n; ++i) z[i] = (i < n) ? x[i] + 2.0f * y[i] : 0.0f;";
inline const char* kModifyInputBody =
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];\n"
    "const_cast<float*>(x)[n / 2] = 0.0f;";
// Computes for the first two calls per output pointer, then returns without
// writing: passes the seeded checks; its timed calls leave the poison.
inline const char* kCachingBody =
    "static std::map<float*, int> calls;\n"
    "if (++calls[z] > 2) return;\n"
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];";
// Computes for the first two calls per output pointer, then replays a copy
// of its last result: right for the timed calls (same inputs), stale on the
// re-check's fresh inputs.
inline const char* kReplayBody =
    "static std::map<float*, int> calls;\n"
    "static std::map<float*, std::vector<float>> saved;\n"
    "if (++calls[z] > 2) { std::copy(saved[z].begin(), saved[z].end(), z); return; }\n"
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];\n"
    "saved[z].assign(z, z + n);";
// Skips its work when it sees the same inputs as on its previous call,
// trusting the output to still hold that result: passes the seeded checks
// and the re-check (fresh inputs), but its timed calls compute nothing.
inline const char* kSkipUnchangedBody =
    "static const float* last_x = nullptr;\n"
    "static float seen[4];\n"
    "bool same = x == last_x;\n"
    "for (int k = 0; k < 4 && same; ++k) same = seen[k] == x[k];\n"
    "if (same) return;\n"
    "last_x = x;\n"
    "for (int k = 0; k < 4; ++k) seen[k] = x[k];\n"
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];";
// Returns at once when the output already holds a result (no poison NaN),
// and otherwise takes at least 2 ms: timed without poisoned outputs, it
// would look thousands of times faster than it is.
inline const char* kEarlyExitBody =
    "if (!std::isnan(z[0])) return;\n"
    "std::this_thread::sleep_for(std::chrono::milliseconds(2));\n"
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];";
inline const char* kSkipLastBody = "for (std::int64_t i = 0; i + 1 < n; ++i) z[i] = x[i] + 2.0f * y[i];";
inline const char* kThrowBody = "(void)x; (void)y; (void)z; (void)n; throw std::runtime_error(\"boom from the kernel\");";
inline const char* kExitBody = "(void)x; (void)y; (void)z; (void)n; std::exit(0);";
inline const char* kChattyBody =
    "std::printf(\"KSW1 garbage on stdout from the kernel\\n\"); std::fflush(stdout);\n"
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];";

// Writes bytes that are no frame to every pipe it may write to beyond
// stdout and stderr: the worker's protocol descriptor among them.
inline const char* kProtocolGarbageBody =
    "for (int fd = 3; fd < 1024; ++fd) {\n"
    "  struct stat st;\n"
    "  if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) continue;\n"
    "  int fl = fcntl(fd, F_GETFL);\n"
    "  if (fl < 0 || (fl & O_ACCMODE) != O_WRONLY) continue;\n"
    "  if (write(fd, \"garbage!\", 8) < 0) continue;\n"
    "}\n"
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];";

// Right on the first four input sets it sees, wrong from the fifth on (t1's
// two seeds, b1's two, then b1's re-check): a kernel that is simply wrong on
// fresh inputs, not one that reuses results.
inline const char* kWrongLaterBody =
    "static int sets = 0;\n"
    "static float last = 0.0f;\n"
    "if (x[0] != last) { ++sets; last = x[0]; }\n"
    "const float k = sets >= 5 ? 1.0f : 2.0f;\n"
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + k * y[i];";
// Sleeps 50 ms per call: honest, but slow enough that the checks, the
// reference's timing and its own timing together outlast a short run timeout.
inline const char* kSlowBody =
    "std::this_thread::sleep_for(std::chrono::milliseconds(50));\n"
    "for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];";

// y = 2 x over 4 Mi floats (and an odd 1001), a CUDA reference; python
// candidates too. For the GPU tests.
inline TaskSpec gpu_scale_task() {
  Json j = Json::parse(R"JSON({
    "name": "test/scale-python-gpu", "languages": ["cuda", "python"], "dims": ["N"],
    "tensors": [
      {"name": "x", "dtype": "f32", "shape": ["N"], "dist": {"kind": "normal", "std": 1}},
      {"name": "y", "dtype": "f32", "shape": ["N"], "role": "output"}
    ],
    "workloads": [
      {"name": "odd", "dims": {"N": 1001}, "seed": 5},
      {"name": "big", "dims": {"N": 4194304}, "seed": 6, "benchmark": true}
    ],
    "tolerance": {"atol": 1e-5, "rtol": 1e-5},
    "bytes": "8*N",
    "references": {"cuda": {
      "language": "cuda", "name": "reference",
      "sources": [{"path": "k.cu", "content": "extern \"C\" __global__ void scale(const float* x, float* y, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 2.0f * x[i];\n}\n"}],
      "launch_plan": {"kernels": [{"name": "scale", "grid": ["cdiv(N, 256)"], "block": [256], "args": ["x", "y", "N"]}]}
    }}
  })JSON");
  TaskSpec t = TaskSpec::from_json(j);
  t.validate();
  return t;
}

// Fast evaluation settings for tests: a few short timed repetitions.
inline EvaluatorConfig test_config(const std::string& cache_dir) {
  EvaluatorConfig c;
  c.backend = ks::EvalBackend::host;
  c.cache_dir = cache_dir;
  c.compile_workers = 2;
  c.options.min_reps = 3;
  c.options.max_reps = 20;
  c.options.max_time_per_workload_s = 0.05;
  c.options.flush_l2 = false;
  c.options.run_timeout_s = 20;
  c.options.compile_timeout_s = 120;
  return c;
}

}  // namespace ks::test
