// Evaluation latency of the CUDA backend, measured side by side in one run:
//
//   1. NVRTC compilation of two candidates (the softmax example's starting
//      kernel, and a 40-line kernel including cuda_bf16.h, mma.h,
//      cuda/pipeline and cooperative_groups.h): the first compile of a
//      process, later compiles without and with precompiled headers, and a
//      cubin cache hit. Runs anywhere NVRTC is installed.
//   2. On a GPU: starting a run worker, a full evaluation of the softmax
//      example (correctness and timing over all its workloads), and the
//      agreement of the median times of the same kernel in two separate
//      evaluator runs.
//
//   bench_eval [--reps N] [--task DIR] [--cache DIR]
//
// Every compile is of a source no cache has seen (a unique comment is
// appended), except where a cache hit is what is measured.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "util/fs.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace ks;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const char* kHeaderHeavy = R"(#include <cuda_bf16.h>
#include <mma.h>
#include <cuda/pipeline>
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// Scales bf16 rows staged through shared memory with a two-stage pipeline.
extern "C" __global__ void staged_scale(const __nv_bfloat16* __restrict__ x,
                                        float* __restrict__ y, int n, float s) {
  __shared__ __nv_bfloat16 stage[2][256];
  auto block = cg::this_thread_block();
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  const int tiles = (n + 255) / 256;
  int tile = blockIdx.x;
  if (tile < tiles) {
    pipe.producer_acquire();
    int i = tile * 256 + threadIdx.x;
    stage[0][threadIdx.x] = i < n ? x[i] : __float2bfloat16(0.0f);
    pipe.producer_commit();
  }
  for (int k = 0; tile < tiles; ++k, tile += gridDim.x) {
    cuda::pipeline_consumer_wait_prior<0>(pipe);
    block.sync();
    int i = tile * 256 + threadIdx.x;
    if (i < n) y[i] = s * __bfloat162float(stage[k & 1][threadIdx.x]);
    pipe.consumer_release();
    int next = tile + gridDim.x;
    if (next < tiles) {
      pipe.producer_acquire();
      int j = next * 256 + threadIdx.x;
      stage[(k + 1) & 1][threadIdx.x] = j < n ? x[j] : __float2bfloat16(0.0f);
      pipe.producer_commit();
    }
  }
}
)";

struct Args {
  int reps = 5;
  fs::path task_dir;
  fs::path cache_dir;
};

Args parse_args(int argc, char** argv) {
  Args a;
  a.task_dir = fs::path(KS_SOURCE_DIR) / "examples" / "tasks" / "softmax";
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(Status::invalid_argument, k + " needs a value");
      return argv[++i];
    };
    if (k == "--reps") a.reps = std::max(1, std::stoi(value()));
    else if (k == "--task") a.task_dir = value();
    else if (k == "--cache") a.cache_dir = value();
    else throw Error(Status::invalid_argument, "unknown argument " + k + " (--reps N, --task DIR, --cache DIR)");
  }
  return a;
}

eval::CompileRequest request_for(const std::string& source, int nonce, const std::string& cache,
                                 std::map<std::string, std::int64_t> params = {}) {
  eval::CompileRequest r;
  r.solution.language = Language::cuda;
  r.solution.sources = {{"kernel.cu", source + fmt::format("\n// benchmark nonce {}\n", nonce)}};
  r.arch = "sm_90a";
  r.cache_dir = cache;
  r.params = std::move(params);
  return r;
}

struct CompileRow {
  std::string what;
  double first_s = 0;      // first NVRTC compile in this process
  double no_pch_s = 0;     // median of later compiles, no PCH
  double pch_first_s = 0;  // first compile with PCH (creates it)
  double pch_s = 0;        // median of later compiles using the PCH
  double hit_s = 0;        // median cache hit
};

// Each candidate gets compilers of its own; the first NVRTC call of the whole
// program (library load, builtins) is charged to the first row's "first".
CompileRow measure_compiles(const std::string& what, const std::string& source,
                            const std::string& cache, int reps, int& nonce) {
  CompileRow row;
  row.what = what;
  eval::CudaCompilerOptions plain;
  plain.use_pch = false;
  eval::cuda::CudaCompiler no_pch(plain);
  auto t0 = Clock::now();
  no_pch.compile(request_for(source, ++nonce, cache));
  row.first_s = seconds_since(t0);
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    t0 = Clock::now();
    no_pch.compile(request_for(source, ++nonce, cache));
    times.push_back(seconds_since(t0));
  }
  row.no_pch_s = median(times);

  eval::CudaCompilerOptions with;
  with.use_pch = true;
  eval::cuda::CudaCompiler pch(with);
  // Different parameter values each time: the header prefix stays the same.
  t0 = Clock::now();
  pch.compile(request_for(source, ++nonce, cache, {{"BLOCK", 128}}));
  row.pch_first_s = seconds_since(t0);
  times.clear();
  for (int i = 0; i < reps; ++i) {
    t0 = Clock::now();
    pch.compile(request_for(source, ++nonce, cache, {{"BLOCK", 256 + 32 * i}}));
    times.push_back(seconds_since(t0));
  }
  row.pch_s = median(times);
  auto c = pch.counters();
  if (c.pch_used < reps)
    fmt::print("  note: {} of {} compilations used the precompiled header\n", c.pch_used, reps);

  auto repeat = request_for(source, ++nonce, cache);
  no_pch.compile(repeat);
  times.clear();
  for (int i = 0; i < reps; ++i) {
    t0 = Clock::now();
    eval::Artifact a = no_pch.compile(repeat);
    times.push_back(seconds_since(t0));
    if (!a.cache_hit) throw Error(Status::internal, "a repeated compile missed the cache");
  }
  row.hit_s = median(times);
  return row;
}

void compile_section(const Args& args, const std::string& cache) {
  std::string start_source;
  try {
    start_source = util::read_file(args.task_dir / "start.cu");
  } catch (const Error& e) {
    fmt::print("compile benchmark skipped: {}\n", e.what());
    return;
  }
  const auto& nv = eval::cuda::nvrtc();
  fmt::print("NVRTC {} ({}), target sm_90a, {} repetitions per median\n\n", nv.version_string(),
             nv.library, args.reps);
  int nonce = static_cast<int>(std::chrono::system_clock::now().time_since_epoch().count() % 1000000) * 100;
  std::vector<CompileRow> rows;
  rows.push_back(measure_compiles("softmax starting kernel", start_source, cache, args.reps, nonce));
  rows.push_back(measure_compiles("40 lines: bf16, mma, pipeline, cg", kHeaderHeavy, cache, args.reps, nonce));
  fmt::print("{:<36} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "candidate", "first", "no PCH",
             "PCH first", "PCH", "cache hit", "PCH gain", "hit gain");
  for (const auto& r : rows)
    fmt::print("{:<36} {:>9.3f}s {:>9.3f}s {:>9.3f}s {:>9.3f}s {:>9.4f}s {:>8.2f}x {:>8.0f}x\n", r.what,
               r.first_s, r.no_pch_s, r.pch_first_s, r.pch_s, r.hit_s, r.no_pch_s / r.pch_s,
               r.no_pch_s / r.hit_s);
  fmt::print("\n(first: the first compile of a fresh compiler; no PCH / PCH / cache hit: medians of later\n"
             " compiles of unseen sources; PCH gain = no PCH / PCH; hit gain = no PCH / cache hit)\n");
}

void print_result(const EvalResult& r) {
  fmt::print("  status {}  compile {:.3f} s  run {:.3f} s\n", to_string(r.status),
             r.metrics.get_number("compile_s"), r.metrics.get_number("run_s"));
  for (const auto& w : r.workloads) {
    if (!w.benchmark) {
      fmt::print("    {:<14} {}\n", w.name, w.status == EvalStatus::passed ? "correct" : w.message);
      continue;
    }
    fmt::print("    {:<14} median {:>9.4f} ms  min {:>9.4f}  reps {:>4}  rel.SE {:.3f}%  reference {:>9.4f} ms\n",
               w.name, w.timing.median_ms, w.timing.min_ms, w.timing.count, 100 * w.timing.rel_stderr,
               w.reference_ms);
  }
  if (r.status != EvalStatus::passed) fmt::print("  {}\n", r.log);
}

void gpu_section(const Args& args, const fs::path& cache) {
  std::string why;
  if (!cuda_available(&why)) {
    fmt::print("\nGPU parts skipped (worker start, softmax evaluation, timing agreement): {}\n", why);
    return;
  }
  TaskSpec spec = load_task_file(args.task_dir / "task.json");
  SpecTask task(spec);
  Solution reference = spec.references.at(Language::cuda);
  reference.finalize();
  if (spec.starting_points.empty()) throw Error(Status::invalid_argument, "the softmax task has no starting point");
  Solution start = spec.starting_points.front();
  start.finalize();

  EvaluatorConfig cfg;
  cfg.backend = ks::EvalBackend::cuda;
  cfg.cache_dir = cache;

  fmt::print("\n== GPU ==\n");
  // Workers compile the device's runtime kernels into the default cache; a
  // fresh one makes the first start cold and the second warm.
  ::setenv("KSEARCH_CACHE_DIR", (cache / "default").c_str(), 1);
  double start_s[2] = {0, 0};
  DeviceInfo d;
  for (double& s : start_s) {
    auto t0 = Clock::now();
    auto e = make_evaluator(cfg);
    d = e->device();  // starts a run worker and waits for its hello
    s = seconds_since(t0);
  }
  fmt::print("device: {} ({}), L2 {:.0f} MB, peak {:.0f} TFLOP/s, {:.2f} TB/s\n", d.name, d.arch,
             d.l2_bytes / 1e6, d.peak_flops / 1e12, d.peak_bytes_per_s / 1e12);
  fmt::print("worker start (process, CUDA context, runtime kernels, device facts): {:.3f} s with a cold "
             "cache (runtime kernels compiled), {:.3f} s warm\n",
             start_s[0], start_s[1]);

  auto ev = make_evaluator(cfg);
  ev->device();
  auto t0 = Clock::now();
  EvalResult first = ev->evaluate(task, start);
  double first_s = seconds_since(t0);
  fmt::print("\nfull evaluation of the softmax starting kernel, first in this evaluator: {:.3f} s wall\n", first_s);
  print_result(first);
  t0 = Clock::now();
  EvalResult again = ev->evaluate(task, start);
  fmt::print("the same again (compiled and reference outputs cached): {:.3f} s wall\n", seconds_since(t0));
  t0 = Clock::now();
  EvalResult ref = ev->evaluate(task, reference);
  fmt::print("the task's reference as a candidate: {:.3f} s wall\n", seconds_since(t0));
  print_result(ref);
  ev.reset();

  // Timing agreement: the same kernel in two separate evaluator runs (fresh
  // workers and contexts), compared workload by workload.
  std::vector<EvalResult> runs;
  for (int k = 0; k < 2; ++k) {
    auto e = make_evaluator(cfg);
    runs.push_back(e->evaluate(task, start));
  }
  fmt::print("\ntiming agreement of two separate evaluator runs (starting kernel, median per workload):\n");
  double worst = 0;
  for (std::size_t i = 0; i < runs[0].workloads.size() && i < runs[1].workloads.size(); ++i) {
    const auto& a = runs[0].workloads[i];
    const auto& b = runs[1].workloads[i];
    if (!a.benchmark || a.timing.median_ms <= 0 || b.timing.median_ms <= 0) continue;
    double spread = 100 * std::fabs(a.timing.median_ms - b.timing.median_ms) /
                    std::min(a.timing.median_ms, b.timing.median_ms);
    worst = std::max(worst, spread);
    fmt::print("  {:<14} {:>9.4f} ms vs {:>9.4f} ms   spread {:.2f}%\n", a.name, a.timing.median_ms,
               b.timing.median_ms, spread);
  }
  fmt::print("largest median spread: {:.2f}% (target: below 2%)\n", worst);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args = parse_args(argc, argv);
    util::TempDir scratch("ksearch-bench-eval");
    fs::path cache = args.cache_dir.empty() ? scratch.path() : args.cache_dir;
    fmt::print("== NVRTC compilation (cache in {}) ==\n", cache.string());
    try {
      compile_section(args, cache.string());
    } catch (const Error& e) {
      if (e.status() != Status::no_device) throw;
      fmt::print("compile benchmark skipped: {}\n", e.what());
    }
    gpu_section(args, cache);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_eval: {}\n", e.what());
    return 1;
  }
}
