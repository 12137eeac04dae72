// The device and program code of the CUDA backend against a test double of
// the driver (fake_libcuda.cpp, loaded through KSEARCH_LIBCUDA): device facts
// and limits, memory, poisoning, plan binding, argument blocks, launch
// configurations (shared memory above 48 KB, clusters, template kernels) and
// the mapping of a sticky error. Cubins are real (NVRTC, sm_90a); kernels do
// not run, so results of computations are left to the GPU tests.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/cuda_backend.hpp"
#include "eval/cuda/cuda_device.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::eval;

// Mirrors the record type in fake_libcuda.cpp.
struct FakeLaunch {
  std::string kernel;
  unsigned grid[3], block[3], cluster[3];
  unsigned shared_bytes;
  bool extended;
  std::vector<std::array<unsigned char, 8>> args;
};

namespace {

struct Fake {
  std::vector<FakeLaunch>* (*launches)() = nullptr;
  void (*fail_next_sync)(CUresult) = nullptr;
};

// Points the driver loader at the fake before anything loads a driver.
const Fake& fake() {
  static const Fake f = [] {
    ::setenv("KSEARCH_LIBCUDA", KS_FAKE_LIBCUDA, 0);
    // Two Hopper GPUs and an Ampere one: the evaluator must use the first two.
    ::setenv("KSFAKE_DEVICES", "9.0,9.0,8.6", 1);
    ::setenv("KSEARCH_WORKER_ENV", "KSFAKE_DEVICES", 1);  // workers get an allowlisted environment
    // Devices compile their runtime kernels into the default cache: keep it here.
    ::setenv("KSEARCH_CACHE_DIR", test::scratch_dir("cuda_fake_default_cache").c_str(), 1);
    cuda::driver();  // loads it
    void* h = ::dlopen(KS_FAKE_LIBCUDA, RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(h != nullptr);
    Fake out;
    out.launches = reinterpret_cast<std::vector<FakeLaunch>* (*)()>(::dlsym(h, "ksfake_launches"));
    out.fail_next_sync = reinterpret_cast<void (*)(CUresult)>(::dlsym(h, "ksfake_fail_next_sync"));
    return out;
  }();
  return f;
}

template <typename T>
T param(const FakeLaunch& l, std::size_t i) {
  REQUIRE(i < l.args.size());
  T v;
  std::memcpy(&v, l.args[i].data(), sizeof v);
  return v;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Child processes of this test whose command line contains `part`.
std::vector<pid_t> children_with(const std::string& part) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(line.substr(close + 2));
    char state = 0;
    long ppid = 0;
    fields >> state >> ppid;
    if (ppid != ::getpid() || state == 'Z') continue;
    std::ifstream cmd(e.path() / "cmdline");
    std::string argv((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    std::replace(argv.begin(), argv.end(), '\0', ' ');
    if (contains(argv, part)) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

const char* kSource = R"(
extern "C" __global__ void k1(const float* x, float* y, int n, long long m, float s) {
  extern __shared__ float stage[];
  stage[threadIdx.x] = x[0];
  y[0] = stage[0] * s + n + m;
}
extern "C" __global__ void k2(float* tmp, unsigned char c) { tmp[0] = c; }
template <int B> __global__ void k3(float* y) { y[0] = B; }
)";

const char* kPlan = R"js({
  "kernels": [
    {"name": "k1", "grid": ["cdiv(N, 128)"], "block": [128], "shared_bytes": "64 * 1024",
     "args": ["x", "y", "N", "N * N", {"f32": "0.5"}]},
    {"name": "k2", "grid": [4, 2], "block": [32], "cluster": [2, 2], "args": ["tmp", 7]},
    {"name": "k3<64>", "grid": [16], "block": [64], "cluster": [16], "args": ["y"]}],
  "scratch": [{"name": "tmp", "dtype": "f32", "shape": ["N"]}]})js";

struct Loaded {
  std::unique_ptr<cuda::CudaDevice> device;
  std::unique_ptr<Program> program;
  Buffer x, y;
};

Loaded load(const char* plan) {
  fake();
  Solution s;
  s.language = Language::cuda;
  s.sources = {{"kernel.cu", kSource}};
  s.launch_plan = ks::LaunchPlan::from_json(Json::parse(plan));
  CudaCompilerOptions o;
  o.use_pch = false;
  cuda::CudaCompiler compiler(o);
  CompileRequest r;
  r.solution = s;
  r.arch = "sm_90a";
  r.cache_dir = test::scratch_dir("cuda_fake").string();
  Artifact a = compiler.compile(r);
  Loaded out;
  out.device = std::make_unique<cuda::CudaDevice>(0);
  out.program = out.device->load(a, s);
  out.x = out.device->alloc(1000 * 4);
  out.y = out.device->alloc(1000 * 4);
  return out;
}

Bindings bindings(const Loaded& l) {
  Bindings b;
  b.tensors = {{"x", l.x}, {"y", l.y}};
  b.vars = {{"N", 1000}};
  return b;
}

}  // namespace

TEST_CASE("fake driver: the device reads its facts and limits") {
  fake();
  cuda::CudaDevice dev(0);
  DeviceInfo info = dev.info();
  CHECK(info.backend == "cuda");
  CHECK(contains(info.name, "H100"));
  CHECK(info.arch == "sm_90a");
  CHECK(info.l2_bytes == 50 * 1024 * 1024);
  CHECK(info.memory_bytes == (80ll << 30));
  CHECK(info.peak_bytes_per_s == doctest::Approx(3.352e12).epsilon(0.01));
  CHECK(info.peak_flops == doctest::Approx(8192.0 * 132 * 1.98e9));
  CHECK(contains(dev.peaks().source, "driver attributes"));
  CHECK(dev.limits().max_shared_per_block_optin == 232448);
  CHECK(dev.limits().cluster_launch);
  CHECK(dev.limits().max_cluster_size == 16);
  CHECK(cuda_device_arch(0) == "sm_90a");
  std::string why;
  CHECK(cuda_probe(&why));
  CHECK_THROWS_WITH_AS(cuda::CudaDevice(3), doctest::Contains("CUDA device 3 does not exist; 3 devices are visible"),
                       Error);
  CHECK(cuda_device_count() == 3);
  CHECK(cuda_device_arch(2) == "sm_86");
}

TEST_CASE("fake driver: memory moves, poisons, and reports exhaustion") {
  fake();
  cuda::CudaDevice dev(0);
  Buffer a = dev.alloc(64), b = dev.alloc(64);
  std::vector<unsigned char> in(64), out(64, 0);
  for (int i = 0; i < 64; ++i) in[i] = static_cast<unsigned char>(i);
  dev.upload(a, in.data(), 64);
  dev.copy(b, a, 64);
  dev.download(out.data(), b, 64);
  CHECK(out == in);
  dev.poison(b, 64);
  dev.download(out.data(), b, 64);
  CHECK(std::all_of(out.begin(), out.end(), [](unsigned char c) { return c == 0xFF; }));
  CHECK_THROWS_AS(dev.upload(a, in.data(), 65), Error);
  CHECK_FALSE(dev.alloc(0));
  try {
    dev.alloc(100ull << 30);
    FAIL("the fake has 64 GiB");
  } catch (const RunError& e) {
    CHECK(e.failure().status == EvalStatus::runtime_error);
    CHECK(contains(e.what(), "out of device memory: cannot allocate 100.00 GiB"));
    CHECK(contains(e.what(), "1.00 GiB free of 80.00 GiB"));
  }
  dev.free(a);
  dev.free(b);
}

TEST_CASE("fake driver: a program binds its plan and launches it as written") {
  Loaded l = load(kPlan);
  fake().launches()->clear();
  l.program->bind(bindings(l));
  l.program->launch();
  auto& launches = *fake().launches();
  REQUIRE(launches.size() == 3);

  const FakeLaunch& k1 = launches[0];
  CHECK(k1.kernel == "k1");
  CHECK(k1.grid[0] == 8);
  CHECK(k1.block[0] == 128);
  CHECK(k1.shared_bytes == 64 * 1024);  // launched, so the kernel's limit was raised
  CHECK_FALSE(k1.extended);
  CHECK(param<CUdeviceptr>(k1, 0) == l.x.addr);
  CHECK(param<CUdeviceptr>(k1, 1) == l.y.addr);
  CHECK(param<int>(k1, 2) == 1000);
  CHECK(param<long long>(k1, 3) == 1000000);
  CHECK(param<float>(k1, 4) == 0.5f);

  const FakeLaunch& k2 = launches[1];
  CHECK(k2.kernel == "k2");
  CHECK(k2.extended);
  CHECK(k2.grid[0] == 4);
  CHECK(k2.grid[1] == 2);
  CHECK(k2.cluster[0] == 2);
  CHECK(k2.cluster[1] == 2);
  CHECK(param<unsigned char>(k2, 1) == 7);
  // The scratch buffer is allocated and poisoned before the first run.
  auto* tmp = reinterpret_cast<const unsigned char*>(param<CUdeviceptr>(k2, 0));
  REQUIRE(tmp != nullptr);
  CHECK(std::all_of(tmp, tmp + 4000, [](unsigned char c) { return c == 0xFF; }));

  const FakeLaunch& k3 = launches[2];
  CHECK(k3.kernel == "_Z2k3ILi64EEvPf");  // the template by its lowered name
  CHECK(k3.cluster[0] == 16);             // launched, so non-portable clusters were allowed
  CHECK(param<CUdeviceptr>(k3, 0) == l.y.addr);

  CHECK(l.program->timed_launch() == doctest::Approx(0.5));
  CHECK(launches.size() == 6);
  std::memset(const_cast<unsigned char*>(tmp), 0, 16);
  l.program->poison_scratch();
  CHECK(tmp[0] == 0xFF);
}

TEST_CASE("fake driver: the plan is checked for the workload when binding") {
  Loaded l = load(R"js({"kernels": [{"name": "k1", "grid": [1], "block": [128], "shared_bytes": "300 * 1024",
                                       "args": ["x", "y", "N", "N", {"f32": "1"}]}]})js");
  try {
    l.program->bind(bindings(l));
    FAIL("too much shared memory");
  } catch (const RunError& e) {
    CHECK(e.failure().status == EvalStatus::runtime_error);
    CHECK(contains(e.what(), "exceeds the device's limit of 232448 bytes per block"));
  }
  CHECK_THROWS_AS(l.program->launch(), Error);  // nothing is bound
}

TEST_CASE("fake driver: a fault names its kernel and leaves the device unusable") {
  Loaded l = load(kPlan);
  l.program->bind(bindings(l));
  fake().launches()->clear();
  // The first run after bind() waits after each kernel: the fault is k1's.
  fake().fail_next_sync(CUDA_ERROR_ILLEGAL_ADDRESS);
  try {
    l.program->launch();
    FAIL("the fault should surface");
  } catch (const RunError& e) {
    CHECK(e.failure().status == EvalStatus::crashed);
    CHECK(contains(e.what(), "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"));
    CHECK(contains(e.what(), "while running kernel `k1`"));
  }
  CHECK(fake().launches()->size() == 1);  // k2 and k3 never started
  CHECK_FALSE(l.device->usable());
  try {
    l.device->alloc(16);
    FAIL("the context is unusable");
  } catch (const RunError& e) {
    CHECK(e.failure().status == EvalStatus::crashed);
    CHECK(contains(e.what(), "unusable after an earlier error"));
  }
}

TEST_CASE("fake driver: later runs are queued, and a fault then names every kernel") {
  Loaded l = load(kPlan);
  l.program->bind(bindings(l));
  l.program->launch();
  l.program->synchronize();
  fake().fail_next_sync(CUDA_ERROR_ILLEGAL_ADDRESS);
  l.program->launch();  // queued without waiting
  try {
    l.program->synchronize();
    FAIL("the fault should surface");
  } catch (const RunError& e) {
    CHECK(e.failure().status == EvalStatus::crashed);
    CHECK(contains(e.what(), "while running kernel(s) `k1`, `k2`, `k3<64>`"));
  }
}

TEST_CASE("fake driver: a write past the end of a tensor or scratch buffer is found in its redzone") {
  Loaded l = load(kPlan);
  l.device->label(l.y, "output \"y\"");
  l.program->bind(bindings(l));
  fake().launches()->clear();
  l.program->launch();
  l.program->synchronize();  // nothing written out of bounds: no complaint
  auto* tmp = reinterpret_cast<unsigned char*>(param<CUdeviceptr>(fake().launches()->at(1), 0));

  // The fake's device memory is host memory: play a kernel whose float4
  // store at the end writes 12 bytes past y's 4000.
  auto* y = reinterpret_cast<unsigned char*>(l.y.addr);
  std::memset(y + 4000, 0, 12);
  try {
    l.program->synchronize();
    FAIL("the overrun should be reported");
  } catch (const RunError& e) {
    CHECK(e.failure().status == EvalStatus::runtime_error);
    CHECK(contains(e.what(), "wrote past the end of output \"y\" (12 bytes beyond its 4000 bytes)"));
    CHECK(contains(e.what(), "`k1`"));
  }
  std::memset(y + 4000, cuda::CudaDevice::kRedzoneByte, 12);
  l.program->synchronize();

  tmp[4000 + 100] = 0;  // scratch "tmp" holds N = 1000 floats
  CHECK_THROWS_WITH_AS(l.program->synchronize(),
                       doctest::Contains("wrote past the end of scratch \"tmp\" (101 bytes beyond its 4000 bytes)"),
                       RunError);
  // The device stays usable: an overrun found this way is no sticky error
  // (its memory is no longer trusted, though: the worker is replaced).
  bool threw = false;
  try {
    l.program->synchronize();
  } catch (const RunError& e) {
    threw = true;
    CHECK(e.failure().memory_corrupted);
  }
  CHECK(threw);
  CHECK(l.device->usable());
  Buffer b = l.device->alloc(16);
  CHECK(b);
  l.device->free(b);
}

TEST_CASE("fake driver: inputs and comparisons launch the runtime kernels with their arguments") {
  fake();
  cuda::CudaDevice dev(0);
  Buffer a = dev.alloc(1000 * 4), b = dev.alloc(1000 * 4);
  fake().launches()->clear();
  dev.generate(a, DType::f32, 1000, Distribution::Kind::uniform, -1.0, 2.0, 5, 9);
  auto& launches = *fake().launches();
  REQUIRE(launches.size() == 1);
  const FakeLaunch& g = launches[0];
  CHECK(g.kernel == "ks_generate_f32");
  CHECK(g.grid[0] == 4);
  CHECK(g.block[0] == 256);
  CHECK(param<CUdeviceptr>(g, 0) == a.addr);
  CHECK(param<unsigned long long>(g, 1) == 1000);
  CHECK(param<int>(g, 2) == static_cast<int>(Distribution::Kind::uniform));
  CHECK(param<double>(g, 3) == -1.0);
  CHECK(param<double>(g, 4) == 2.0);
  CHECK(param<unsigned long long>(g, 5) == 5);
  CHECK(param<unsigned long long>(g, 6) == 9);

  Tolerance tol;
  tol.atol = 1e-5;
  tol.rtol = 1e-3;
  tol.nan_policy = Tolerance::NanPolicy::forbid;
  CompareStats st = dev.compare(a, b, DType::bf16, 1500, tol);
  REQUIRE(launches.size() == 2);
  const FakeLaunch& c = launches[1];
  CHECK(c.kernel == "ks_compare_bf16");
  CHECK(param<CUdeviceptr>(c, 0) == a.addr);
  CHECK(param<CUdeviceptr>(c, 1) == b.addr);
  CHECK(param<unsigned long long>(c, 2) == 1500);
  CHECK(param<double>(c, 3) == 1e-5);
  CHECK(param<double>(c, 4) == 1e-3);
  CHECK(param<int>(c, 5) == 0);  // Tolerance::Rule::ref_relative
  CHECK(param<int>(c, 6) == 1);  // forbid NaN and infinity
  // Nothing ran, so the result block is as initialised: no mismatch found.
  CHECK(st.count == 1500);
  CHECK(st.mismatches == 0);
  CHECK(st.first_bad_index == -1);
  CHECK_THROWS_AS(dev.compare(a, b, DType::f64, 1000, tol), Error);  // 8000 bytes > 4000
  dev.flush_cache();  // a buffer of twice the L2, written
  dev.free(a);
  dev.free(b);
}

TEST_CASE("fake driver: the softmax example goes through the worker processes end to end") {
  // Plumbing only: kernels do not run under the fake, so this checks that
  // compile worker, run worker, device and programs work together (plans
  // bind, runs are timed, results come back), not what the kernels compute.
  fake();
  TaskSpec spec = load_task_file(test::source_dir() / "examples" / "tasks" / "softmax" / "task.json");
  SpecTask task(spec);
  EvaluatorConfig cfg;
  cfg.backend = ks::EvalBackend::cuda;
  cfg.cache_dir = test::scratch_dir("cuda_fake_e2e_cache");
  cfg.options.max_time_per_workload_s = 0.05;
  auto ev = make_evaluator(cfg);
  CHECK(ev->device().arch == "sm_90a");
  // Found by the driver's device count; the sm_86 device is skipped.
  CHECK(ev->device().count == 2);
  Solution start = spec.starting_points.at(0);
  EvalResult r = ev->evaluate(task, start.finalize());
  std::string messages = r.log;
  for (const auto& w : r.workloads) messages += "\n" + w.name + ": " + w.message;
  INFO(messages);
  CHECK(r.status == EvalStatus::passed);
  REQUIRE(r.workloads.size() == spec.workloads.size());
  for (const auto& w : r.workloads)
    if (w.benchmark) CHECK(w.timing.median_ms == doctest::Approx(0.5));  // the fake's event time
  CHECK(r.metrics.get_int("builds") == 1);
  CHECK(r.metrics.get_int("gpus_skipped") == 1);
  // The run workers' own kernels were compiled by the evaluator into
  // <cache>/cuda-runtime (where a sandboxed run worker, which may not write
  // it, reads them; no compile worker may write it): the same request finds
  // them there.
  CudaCompilerOptions o;
  o.arch = "sm_90a";
  o.cache_dir = (cfg.cache_dir / "cuda-runtime").string();
  o.use_pch = false;
  CompileRequest runtime = cuda_runtime_kernels_request("sm_90a");
  CHECK(make_cuda_compiler(o)->compile(runtime).cache_hit);
}

TEST_CASE("fake driver: a compile worker killed while idle is replaced, and NVRTC cancels itself at the limit") {
  fake();
  TaskSpec spec = load_task_file(test::source_dir() / "examples" / "tasks" / "softmax" / "task.json");
  SpecTask task(spec);
  EvaluatorConfig cfg;
  cfg.backend = ks::EvalBackend::cuda;
  cfg.cache_dir = test::scratch_dir("cuda_fake_compile_service");
  cfg.compile_workers = 1;  // one place: a place lost for good would block every later compilation
  cfg.options.max_time_per_workload_s = 0.05;
  cfg.options.run_benchmarks = false;
  auto ev = make_evaluator(cfg);
  Solution start = spec.starting_points.at(0);
  REQUIRE(ev->evaluate(task, start.finalize()).status == EvalStatus::passed);

  std::vector<pid_t> compilers = children_with("--role compile");
  REQUIRE(compilers.size() == 1);
  ::kill(compilers[0], SIGKILL);
  // Until it is a zombie: dead, not yet reaped by the evaluator.
  auto state = [](pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
  };
  for (int i = 0; i < 6000 && state(compilers[0]) != 'Z'; ++i)  // at once; 60 s when the machine is busy
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(state(compilers[0]) == 'Z');
  Solution again = start;
  again.sources[0].content += "\n// a different candidate\n";
  for (int round = 0; round < 2; ++round) {  // the second would wait forever if the first lost its place
    CAPTURE(round);
    EvalResult r = ev->evaluate(task, again.finalize());
    INFO(r.log);
    CHECK(r.status == EvalStatus::passed);
  }

  // Far too short for these headers: NVRTC's own cancellation reports it,
  // well before the parent would kill the compiler (limit + grace).
  ev->options().compile_timeout_s = 0.05;
  Solution heavy = start;
  heavy.sources[0].content = "#include <cuda_bf16.h>\n#include <mma.h>\n#include <cuda/pipeline>\n"
                             "#include <cooperative_groups.h>\n" + heavy.sources[0].content;
  EvalResult slow = ev->evaluate(task, heavy.finalize());
  INFO(slow.log);
  CHECK(slow.status == EvalStatus::compile_error);
  // NVRTC's own cancellation normally reports it; on a machine so busy that
  // its check comes later than the parent's grace period, the parent's kill
  // does. Either way the limit is named: which one wins is a matter of speed.
  CHECK((contains(slow.log, "compilation exceeded its time limit of 0.1 s") ||
         contains(slow.log, "compilation did not finish within 0.05 s")));
}
