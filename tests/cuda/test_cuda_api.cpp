// Loading CUDA at run time: a machine without a driver (or with the
// toolkit's stub driver) gets Status::no_device and a reason, never a loader
// failure; NVRTC and the toolkit headers are found.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "eval/cuda/cublaslt.hpp"
#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/cuda_backend.hpp"
#include "eval/cuda/cuda_device.hpp"
#include "ksearch/error.hpp"

using namespace ks;
using namespace ks::eval;

namespace {

Status status_of(const std::function<void()>& fn, std::string* message) {
  try {
    fn();
  } catch (const Error& e) {
    *message = e.what();
    return e.status();
  }
  return Status::ok;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cuda api: the probe gives a reason when no device is usable") {
  std::string why;
  bool ok = cuda_probe(&why);
  if (ok) {
    MESSAGE("a CUDA device is present: " << cuda::driver().device_count << " device(s)");
    CHECK(cuda::driver().device_count > 0);
    return;
  }
  CHECK_FALSE(why.empty());
  // Every entry point reports the same, as Status::no_device.
  std::string msg;
  CHECK(status_of([] { make_cuda_device(0); }, &msg) == Status::no_device);
  CHECK(msg == why);
  CHECK(status_of([] { cuda_device_arch(0); }, &msg) == Status::no_device);
}

TEST_CASE("cuda api: a missing driver library is named") {
  std::string msg;
  CHECK(status_of([] { cuda::load_driver("/nonexistent/libcuda.so.1"); }, &msg) == Status::no_device);
  CHECK(contains(msg, "no CUDA driver: /nonexistent/libcuda.so.1 not found"));
}

TEST_CASE("cuda api: without cuBLASLt, a plan's GEMM step is refused with what was tried") {
  // The process's first (and only) attempt: nothing else in this binary loads cuBLASLt.
  ::setenv("KSEARCH_LIBCUBLASLT", "/nonexistent/libcublasLt.so.13", 1);
  std::string msg;
  CHECK(status_of([] { cuda::cublaslt(); }, &msg) == Status::no_device);
  CHECK(contains(msg, "cuBLASLt could not be loaded, and this launch plan has a GEMM step"));
  CHECK(contains(msg, "/nonexistent/libcublasLt.so.13"));
  CHECK(status_of([] { cuda::CublasLtHandle h; }, &msg) == Status::no_device);  // the failure is kept
  ::unsetenv("KSEARCH_LIBCUBLASLT");
}

TEST_CASE("cuda api: the toolkit's stub driver loads but has no device") {
  std::filesystem::path stub;
  for (const char* p : {"/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"})
    if (std::filesystem::exists(p)) stub = p;
  if (stub.empty()) {
    MESSAGE("skipped: no stub driver in the toolkit");
    return;
  }
  std::string msg;
  CHECK(status_of([&] { cuda::load_driver(stub.string()); }, &msg) == Status::no_device);
  CHECK(contains(msg, "cuInit failed with"));
  CHECK(contains(msg, "CUDA_ERROR_STUB_LIBRARY"));
}

TEST_CASE("cuda api: NVRTC loads by its versioned name and the toolkit headers are found") {
  std::string msg;
  CHECK(status_of([] { cuda::load_nvrtc("/nonexistent/libnvrtc.so.13"); }, &msg) == Status::no_device);
  CHECK(contains(msg, "/nonexistent/libnvrtc.so.13"));
  const cuda::NvrtcApi* api = nullptr;
  try {
    api = &cuda::nvrtc();
  } catch (const Error& e) {
    MESSAGE("skipped: " << e.what());
    return;
  }
  CHECK(api->major >= 12);
  CHECK(contains(api->library, "libnvrtc"));
  const auto& dirs = cuda::toolkit_include_dirs();
  REQUIRE_FALSE(dirs.empty());
  CHECK(std::filesystem::exists(std::filesystem::path(dirs[0]) / "cuda_fp16.h"));
  if (api->major >= 13) {
    REQUIRE(dirs.size() == 2);  // CUDA 13 keeps cuda/ and cub/ under include/cccl
    CHECK(std::filesystem::exists(std::filesystem::path(dirs[1]) / "cuda" / "pipeline"));
  }
}

TEST_CASE("cuda api: architectures and peak figures") {
  using cuda::arch_for_capability;
  CHECK(arch_for_capability(9, 0) == "sm_90a");
  CHECK(arch_for_capability(10, 0) == "sm_100a");
  CHECK(arch_for_capability(8, 6) == "sm_86");
  // H100 SXM: 132 SMs at 1.98 GHz, HBM3 at 2.619 GHz on a 5120-bit bus.
  auto p = cuda::estimate_peaks("NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000, 2619000, 5120);
  CHECK(p.flops == doctest::Approx(8192.0 * 132 * 1.98e9));
  CHECK(p.flops > 1.979e15);  // at least the datasheet's dense fp8 rate
  CHECK(p.bytes_per_s == doctest::Approx(3.352e12).epsilon(0.01));
  CHECK(contains(p.source, "driver attributes"));
  // Without the memory attributes the table of known parts answers.
  auto h200 = cuda::estimate_peaks("NVIDIA H200", 9, 0, 132, 1980000, 0, 0);
  CHECK(h200.bytes_per_s == doctest::Approx(4.8e12));
  CHECK(contains(h200.source, "table of known parts (H200"));
  auto h100 = cuda::estimate_peaks("NVIDIA H100 80GB HBM3", 9, 0, 132, 0, 0, 0);
  CHECK(h100.bytes_per_s == doctest::Approx(3.35e12));
  CHECK(contains(h100.source, "assumed 2.5 GHz"));
}

TEST_CASE("cuda api: errors are named with the call") {
  CHECK(cuda::is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
  CHECK_FALSE(cuda::is_sticky(CUDA_ERROR_INVALID_VALUE));
  try {
    cuda::check(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize", "while running kernel `k`");
    FAIL("should throw");
  } catch (const RunError& e) {
    CHECK(e.failure().status == EvalStatus::crashed);
    CHECK(contains(e.what(), "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS"));
    CHECK(contains(e.what(), "while running kernel `k`"));
  }
}
