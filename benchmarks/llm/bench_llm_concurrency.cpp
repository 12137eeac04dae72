// Concurrency of the openai policy: N prompts against a server that answers
// each after a fixed delay, one by one through complete() and together
// through complete_batch(). Concurrent generation should take about one
// delay instead of N. Prints both times and their ratio, measured in one run.
//
//   bench_llm_concurrency [N=8] [delay_s=0.25]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ksearch/llm_policies.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "support/openai_server.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 8;
  double delay = argc > 2 ? std::atof(argv[2]) : 0.25;
  if (n < 1 || delay < 0) {
    std::fprintf(stderr, "usage: bench_llm_concurrency [N >= 1] [delay_s >= 0]\n");
    return 2;
  }
  ks::test::OpenAiTestServer server;
  server.set_default(ks::test::Behaviour::slow(delay, "```cuda\n// a kernel\n```"));

  ks::OpenAiConfig cfg;
  cfg.base_url = server.base_url();
  cfg.model = "bench-model";
  cfg.max_concurrency = n;
  std::vector<ks::LlmRequest> prompts;
  for (int i = 0; i < n; ++i)
    prompts.push_back({ks::PromptKind::generate, "You write CUDA kernels.", "candidate " + std::to_string(i)});

  // Warm-up: curl's first use and the first connection are not what we measure.
  auto warm = ks::make_openai_policy(cfg);
  warm->complete(prompts[0]);

  auto sequential_policy = ks::make_openai_policy(cfg);
  auto t0 = std::chrono::steady_clock::now();
  int ok_seq = 0;
  for (const auto& p : prompts) ok_seq += sequential_policy->complete(p).ok;
  double sequential = seconds_since(t0);

  auto batch_policy = ks::make_openai_policy(cfg);
  t0 = std::chrono::steady_clock::now();
  int ok_batch = 0;
  for (const auto& r : batch_policy->complete_batch(prompts)) ok_batch += r.ok;
  double batch = seconds_since(t0);

  ks::OpenAiConfig half = cfg;
  half.max_concurrency = std::max(1, n / 2);
  auto capped_policy = ks::make_openai_policy(half);
  t0 = std::chrono::steady_clock::now();
  int ok_capped = 0;
  for (const auto& r : capped_policy->complete_batch(prompts)) ok_capped += r.ok;
  double capped = seconds_since(t0);

  std::printf("llm concurrency: %d requests, the server answers each after %.3f s\n", n, delay);
  std::printf("  sequential complete()            %7.3f s  (%d/%d ok)\n", sequential, ok_seq, n);
  std::printf("  complete_batch, %2d in flight     %7.3f s  (%d/%d ok)\n", n, batch, ok_batch, n);
  std::printf("  complete_batch, %2d in flight     %7.3f s  (%d/%d ok)\n", half.max_concurrency, capped, ok_capped, n);
  std::printf("  ratio sequential / batch          %6.2fx  (ideal %d.00x)\n", sequential / batch, n);
  std::printf("  ratio sequential / capped batch   %6.2fx  (ideal %.2fx)\n", sequential / capped,
              static_cast<double>(n) / ((n + half.max_concurrency - 1) / half.max_concurrency));
  std::printf("  server: at most %d requests in flight\n", server.max_in_flight());
  return ok_seq == n && ok_batch == n && ok_capped == n ? 0 : 1;
}
