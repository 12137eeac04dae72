#include "report.hpp"

#include <fmt/format.h>

namespace ks::cli {

void print_start(std::FILE* out, const SearchStart& s, const std::string& llm) {
  fmt::print(out, "ksearch: task {} | strategy {} | language {} | {} rounds{} | llm {}\n", s.task, s.config.strategy,
             to_string(s.config.language), s.config.max_rounds,
             s.rounds_done ? fmt::format(" ({} done)", s.rounds_done) : "", llm);
  fmt::print(out, "ksearch: run folder {}\n", s.run_dir.string());
  std::fflush(out);
}

void print_round(std::FILE* out, const RoundReport& r) {
  std::string status = to_string(r.status);
  std::string lat = r.latency_ms > 0 ? fmt::format("{:9.4f} ms", r.latency_ms) : std::string(12, ' ');
  std::string best = r.best_latency_ms > 0
                         ? fmt::format("best {:.4f} ms{}", r.best_latency_ms,
                                       r.best_speedup > 0 ? fmt::format(" ({:.2f}x)", r.best_speedup) : "")
                         : "best -";
  std::string action = r.action;
  if (action.size() > 48) action = action.substr(0, 45) + "...";
  // A failure carries the first line of its reason, so the line says why.
  std::string reason;
  if (!r.reason.empty()) {
    reason = " | " + r.reason;
    if (reason.size() > 123) {
      std::size_t n = 120;
      while (n > 0 && (static_cast<unsigned char>(reason[n]) & 0xC0) == 0x80) --n;
      reason = reason.substr(0, n) + "...";
    }
  }
  fmt::print(out, "[{:>3}/{:<3}] {}{:<17} {} {:<26} | {} | ${:.2f} {:.0f}s{}\n", r.round, r.max_rounds,
             r.improved ? "*" : " ", status, lat, best, action, r.llm_usage.cost_usd, r.elapsed_s, reason);
  if (r.replayed) fmt::print(out, "          (replayed from the run's journal)\n");
  std::fflush(out);
}

void print_eval_table(std::FILE* out, const EvalResult& r) {
  fmt::print(out, "  {:<36} {:<16} {:>11} {:>11} {:>11} {:>9} {:>6}\n", "workload", "status", "mean ms", "median ms",
             "ref ms", "speedup", "reps");
  for (const auto& w : r.workloads) {
    bool timed = w.timing.count > 0;
    double sp = timed && w.reference_ms > 0 ? w.reference_ms / w.timing.mean_ms : 0;
    fmt::print(out, "  {:<36} {:<16} {:>11} {:>11} {:>11} {:>9} {:>6}\n", w.name, to_string(w.status),
               timed ? fmt::format("{:.4f}", w.timing.mean_ms) : "-",
               timed ? fmt::format("{:.4f}", w.timing.median_ms) : "-",
               w.reference_ms > 0 ? fmt::format("{:.4f}", w.reference_ms) : "-",
               sp > 0 ? fmt::format("{:.2f}x", sp) : "-", timed ? std::to_string(w.timing.count) : "-");
    if (w.status != EvalStatus::passed && !w.message.empty()) fmt::print(out, "      {}\n", w.message);
  }
}

void print_summary(std::FILE* out, const SearchOutcome& o) {
  fmt::print(out, "\nksearch: {} after {} rounds ({} replayed) in {:.1f} s on {}\n", o.stop_reason, o.rounds,
             o.replayed_rounds, o.wall_s, o.device.name.empty() ? o.device.backend : o.device.name);
  if (o.usage.input_tokens || o.usage.output_tokens)
    fmt::print(out, "LLM: {} tokens in, {} out ({} reasoning), ${:.4f}\n", o.usage.input_tokens, o.usage.output_tokens,
               o.usage.reasoning_tokens, o.usage.cost_usd);
  if (!o.best) {
    fmt::print(out, "No candidate passed. See the attempts in {}\n", o.run_dir.string());
    return;
  }
  const auto& b = *o.best;
  fmt::print(out, "Best: {} (round {}): {:.4f} ms geometric mean", b.solution.id, b.round, b.eval.latency_ms);
  if (b.eval.speedup > 0) fmt::print(out, ", {:.2f}x the reference's {:.4f} ms", b.eval.speedup, b.eval.reference_latency_ms);
  fmt::print(out, "\n");
  if (o.first_pass_latency_ms > 0 && o.first_pass_round != b.round)
    fmt::print(out, "Improvement: {:.2f}x over the first passing kernel (round {}, {:.4f} ms)\n",
               o.first_pass_latency_ms / b.eval.latency_ms, o.first_pass_round, o.first_pass_latency_ms);
  print_eval_table(out, b.eval);
  fmt::print(out, "Run folder: {} (best kernel in {}/best)\n", o.run_dir.string(), o.run_dir.string());
  std::fflush(out);
}

}  // namespace ks::cli
