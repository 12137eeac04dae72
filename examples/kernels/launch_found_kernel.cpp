// Finds a kernel, then uses it the way an inference engine would: in the
// program's own CUDA context, on its own stream, with its own buffers, for
// the shapes it meets.
//
//   launch_found_kernel [--run-dir DIR] [--rounds N] [--solution FILE] [--self-test]
//
// 1. Searches the softmax example task with the tune strategy (no LLM, so no
//    API key): the task's tunable starting kernel, its BLOCK and VEC values
//    searched by the tuner, per-shape values where a shape prefers its own.
// 2. Creates a context and a stream of its own and loads the best kernel
//    into that context (ks::abi::Kernel::from_result: NVRTC, the evaluator's
//    options and cubin cache).
// 3. For several shapes (the task's workloads, whose tuned values the
//    kernel carries, and shapes no workload has), fills its own device
//    buffers, launches the kernel on its stream, copies the output back and
//    checks it against softmax computed here on the CPU, with the task's
//    tolerance (|y - ref| <= 1e-7 + 1e-4 |ref|).
// 4. With --solution FILE, does the same for a solution file of the task
//    (tests/fixtures/kernels/softmax_variants.json: a plan with variants per
//    row width, so each variant runs).
// --self-test adds the checks a test needs: the run folder loads the same
// kernel, launches from two threads on two streams at once, and a launch
// from a thread where another context is current is refused.
//
// Exit status: 0 when every output matched, 1 otherwise, 77 when there is no
// GPU here (the test that runs this program is then skipped).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cuda_driver.hpp"
#include "ksearch/ksearch.hpp"

namespace {

struct Shape {
  std::int64_t rows, cols;
};

// The task's workloads (their tuned values apply) and two shapes no workload has.
const Shape kShapes[] = {{1, 1},       {3, 1000},    {5, 33333},  {16, 4096}, {4096, 1024},
                         {1024, 8192}, {256, 32768}, {32768, 256}, {7, 3000},  {300, 20000}};

void cpu_softmax(const std::vector<float>& x, std::vector<double>& y, std::int64_t rows, std::int64_t cols) {
  y.resize(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[static_cast<std::size_t>(r * cols)];
    double m = -INFINITY, s = 0;
    for (std::int64_t c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(xr[c]));
    for (std::int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<double>(xr[c]) - m);
    for (std::int64_t c = 0; c < cols; ++c)
      y[static_cast<std::size_t>(r * cols + c)] = std::exp(static_cast<double>(xr[c]) - m) / s;
  }
}

// The value of "key": in a JSON text, for the printout.
std::string field(const std::string& json, const std::string& key) {
  auto p = json.find("\"" + key + "\":");
  if (p == std::string::npos) return "?";
  p += key.size() + 3;
  auto e = p;
  int depth = 0;
  while (e < json.size() && (depth > 0 || (json[e] != ',' && json[e] != '}'))) {
    if (json[e] == '[' || json[e] == '{') ++depth;
    if (json[e] == ']' || json[e] == '}') --depth;
    ++e;
  }
  return json.substr(p, e - p);
}

class Program {
 public:
  explicit Program(example::Driver& cu) : cu_(cu) {
    CUdevice dev = 0;
    cu_.check(cu_.cuDeviceGet(&dev, 0), "cuDeviceGet");
    char name[256] = {};
    cu_.cuDeviceGetName(name, sizeof name - 1, dev);
    // A context of its own where the driver can make one; else the device's primary one.
    if (cu_.cuCtxCreate_v4 && cu_.cuCtxCreate_v4(&ctx_, nullptr, 0, dev) == CUDA_SUCCESS) {
      own_ctx_ = true;
    } else {
      cu_.check(cu_.cuDevicePrimaryCtxRetain(&ctx_, dev), "cuDevicePrimaryCtxRetain");
    }
    cu_.check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    cu_.check(cu_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    std::printf("device: %s, %s context, a stream of its own\n", name, own_ctx_ ? "its own" : "the primary");
  }
  ~Program() {
    cu_.cuStreamDestroy(stream_);
    if (own_ctx_) cu_.cuCtxDestroy(ctx_);
  }
  CUcontext context() const { return ctx_; }
  CUstream stream() const { return stream_; }

  // Runs `k` for one shape on `stream`; true when the output matches the CPU's.
  bool check_shape(ks::abi::Kernel& k, const Shape& s, CUstream stream, bool print = true) {
    const std::size_t n = static_cast<std::size_t>(s.rows * s.cols);
    std::vector<float> x(n), y(n, NAN);
    std::mt19937_64 rng(static_cast<std::uint64_t>(s.rows * 1000003 + s.cols));
    std::normal_distribution<float> dist(0.0f, 2.0f);
    for (auto& v : x) v = dist(rng);
    CUdeviceptr dx = 0, dy = 0;
    cu_.check(cu_.cuMemAlloc(&dx, n * sizeof(float)), "cuMemAlloc");
    cu_.check(cu_.cuMemAlloc(&dy, n * sizeof(float)), "cuMemAlloc");
    cu_.check(cu_.cuMemcpyHtoDAsync(dx, x.data(), n * sizeof(float), stream), "cuMemcpyHtoDAsync");
    k.launch({{"R", s.rows}, {"C", s.cols}},
             {{"x", static_cast<std::uint64_t>(dx), n * sizeof(float)},
              {"y", static_cast<std::uint64_t>(dy), n * sizeof(float)}},
             stream);
    cu_.check(cu_.cuMemcpyDtoHAsync(y.data(), dy, n * sizeof(float), stream), "cuMemcpyDtoHAsync");
    cu_.check(cu_.cuStreamSynchronize(stream), "cuStreamSynchronize");
    cu_.cuMemFree(dx);
    cu_.cuMemFree(dy);
    std::vector<double> ref;
    cpu_softmax(x, ref, s.rows, s.cols);
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double err = std::fabs(static_cast<double>(y[i]) - ref[i]);
      if (!(err <= 1e-7 + 1e-4 * std::fabs(ref[i]))) ++bad;  // NaN counts as bad
      if (err > worst || std::isnan(err)) worst = err;
    }
    if (print) {
      std::string plan = k.resolve({{"R", s.rows}, {"C", s.cols}});
      std::printf("  %6lld x %-6lld variant %-2s params %-22s %-9s max |err| %.2e  %s\n",
                  static_cast<long long>(s.rows), static_cast<long long>(s.cols), field(plan, "variant").c_str(),
                  field(plan, "params").c_str(), field(plan, "workload").c_str(), worst,
                  bad ? "MISMATCH" : "ok");
    }
    return bad == 0;
  }

  bool check_all(ks::abi::Kernel& k) {
    bool ok = true;
    for (const auto& s : kShapes) ok = check_shape(k, s, stream_) && ok;
    return ok;
  }

 private:
  example::Driver& cu_;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  bool own_ctx_ = false;
};

int run(int argc, char** argv) {
  std::string run_dir, solution;
  int rounds = 6;
  bool self_test = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--run-dir" && i + 1 < argc) run_dir = argv[++i];
    else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--solution" && i + 1 < argc) solution = argv[++i];
    else if (a == "--self-test") self_test = true;
    else {
      std::fprintf(stderr, "usage: launch_found_kernel [--run-dir DIR] [--rounds N] [--solution FILE] [--self-test]\n");
      return 2;
    }
  }
  example::Driver cu;
  std::string why;
  if (!cu.open(&why)) {
    std::printf("skipped: %s\n", why.c_str());
    return 77;
  }

  // 1. The search: no LLM, the tune strategy on the task's starting kernel.
  ks_search_options o = ks::abi::search_options();
  o.task = KS_EXAMPLE_SOFTMAX_TASK;
  o.llm.source = KS_LLM_OFFLINE;  // with KS_STRATEGY_AUTO: the tune strategy
  o.budget.max_rounds = rounds;
  o.eval.timing_cap_s = 0.5;
  if (!run_dir.empty()) o.run_dir = run_dir.c_str();
  ks::abi::Result result = ks::abi::search(o);
  if (!result.has_best()) {
    std::fprintf(stderr, "the search found no passing kernel (%s)\n", result.stop_reason().c_str());
    return 1;
  }
  std::printf("search: %d rounds, best %s at %.4f ms (%.2fx the reference), run folder %s\n", result.rounds(),
              result.best_solution_id().c_str(), result.best_latency_ms(), result.best_speedup(),
              result.run_dir().c_str());

  // 2. The program's own context and stream; the kernel goes into that context.
  Program prog(cu);
  ks::abi::Kernel k = ks::abi::Kernel::from_result(result);
  std::printf("loaded %s for %s (%zu module(s): one per tuned parameter set)\n", k.solution_id().c_str(),
              k.arch().c_str(), k.module_count());

  // 3. Its buffers, its stream, several shapes.
  bool ok = prog.check_all(k);

  // 4. A solution with a variant per row width.
  if (!solution.empty()) {
    ks::abi::Kernel v = ks::abi::Kernel::from_file(solution, KS_EXAMPLE_SOFTMAX_TASK);
    std::printf("loaded %s from %s (%zu module(s))\n", v.solution_id().c_str(), solution.c_str(), v.module_count());
    ok = prog.check_all(v) && ok;
    if (self_test) {
      // Every variant of its plan ran above.
      bool seen[3] = {false, false, false};
      for (const auto& s : kShapes) {
        std::string var = field(v.resolve({{"R", s.rows}, {"C", s.cols}}), "variant");
        seen[var == "-1" ? 0 : var == "0" ? 1 : 2] = true;
      }
      if (!(seen[0] && seen[1] && seen[2])) {
        std::fprintf(stderr, "not every variant of %s ran\n", solution.c_str());
        ok = false;
      }
    }
  }

  if (self_test) {
    // The run folder gives the same kernel.
    ks::abi::Kernel again = ks::abi::Kernel::from_run(result.run_dir());
    if (again.solution_id() != k.solution_id()) {
      std::fprintf(stderr, "the run folder's best (%s) is not the result's (%s)\n", again.solution_id().c_str(),
                   k.solution_id().c_str());
      ok = false;
    }
    ok = prog.check_shape(again, {4096, 1024}, prog.stream()) && ok;

    // Two threads, two streams, one kernel, at once.
    CUstream second = nullptr;
    cu.check(cu.cuStreamCreate(&second, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    bool ok_a = false, ok_b = false;
    std::thread other([&] {
      cu.check(cu.cuCtxSetCurrent(prog.context()), "cuCtxSetCurrent");
      ok_b = prog.check_shape(k, {2048, 2048}, second, false);
    });
    ok_a = prog.check_shape(k, {512, 4096}, prog.stream(), false);
    other.join();
    cu.cuStreamDestroy(second);
    std::printf("two threads on two streams at once: %s\n", ok_a && ok_b ? "ok" : "MISMATCH");
    ok = ok && ok_a && ok_b;

    // Another context current: refused, not launched in the wrong place.
    cu.check(cu.cuCtxSetCurrent(nullptr), "cuCtxSetCurrent");
    try {
      k.launch({{"R", 1}, {"C", 1}}, {{"x", 1}, {"y", 1}});
      std::fprintf(stderr, "a launch without the kernel's context was accepted\n");
      ok = false;
    } catch (const ks::abi::Error& e) {
      std::printf("without its context: refused (%s)\n", ks_status_string(e.status()));
      ok = ok && e.status() == KS_E_STATE;
    }
    cu.check(cu.cuCtxSetCurrent(prog.context()), "cuCtxSetCurrent");
  }
  std::printf(ok ? "every output matched the CPU reference\n" : "MISMATCHES: see above\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_found_kernel: %s\n", e.what());
    return 1;
  }
}
