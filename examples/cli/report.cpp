#include "report.hpp"

#include <fmt/format.h>


#include "ksearch/error.hpp"
#include "ksearch/io.hpp"
#include "term.hpp"

namespace ks::cli {

void print_start(std::FILE* out, const SearchStart& s, const std::string& llm) {
  say(out, "ksearch: task {} | strategy {} | language {} | {} rounds{} | llm {}\n", s.task, s.config.strategy_name(),
      to_string(s.config.language), s.config.max_rounds,
      s.rounds_done ? fmt::format(" ({} done)", s.rounds_done) : "", llm);
  say(out, "ksearch: run folder {}\n", s.run_dir.string());
  std::fflush(out);
}

void print_warm_start(std::FILE* out, const SearchConfig& c) {
  if (c.continue_from_world_model) {
    const WorldModelImport& w = *c.continue_from_world_model;
    std::size_t adopted = 0;
    for (const auto& s : w.solutions) adopted += s.recorded && s.recorded->adopted ? 1 : 0;
    say(out, "ksearch: world model from {} ({}): {} kernel(s) with code, {} of them with an evaluation recorded for "
             "this task on this device; {} repair(s) (event world_model_imported)\n",
        w.source, w.format, w.solutions.size(), adopted, w.repairs.size());
  }
  if (c.continue_from_solution) {
    const auto& e = c.continue_from_solution_eval;
    say(out, "ksearch: continues from solution {}: {}\n", c.continue_from_solution->id,
        e && e->adopted ? e->why + " (--remeasure measures it again)"
        : e             ? e->why
                        : "measured in round 1");
  }
  if (c.start_from_starting_point)
    say(out, "ksearch: starts from the task's starting point, measured in round 1 (--no-starting-point: not)\n");
}

void print_round(std::FILE* out, const RoundReport& r) {
  std::string status = to_string(r.status);
  std::string lat = r.latency_ms > 0 ? fmt::format("{:9.4f} ms", r.latency_ms) : std::string(12, ' ');
  std::string best = r.best_latency_ms > 0
                         ? fmt::format("best {:.4f} ms{}{}", r.best_latency_ms,
                                       r.best_speedup > 0 ? fmt::format(" ({:.2f}x)", r.best_speedup) : "",
                                       r.best_vs_baseline > 0 ? fmt::format(" vs base {:.2f}", r.best_vs_baseline) : "")
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
  say(out, "[{:>3}/{:<3}] {}{:<17} {} {:<26} | {} | ${:.2f} {:.0f}s{}\n", r.round, r.max_rounds,
      r.improved ? "*" : " ", status, lat, best, action, r.llm_usage.cost_usd, r.elapsed_s, reason);
  if (r.replayed) say(out, "          (replayed from the run's journal)\n");
  else if (r.recorded) say(out, "          (evaluation from the recording)\n");
  std::fflush(out);
}

void print_replay_notice(std::FILE* out, const LlmChoice& llm) {
  say(out,
      "ksearch: replaying the answers recorded in {}. Only the answers are recorded: every candidate is "
      "compiled and measured again here, so its timings differ from the recording's and a decision that "
      "compares timings (the end of a cycle, the best kernel) may go another way. Where the search then asks "
      "for another kind of answer than the recording holds, {}. To reproduce a run folder exactly "
      "(recorded evaluations too), use `ksearch replay RUN_DIR`.\n",
      llm.replay_path.string(),
      llm.on_divergence == ks::ReplayDivergence::skip
          ? "each request gets the next recorded answer of its kind (--on-divergence skip)"
          : "the run stops there and says where and why (--on-divergence skip goes on instead)");
  std::fflush(out);
}

void print_divergence(std::FILE* out, const SearchOutcome& o) {
  if (o.divergence.is_null()) return;
  const Json& d = o.divergence;
  bool stopped = d.get_bool("stopped");
  std::string how = stopped ? "and stopped there"
                    : d.get_string("on_divergence") == "skip" ? "and went on with the answers that still match"
                                                              : "and went on live";
  say(out, "\nksearch: the run left its recording {} {}.\n{}\n", d.get_string("source"), how,
      d.get_string("message"));
  if (stopped && o.stop_reason == ks::StopReason::replay_diverged) {
    if (d.get_string("evaluations") == "recorded")
      say(out, "To go on from there with a model: ksearch resume {} --llm ... (--model ...)\n",
          o.run_dir.string());
    else
      say(out, "To go on with the answers that still match: rerun with --on-divergence skip; to reproduce "
               "the recorded run exactly: ksearch replay RUN_DIR\n");
  }
  std::fflush(out);
}

void print_eval_table(std::FILE* out, const EvalResult& r) {
  bool baseline = false;
  for (const auto& w : r.workloads) baseline = baseline || w.baseline_ms > 0;
  const std::string base_head = baseline ? fmt::format(" {:>11} {:>9}", "base ms", "vs base") : "";
  // "latency": the workload's latency statistic (p10 on the host, median on
  // a GPU, mean under upstream timing), +- half its 95% interval.
  say(out, "  {:<36} {:<16} {:>11} {:>7} {:>11} {:>11} {:>9}{} {:>6}\n", "workload", "status", "latency ms", "+-",
      "mean ms", "ref ms", "speedup", base_head, "reps");
  for (const auto& w : r.workloads) {
    bool timed = w.timing.count > 0;
    const double l = w.timing.latency();
    double sp = timed ? w.speedup() : 0;
    double vb = timed && w.baseline_ms > 0 ? w.baseline_ms / l : 0;
    const std::string base = baseline ? fmt::format(" {:>11} {:>9}", w.baseline_ms > 0 ? fmt::format("{:.4f}", w.baseline_ms) : "-",
                                                    vb > 0 ? fmt::format("{:.2f}x", vb) : "-")
                                      : "";
    say(out, "  {:<36} {:<16} {:>11} {:>7} {:>11} {:>11} {:>9}{} {:>6}\n", w.name, to_string(w.status),
        timed ? fmt::format("{:.4f}", l) : "-",
        timed && w.timing.rel_half_width() > 0 ? fmt::format("{:.1f}%", 100 * w.timing.rel_half_width()) : "-",
        timed ? fmt::format("{:.4f}", w.timing.mean_ms) : "-",
        w.reference_ms > 0 ? fmt::format("{:.4f}", w.reference_ms) : "-",
        sp > 0 ? fmt::format("{:.2f}x", sp) : "-", base, timed ? std::to_string(w.timing.count) : "-");
    if (w.status != EvalStatus::passed && !w.message.empty()) say(out, "      {}\n", w.message);
  }
  for (const auto& w : r.workloads)
    if (w.timing.count > 0) {
      say(out, "  latency: the {} of the timed calls{}\n", to_string(w.timing.statistic),
          w.paired ? "; the reference was timed beside the candidate, calls alternating" : "");
      break;
    }
}

std::string eval_headline(const EvalResult& r) {
  std::string s = fmt::format("{:.4f} ms geometric mean", r.latency_ms);
  if (r.latency_lo_ms > 0) s += fmt::format(" (95% interval {:.4f} to {:.4f})", r.latency_lo_ms, r.latency_hi_ms);
  if (r.speedup > 0) s += fmt::format(", {:.2f}x the reference's {:.4f} ms", r.speedup, r.reference_latency_ms);
  if (r.vs_baseline > 0) s += fmt::format(", {:.3f}x the baseline (mean of per-workload ratios; x100 = {:.1f})", r.vs_baseline, 100 * r.vs_baseline);
  return s;
}

namespace {

// "compile_s" -> "compile", "reference_timing_s" -> "reference timing".
std::string phase_words(std::string key) {
  if (key.size() > 2 && key.compare(key.size() - 2, 2, "_s") == 0) key.resize(key.size() - 2);
  for (char& c : key)
    if (c == '_') c = ' ';
  return key;
}

// What the compile phase was: "cache hit", "cache miss, PCH used", "1 of 2 builds cached".
std::string compile_note(const EvalResult& r) {
  const std::int64_t builds = r.metrics.get_int("builds"), hits = r.metrics.get_int("compile_cache_hits");
  if (builds <= 0) return "";
  std::string s = hits == builds ? "cache hit" : hits == 0 ? "cache miss" : fmt::format("{} of {} builds cached", hits, builds);
  if (r.metrics.get_int("compile_pch_used") > 0) s += ", PCH used";
  else if (r.metrics.get_int("compile_pch_created") > 0) s += ", PCH created";
  return s;
}

}  // namespace

std::string phases_line(const EvalResult& r) {
  const Json* p = r.metrics.find("phases");
  if (!p || !p->is_object()) return "";
  std::string parts;
  for (const auto& [key, v] : p->as_object()) {
    // The compile phase always shows, with whether the cache had it.
    if (key == "wall_s" || key == "other_s" || !v.is_number() || (v.as_number() < 0.0005 && key != "compile_s"))
      continue;
    std::string note = key == "compile_s" ? compile_note(r) : "";
    parts += fmt::format("{}{} {:.3f} s{}", parts.empty() ? "" : ", ", phase_words(key), v.as_number(),
                         note.empty() ? "" : " (" + note + ")");
  }
  parts += fmt::format("{}other {:.3f} s", parts.empty() ? "" : ", ", p->get_number("other_s"));
  return fmt::format("{:.3f} s: {}", p->get_number("wall_s"), parts);
}

void print_phases_table(std::FILE* out, const EvalResult& r) {
  const Json* p = r.metrics.find("phases");
  if (!p || !p->is_object()) return;
  const double wall = p->get_number("wall_s");
  for (const auto& [key, v] : p->as_object()) {
    if (!v.is_number()) continue;
    const std::string note = key == "compile_s" ? compile_note(r) : "";
    say(out, "  {:<20} {:>9.4f} s {:>6.1f} %{}\n", phase_words(key), v.as_number(),
        wall > 0 ? 100 * v.as_number() / wall : 0.0, note.empty() ? "" : "   " + note);
  }
}

Json read_baseline_latencies(const std::string& path) {
  std::string text;
  try {
    text = read_file(path, std::size_t{64} << 20);
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("--baseline-latencies: {}", e.what()));
  }
  std::string err;
  auto j = Json::try_parse(text, &err);
  if (!j) throw Error(Status::invalid_argument, fmt::format("--baseline-latencies {}: not valid JSON: {}", path, err));
  if (!j->is_object())
    throw Error(Status::invalid_argument,
                fmt::format("--baseline-latencies {}: expected {{\"<device>\": {{\"<workload>\": ms}}}}", path));
  return *j;
}

void print_summary(std::FILE* out, const SearchOutcome& o) {
  std::string recorded = o.recorded_rounds > 0 ? fmt::format(", {} taken from the recording", o.recorded_rounds) : "";
  say(out, "\nksearch: {} after {} rounds ({} replayed{}) in {:.1f} s on {}\n", ks::to_string(o.stop_reason), o.rounds,
      o.replayed_rounds, recorded, o.wall_s, o.device.name.empty() ? o.device.backend : o.device.name);
  if (o.usage.input_tokens || o.usage.output_tokens)
    say(out, "LLM: {} tokens in, {} out ({} reasoning), ${:.4f}\n", o.usage.input_tokens, o.usage.output_tokens,
        o.usage.reasoning_tokens, o.usage.cost_usd);
  if (!o.best) {
    say(out, "No candidate passed. See the attempts in {}\n", o.run_dir.string());
    return;
  }
  const auto& b = *o.best;
  say(out, "Best: {} (round {}): {}\n", b.solution.id, b.round, eval_headline(b.eval));
  if (o.first_pass_latency_ms > 0 && o.first_pass_round != b.round)
    say(out, "Improvement: {:.2f}x over the first passing kernel (round {}, {:.4f} ms)\n",
        o.first_pass_latency_ms / b.eval.latency_ms, o.first_pass_round, o.first_pass_latency_ms);
  // A tuned kernel: the configuration found (per-shape values too, if any).
  if (const ks::Params& params = b.solution.params; !params.values.empty()) {
    std::string config;  // in declaration order, as the tuner writes "values"
    for (const auto& d : params.space)
      if (auto it = params.values.find(d.name); it != params.values.end())
        config += fmt::format("{}{}={}", config.empty() ? "" : " ", d.name, it->second);
    say(out, "Configuration: {}\n", config);
    if (const auto& pw = params.per_workload; !pw.empty())
      say(out, "  with per-shape values for {} workload{} (best/solution.json, \"per_workload\")\n", pw.size(),
          pw.size() == 1 ? "" : "s");
  }
  print_eval_table(out, b.eval);
  if (!o.feedback_workloads.empty()) {
    std::string names;
    for (const auto& w : o.feedback_workloads) names += (names.empty() ? "" : ", ") + w;
    say(out, "\nThe search evaluated {} feedback workload{} each round: {}\n", o.feedback_workloads.size(),
        o.feedback_workloads.size() == 1 ? "" : "s", names);
  }
  if (o.final_eval) {
    say(out, "\nFinal evaluation of the best kernel on every workload: {}\n",
        o.final_eval->passed() ? eval_headline(*o.final_eval) : o.final_eval->summary());
    print_eval_table(out, *o.final_eval);
  }
  say(out, "Run folder: {} (best kernel in {}/best)\n", o.run_dir.string(), o.run_dir.string());
  std::fflush(out);
}

}  // namespace ks::cli
