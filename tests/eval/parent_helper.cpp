// Helper for the worker-lifetime test: evaluates a good candidate, prints the
// worker's pid, then starts an endless candidate and waits to be SIGKILLed.
//   ks_eval_parent_helper <cache-dir>
#include <cstdio>

#include "fixtures.hpp"
#include "ksearch/sys/evaluator.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ks_eval_parent_helper <cache-dir>\n");
    return 2;
  }
  auto cfg = ks::test::test_config(argv[1]);
  cfg.options.run_timeout_s = 600;
  auto ev = ks::make_evaluator(cfg);
  ks::SpecTask task(ks::test::vadd_task());
  ks::EvalResult r = ev->evaluate(task, ks::test::vadd_candidate(ks::test::kGoodBody));
  std::printf("worker %lld %s\n", static_cast<long long>(r.metrics.get_int("worker_pid")), ks::to_string(r.status));
  std::fflush(stdout);
  ev->evaluate(task, ks::test::vadd_candidate(ks::test::kEndlessBody));
  return 0;
}
