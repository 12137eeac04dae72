// Found kernels in a host program's own context (ks::Kernel), against the
// test double of the driver (fake_libcuda.cpp): the modules are real cubins
// (NVRTC, sm_90a) and every launch is recorded with its argument block, so
// the choice of variant, tuned values, grid, block, device pointers and
// scratch buffers is checked here; what the kernels compute is left to
// test_kernel_gpu.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "eval/cuda/cuda_api.hpp"
#include "ksearch/error.hpp"
#include "ksearch/kernel.hpp"
#include "support/test_util.hpp"

using namespace ks;

// Mirrors the record type in fake_libcuda.cpp.
struct FakeLaunch {
  std::string kernel;
  unsigned grid[3], block[3], cluster[3];
  unsigned shared_bytes;
  bool extended;
  std::vector<std::array<unsigned char, 8>> args;
};

namespace {

std::vector<FakeLaunch>& launches() {
  static std::vector<FakeLaunch>* list = [] {
    ::setenv("KSEARCH_LIBCUDA", KS_FAKE_LIBCUDA, 0);
    ::setenv("KSFAKE_DEVICES", "9.0", 1);
    eval::cuda::driver();  // loads it
    void* h = ::dlopen(KS_FAKE_LIBCUDA, RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(h != nullptr);
    auto fn = reinterpret_cast<std::vector<FakeLaunch>* (*)()>(::dlsym(h, "ksfake_launches"));
    REQUIRE(reinterpret_cast<void*>(fn) != nullptr);
    return fn();
  }();
  return *list;
}

template <typename T>
T arg(const FakeLaunch& l, std::size_t i) {
  REQUIRE(i < l.args.size());
  T v;
  std::memcpy(&v, l.args[i].data(), sizeof v);
  return v;
}

// The host program's side: its own context, its own buffers.
struct Host {
  const eval::cuda::DriverApi& api = eval::cuda::driver();
  CUcontext ctx = nullptr;
  Host() {
    launches();
    REQUIRE(api.cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    REQUIRE(api.cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  }
  ~Host() { api.cuCtxSetCurrent(nullptr); }
  std::uint64_t alloc(std::size_t bytes) {
    CUdeviceptr p = 0;
    REQUIRE(api.cuMemAlloc(&p, bytes) == CUDA_SUCCESS);
    ptrs.push_back(p);
    return p;
  }
  std::vector<CUdeviceptr> ptrs;
};

KernelSource variants_fixture() {
  KernelSource s;
  s.solution_file = (test::source_dir() / "tests/fixtures/kernels/softmax_variants.json");
  s.task = (test::source_dir() / "examples/tasks/softmax").string();
  return s;
}

KernelOptions options() {
  KernelOptions o;
  o.cache_dir = test::scratch_dir("host_kernel_cache");
  return o;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a kernel loads only into a current context") {
  launches();
  eval::cuda::driver().cuCtxSetCurrent(nullptr);
  try {
    Kernel::load(variants_fixture(), options());
    FAIL("loaded without a context");
  } catch (const Error& e) {
    CHECK(e.status() == Status::state);
    CHECK(contains(e.what(), "no CUDA context is current"));
  }
}

TEST_CASE("launches follow the plan's variant and tuned values for the caller's dimensions") {
  Host host;
  auto k = Kernel::load(variants_fixture(), options());
  CHECK(k->arch() == "sm_90a");  // the current context's device
  CHECK(k->module_count() == 3);
  const std::uint64_t x = host.alloc(256 * 32768 * 4), y = host.alloc(256 * 32768 * 4);
  void* stream = reinterpret_cast<void*>(0x5);

  SUBCASE("wide rows: two kernels with the kernel's own scratch, BLOCK of r256_c32768") {
    launches().clear();
    k->launch({{{"R", 256}, {"C", 32768}}, {{"x", {x, 0}}, {"y", {y, 0}}}, {}, stream, ""});
    REQUIRE(launches().size() == 2);
    const FakeLaunch& a = launches()[0];
    const FakeLaunch& b = launches()[1];
    CHECK(a.kernel == "row_max");
    CHECK(a.grid[0] == 256);
    CHECK(a.block[0] == 512);
    CHECK(arg<std::uint64_t>(a, 0) == x);
    const auto rmax = arg<std::uint64_t>(a, 1);
    CHECK(rmax != 0);
    CHECK(rmax != x);
    CHECK(rmax != y);
    CHECK(arg<int>(a, 2) == 256);
    CHECK(arg<int>(a, 3) == 32768);
    CHECK(b.kernel == "softmax_given_max");
    CHECK(arg<std::uint64_t>(b, 0) == x);
    CHECK(arg<std::uint64_t>(b, 1) == rmax);
    CHECK(arg<std::uint64_t>(b, 2) == y);

    // A scratch buffer of the caller's replaces the kernel's own.
    const std::uint64_t mine = host.alloc(1024);
    launches().clear();
    k->launch({{{"R", 256}, {"C", 32768}}, {{"x", {x, 0}}, {"y", {y, 0}}, {"rmax", {mine, 1024}}}, {}, stream, ""});
    REQUIRE(launches().size() == 2);
    CHECK(arg<std::uint64_t>(launches()[0], 1) == mine);
  }

  SUBCASE("narrow rows: one warp per row") {
    launches().clear();
    k->launch({{{"R", 4096}, {"C", 1024}}, {{"x", {x, 0}}, {"y", {y, 0}}}, {}, stream, ""});
    REQUIRE(launches().size() == 1);
    CHECK(launches()[0].kernel == "softmax_warp");
    CHECK(launches()[0].grid[0] == 512);
    CHECK(launches()[0].block[0] == 256);
  }

  SUBCASE("other widths: the top-level plan, with per-shape or general values") {
    launches().clear();
    k->launch({{{"R", 1024}, {"C", 8192}}, {{"x", {x, 0}}, {"y", {y, 0}}}, {}, stream, ""});
    k->launch({{{"R", 7}, {"C", 3000}}, {{"x", {x, 0}}, {"y", {y, 0}}}, {}, stream, ""});
    REQUIRE(launches().size() == 2);
    CHECK(launches()[0].kernel == "softmax_rows");
    CHECK(launches()[0].block[0] == 128);  // r1024_c8192's value
    CHECK(launches()[1].block[0] == 256);  // the solution's value
    CHECK(launches()[1].grid[0] == 7);
  }

  SUBCASE("mistakes are named, and nothing is launched") {
    launches().clear();
    auto fails = [&](const KernelLaunch& l, const std::string& words, Status status = Status::invalid_argument) {
      try {
        k->launch(l);
        FAIL("launched: " << words);
      } catch (const Error& e) {
        CHECK(e.status() == status);
        CHECK_MESSAGE(contains(e.what(), words), e.what());
      }
    };
    fails({{{"R", 4}, {"C", 100}}, {{"x", {x, 0}}}, {}, stream, ""}, "tensor \"y\", which has no device pointer");
    fails({{{"R", 4}, {"C", 100}}, {{"x", {x, 100}}, {"y", {y, 0}}}, {}, stream, ""},
          "tensor \"x\" needs 1600 bytes for these dimensions, but its buffer has 100");
    fails({{{"R", 4}}, {{"x", {x, 0}}, {"y", {y, 0}}}, {}, stream, ""}, "dimension \"C\" is missing");
    host.api.cuCtxSetCurrent(nullptr);
    fails({{{"R", 4}, {"C", 100}}, {{"x", {x, 0}}, {"y", {y, 0}}}, {}, stream, ""}, "not the one the kernel was loaded into",
          Status::state);
    host.api.cuCtxSetCurrent(host.ctx);
    CHECK(launches().empty());
  }
  for (auto p : host.ptrs) host.api.cuMemFree(p);
}

TEST_CASE("the tuned starting point of the softmax task resolves as the evaluator runs it") {
  Host host;
  KernelSource s;
  s.task = (test::source_dir() / "examples/tasks/softmax").string();
  s.solution_text = R"({"name": "start", "language": "cuda",
    "sources": [{"path": "kernel.cu", "content": "extern \"C\" __global__ void softmax_online(const float* x, float* y, int R, int C) {}"}],
    "launch_plan": {"kernels": [{"name": "softmax_online", "grid": ["R"], "block": ["BLOCK"], "args": ["x", "y", "R", "C"]}]},
    "params": {"space": {"BLOCK": {"values": [128, 256]}}, "values": {"BLOCK": 128}}})";
  auto k = Kernel::load(s, options());
  ResolvedKernelPlan p = k->resolve({{{"R", 3}, {"C", 1000}}, {}, {}, nullptr, ""});
  CHECK(p.variant == -1);
  CHECK(p.workload.empty());
  CHECK(p.params.at("BLOCK") == 128);
  REQUIRE(p.launches.size() == 1);
  CHECK(p.launches[0].grid[0] == 3);
  CHECK(p.launches[0].block[0] == 128);
}

TEST_CASE("a parameter set that does not compile leaves no module of the others loaded") {
  Host host;
  void* h = ::dlopen(KS_FAKE_LIBCUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(h != nullptr);
  auto live = reinterpret_cast<int (*)()>(::dlsym(h, "ksfake_live_modules"));
  REQUIRE(reinterpret_cast<void*>(live) != nullptr);
  // The fixture's kernel with BLOCK 512 refused: the sets 128 and 256 load first.
  const auto dir = test::scratch_dir("host_kernel_partial");
  const auto fixtures = test::source_dir() / "tests/fixtures/kernels";
  std::filesystem::copy_file(fixtures / "softmax_variants.json", dir / "softmax_variants.json");
  {
    std::ifstream in(fixtures / "softmax_variants.cu");
    std::ofstream out(dir / "softmax_variants.cu");
    out << "#if BLOCK == 512\n#error BLOCK 512 refused by the test\n#endif\n" << in.rdbuf();
  }
  KernelSource s = variants_fixture();
  s.solution_file = dir / "softmax_variants.json";
  const int before = live();
  try {
    Kernel::load(s, options());
    FAIL("a solution with a set that does not compile loaded");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "BLOCK 512 refused"));
  }
  CHECK(live() == before);
}
