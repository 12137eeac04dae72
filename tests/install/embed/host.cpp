// A host program of the embedding check: built against libksearch compiled
// without any built-in suite and without the CUDA backend, it must still list
// and evaluate task files on the host, and say why CUDA is not there.
#include <cstdio>
#include <string>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: embed_host TASK_JSON\n");
    return 2;
  }
  for (const auto& t : ks::list_tasks()) {
    for (const char* suite : {"gpumode/", "kernelbench/", "flashinfer/"}) {
      if (t.name.rfind(suite, 0) == 0) {
        std::fprintf(stderr, "task %s of a suite that was built out\n", t.name.c_str());
        return 1;
      }
    }
  }
  try {
    (void)ks::load_task("kernelbench/level1/19_ReLU");
    std::fprintf(stderr, "a kernelbench task loaded without the suite\n");
    return 1;
  } catch (const ks::Error& e) {
    if (e.status() != ks::Status::not_found || std::string(e.what()).find("unknown task") == std::string::npos) {
      std::fprintf(stderr, "a kernelbench task without the suite: %s\n", e.what());
      return 1;
    }
    std::printf("without the suite: %s\n", e.what());
  }
  try {
    (void)ks::list_kernelbench_tasks("/nonexistent");
    std::fprintf(stderr, "kernelbench problems listed without the suite\n");
    return 1;
  } catch (const ks::Error& e) {
    if (std::string(e.what()).find("no kernelbench suite") == std::string::npos) {
      std::fprintf(stderr, "listing kernelbench problems without the suite: %s\n", e.what());
      return 1;
    }
    std::printf("without the suite: %s\n", e.what());
  }
  // Built with KS_WITH_CUDA=OFF (check_embed_build.sh): asking for the CUDA
  // backend is an error that says the build has none, not a crash.
  std::string why;
  if (ks::cuda_available(&why) || why.find("no CUDA backend") == std::string::npos) {
    std::fprintf(stderr, "the CUDA backend is not reported missing: \"%s\"\n", why.c_str());
    return 1;
  }
  try {
    ks::EvaluatorConfig cuda;
    cuda.backend = ks::EvalBackend::cuda;
    (void)ks::make_evaluator(cuda);
    std::fprintf(stderr, "a CUDA evaluator was made without the CUDA backend\n");
    return 1;
  } catch (const ks::Error& e) {
    if (std::string(e.what()).find("no CUDA backend") == std::string::npos) {
      std::fprintf(stderr, "a CUDA evaluator without the backend: %s\n", e.what());
      return 1;
    }
    std::printf("without the CUDA backend: %s\n", e.what());
  }
  auto task = ks::load_task(argv[1]);
  if (task->spec().starting_points.empty()) return 1;
  ks::EvaluatorConfig config;
  config.backend = ks::EvalBackend::host;
  auto evaluator = ks::make_evaluator(config);
  const ks::EvalResult r = evaluator->evaluate(*task, task->spec().starting_points.front());
  std::printf("%s: starting point %s, %.4f ms\n", task->spec().name.c_str(), ks::to_string(r.status),
              r.latency_ms);
  return r.status == ks::EvalStatus::passed ? 0 : 1;
}
