// Rounds per minute of the tune strategy, one configuration at a time
// (--tune-batch 1) against batches (compiled together, measured one after
// another), side by side in one run on one machine: the main job's question
// ("more rounds per minute") for any task.
//
//   bench_tune_batch [--task NAME] [--language LANG] [--rounds N] [--batch Q]
//                    [--repeats R] [--timing-cap S] [--seed N] [--out DIR] [--keep]
//
// --batch Q: the batched runs' size (default: what a run gets, 4 unless
// --parallel would say otherwise). --out DIR: where the run folders go
// (kept); without it a temporary folder, removed unless --keep.
//
// Each run is a whole `ksearch run --llm offline --strategy tune` through the
// public API, in a run folder and an evaluator cache of its own (so neither
// reuses the other's compiled candidates; each computes its reference outputs
// in its first round). The rate counts the tune rounds, from the end of round
// 1 (the starting point, with the cold start) to the end of the last round.
// With --repeats R the two settings alternate which goes first, and the
// ratio is the median of the R pairs. Also printed: the best latency each run
// found (the batches must not buy speed with worse kernels).
//
// On a GPU machine: bench_tune_batch --task gpumode/trimul --rounds 24
// Without one it tunes the host example: bench_tune_batch --task examples/matmul
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ksearch/error.hpp"
#include "ksearch/search.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Settings {
  std::string task = "gpumode/trimul";
  std::string language;  // empty: the task's own
  int rounds = 24;
  int batch = 0;  // 0: what a run gets by default
  int repeats = 1;
  double timing_cap = 0;  // 0: the evaluator's default
  std::uint64_t seed = 0;
  fs::path out;
  bool keep = false;
};

struct Measured {
  int rounds = 0;
  double tune_seconds = 0;  // end of round 1 to end of the last round
  double wall_seconds = 0;  // the whole run
  int batch = 0;            // as the run's tune_start reports it
  double best_ms = 0;
  double best_speedup = 0;
  double rounds_per_minute() const { return tune_seconds > 0 ? 60.0 * (rounds - 1) / tune_seconds : 0; }
};

Measured run_once(const Settings& s, int tune_batch, const fs::path& dir) {
  ks::SearchOptions o;
  o.task = s.task;
  o.config.strategy = ks::StrategyKind::tune;
  o.config.max_rounds = s.rounds;
  o.config.tune.batch = tune_batch;
  o.config.seed = s.seed;
  if (s.language.empty()) {
    o.infer_language = true;
  } else {
    auto lang = ks::language_from_string(s.language);
    if (!lang) throw ks::Error(ks::Status::invalid_argument, "--language must be cuda, cpp, triton or python");
    o.config.language = *lang;
  }
  o.llm = ks::LlmChoice::parse("offline");
  o.weak_check = false;  // before the first round either way; not what is compared
  o.evaluator.cache_dir = (dir / "cache").string();
  if (s.timing_cap > 0) o.evaluator.options.max_time_per_workload_s = s.timing_cap;
  o.run_dir = dir / "run";
  std::vector<Clock::time_point> ends;
  o.progress = [&](const ks::RoundReport&) {
    ends.push_back(Clock::now());
    return true;
  };
  Measured m;
  o.on_event = [&](const ks::Json& e) {
    if (e.get_string("type") == "tune_start") m.batch = static_cast<int>(e.get_int("batch", 1));
  };
  const auto t0 = Clock::now();
  const ks::SearchOutcome outcome = ks::run_search(o);
  m.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  m.rounds = static_cast<int>(ends.size());
  if (ends.size() >= 2) m.tune_seconds = std::chrono::duration<double>(ends.back() - ends.front()).count();
  if (outcome.best) {
    m.best_ms = outcome.best->eval.latency_ms;
    m.best_speedup = outcome.best->eval.speedup;
  }
  return m;
}

int usage() {
  fmt::print(stderr,
             "usage: bench_tune_batch [--task NAME] [--language LANG] [--rounds N] [--batch Q] [--repeats R]\n"
             "                        [--timing-cap S] [--seed N] [--out DIR] [--keep]\n");
  return 2;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "bench_tune_batch: {} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--task") s.task = value();
    else if (a == "--language") s.language = value();
    else if (a == "--rounds") s.rounds = std::atoi(value().c_str());
    else if (a == "--batch") s.batch = std::atoi(value().c_str());
    else if (a == "--repeats") s.repeats = std::atoi(value().c_str());
    else if (a == "--timing-cap") s.timing_cap = std::atof(value().c_str());
    else if (a == "--seed") s.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--out") s.out = value();
    else if (a == "--keep") s.keep = true;
    else return usage();
  }
  if (s.rounds < 3 || s.repeats < 1 || s.batch < 0 || s.batch == 1 || s.timing_cap < 0) {
    fmt::print(stderr, "bench_tune_batch: --rounds must be >= 3, --repeats >= 1, --batch 0 (automatic) or >= 2, "
                       "--timing-cap >= 0\n");
    return 2;
  }
  const bool own_out = s.out.empty();
  if (own_out) s.out = fs::temp_directory_path() / fmt::format("ksearch-bench-tune-batch-{}", ::getpid());
  if (fs::exists(s.out) && !fs::is_empty(s.out)) {
    fmt::print(stderr, "bench_tune_batch: {} is not empty\n", s.out.string());
    return 2;
  }
  std::vector<double> ratios;
  try {
    fmt::print("tune strategy on {}, {} rounds a run (seed {}): one configuration at a time vs batches\n", s.task,
               s.rounds, s.seed);
    fmt::print("{:<7} {:<10} {:>12} {:>12} {:>12} {:>12} {:>10}\n", "repeat", "batch", "tune rounds", "rounds/min",
               "run wall s", "best ms", "speedup");
    double best_one = 0, best_batched = 0;
    for (int r = 0; r < s.repeats; ++r) {
      Measured one, batched;
      // Alternate which goes first, so a machine that warms up or gets busier favours neither.
      for (int k = 0; k < 2; ++k) {
        const bool first_one = r % 2 == 0;
        const bool is_one = (k == 0) == first_one;
        const fs::path dir = s.out / fmt::format("r{}-{}", r + 1, is_one ? "one" : "batched");
        (is_one ? one : batched) = run_once(s, is_one ? 1 : s.batch, dir);
      }
      for (const Measured* m : {&one, &batched})
        fmt::print("{:<7} {:<10} {:>12} {:>12.2f} {:>12.1f} {:>12.4f} {:>9.2f}x\n", r + 1,
                   m->batch, m->rounds - 1,
                   m->rounds_per_minute(), m->wall_seconds, m->best_ms, m->best_speedup);
      if (one.rounds_per_minute() > 0) ratios.push_back(batched.rounds_per_minute() / one.rounds_per_minute());
      best_one = best_one == 0 ? one.best_ms : std::min(best_one, one.best_ms);
      best_batched = best_batched == 0 ? batched.best_ms : std::min(best_batched, batched.best_ms);
    }
    fmt::print("\nrounds per minute, batches / one at a time: {:.2f}x ({} of {} repeats)\n", median(ratios),
               s.repeats == 1 ? "one" : "median", s.repeats);
    fmt::print("best latency found, one at a time / batches: {:.4f} ms / {:.4f} ms ({:.3f}x)\n", best_one,
               best_batched, best_batched > 0 ? best_one / best_batched : 0.0);
  } catch (const ks::Error& e) {
    fmt::print(stderr, "bench_tune_batch: {}\n", e.what());
    return 1;
  }
  if (own_out && !s.keep) {
    std::error_code ec;
    fs::remove_all(s.out, ec);
  } else {
    fmt::print("run folders: {}\n", s.out.string());
  }
  return 0;
}
