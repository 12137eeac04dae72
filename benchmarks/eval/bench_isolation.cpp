// What running a host candidate in a process of its own costs
// (eval/host/candidate_process.hpp), side by side in one run with the same
// program called in this process, as the run worker did before: loading it
// (starting the process and dlopen), and one call through the timed path
// (the request's round trip, plus stopping and continuing the process
// outside the timed window), for a call that does almost nothing and for a
// vector add of 4M floats. Modes alternate round by round so machine noise
// falls on both alike.
//
//   bench_isolation [--rounds N] [--cache DIR]
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "eval/host/candidate_process.hpp"
#include "eval/host/host_compiler.hpp"
#include "eval/host/host_device.hpp"
#include "eval/worker_client.hpp"
#include "ksearch/error.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace ks;
using namespace ks::eval;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Solution vadd() {
  Solution s;
  s.name = "vadd";
  s.language = Language::cpp;
  s.sources = {{"kernel.cpp",
                "#include <cstdint>\n"
                "void vadd(const float* x, const float* y, float* z, std::int64_t n) {\n"
                "  for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];\n}\n"}};
  s.launch_plan = LaunchPlan::from_json(
      Json::obj({{"calls", Json::arr({Json::obj({{"fn", "vadd"}, {"args", Json::arr({"X", "Y", "Z", "N"})}})})}}));
  return s.finalize();
}

struct Side {
  std::vector<double> load_ms, empty_call_ms, empty_window_ms, vadd_call_ms;
  std::string isolation;  // the layers of the last process loaded
};

// One round: load, then timed calls on 16 and on 4M elements.
void measure_round(host::HostDevice& device, const Artifact& a, const Solution& s, Side& side) {
  auto t0 = Clock::now();
  auto program = device.load(a, s);
  side.isolation = program->process_facts().isolation;
  side.load_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  for (std::int64_t n : {std::int64_t{16}, std::int64_t{1} << 22}) {
    Buffer x = device.alloc(n * 4), y = device.alloc(n * 4), z = device.alloc(n * 4);
    device.generate(x, DType::f32, n, Distribution::Kind::uniform, 0, 1, 1, 1);
    device.generate(y, DType::f32, n, Distribution::Kind::uniform, 0, 1, 1, 2);
    program->bind({{{"X", x}, {"Y", y}, {"Z", z}}, {{"N", n}}});
    program->launch();
    const int calls = n < 1000 ? 2000 : 40;
    std::vector<double> ms, window_ms;
    for (int i = 0; i < calls; ++i) {
      // The whole call as the flow pays it, and the timed window the kernel is charged.
      auto c0 = Clock::now();
      window_ms.push_back(program->timed_launch());
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - c0).count());
    }
    (n < 1000 ? side.empty_call_ms : side.vadd_call_ms).push_back(median(ms));
    if (n < 1000) side.empty_window_ms.push_back(median(window_ms));
    for (Buffer b : {x, y, z}) device.free(b);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  fs::path cache = fs::temp_directory_path() / fmt::format("ks-bench-isolation-{}", ::getpid());
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (k == "--cache" && i + 1 < argc) cache = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_isolation [--rounds N] [--cache DIR]\n");
      return 2;
    }
  }
  try {
    std::filesystem::create_directories(cache);
    const Solution s = vadd();
    CompileRequest req;
    req.solution = s;
    req.tensors = {TensorSpec{.name = "X", .dtype = DType::f32, .shape = {"N"}},
                   TensorSpec{.name = "Y", .dtype = DType::f32, .shape = {"N"}},
                   TensorSpec{.name = "Z", .dtype = DType::f32, .shape = {"N"}, .is_output = true}};
    req.cache_dir = (cache / "host").string();
    const Artifact a = host::make_host_compiler({.compiler = "", .cache_dir = req.cache_dir})->compile(req);
    host::HostDevice in_process;
    host::HostDevice isolated(host::CandidateProcessOptions{locate_worker().string(), 0});
    Side same, own;
    for (int r = 0; r < rounds; ++r) {
      measure_round(in_process, a, s, same);
      measure_round(isolated, a, s, own);
    }
    fmt::print("host candidate isolation, {} rounds (medians; the candidate's process: {})\n", rounds,
               own.isolation);
    fmt::print("{:<34} {:>14} {:>16} {:>10}\n", "", "in the worker", "own process", "ratio");
    auto row = [](const char* what, const std::vector<double>& before, const std::vector<double>& after, const char* unit,
                  double scale) {
      const double x = median(before) * scale, y = median(after) * scale;
      fmt::print("{:<34} {:>11.3f} {:<2} {:>13.3f} {:<2} {:>9.2f}x\n", what, x, unit, y, unit, x > 0 ? y / x : 0);
    };
    row("load (process start + dlopen)", same.load_ms, own.load_ms, "ms", 1);
    row("one call, 16 floats: whole call", same.empty_call_ms, own.empty_call_ms, "us", 1e3);
    row("one call, 16 floats: timed window", same.empty_window_ms, own.empty_window_ms, "us", 1e3);
    row("one call, vector add of 4M floats", same.vadd_call_ms, own.vadd_call_ms, "ms", 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_isolation: %s\n", e.what());
    return 1;
  }
  std::error_code ec;
  fs::remove_all(cache, ec);
  return 0;
}
