// Batch evaluation throughput: the 12 configurations of the softmax example's
// tunable starting kernel evaluated as one batch (evaluate_batch: compilation
// on the pool overlaps measurement; one worker per GPU), first on GPU 0 alone,
// then on every visible GPU, side by side in one run.
//
//   bench_batch [--task DIR]
//
// Prints the wall time of each and their ratio; on a one-GPU machine only the
// first line, and without a GPU a message (exit 0).
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <string>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace {

using namespace ks;
using Clock = std::chrono::steady_clock;

std::vector<Solution> configurations(const TaskSpec& spec) {
  const Solution& start = spec.starting_points.at(0);
  std::vector<Solution> out;
  for (int block : {128, 256, 512, 1024})
    for (int vec : {1, 2, 4}) {
      Solution s = start;
      s.params.values = {{"BLOCK", block}, {"VEC", vec}};
      s.name = fmt::format("BLOCK={} VEC={}", block, vec);
      out.push_back(s.finalize());
    }
  return out;
}

double run_batch(const Task& task, const std::vector<Solution>& batch, std::vector<int> devices,
                 const std::string& cache, int* passed) {
  EvaluatorConfig c;
  c.backend = ks::EvalBackend::cuda;
  c.devices = std::move(devices);
  c.cache_dir = cache;
  auto ev = make_evaluator(c);
  // Warm the workers and the reference outputs first, so both runs time only the batch.
  ev->evaluate(task, batch.front());
  auto t0 = Clock::now();
  auto results = ev->evaluate_batch(task, batch);
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  *passed = 0;
  for (const auto& r : results) *passed += r.passed() ? 1 : 0;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string task_path = std::string(KS_SOURCE_DIR) + "/examples/tasks/softmax";
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--task") == 0 && i + 1 < argc) task_path = argv[++i];
  std::string why;
  if (!cuda_available(&why)) {
    fmt::print("bench_batch: no GPU here ({}); nothing to measure\n", why);
    return 0;
  }
  try {
    auto task = load_task(task_path);
    auto batch = configurations(task->spec());
    EvaluatorConfig probe;
    probe.backend = ks::EvalBackend::cuda;
    int gpus = make_evaluator(probe)->device().count;
    std::string cache = "/tmp/ksearch-bench-batch-cache";
    int passed = 0;
    double one = run_batch(*task, batch, {0}, cache, &passed);
    fmt::print("batch of {} softmax configurations, 1 GPU:  {:.2f} s wall ({} passed)\n", batch.size(), one, passed);
    if (gpus > 1) {
      double all = run_batch(*task, batch, {}, cache, &passed);
      fmt::print("batch of {} softmax configurations, {} GPUs: {:.2f} s wall ({} passed)  speedup {:.2f}x\n",
                 batch.size(), gpus, all, passed, one / all);
    }
  } catch (const Error& e) {
    fmt::print(stderr, "bench_batch: {}\n", e.what());
    return 1;
  }
  return 0;
}
