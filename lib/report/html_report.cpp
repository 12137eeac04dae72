// The HTML report: one file with inline CSS, JavaScript and data. The
// server-side part renders what reads without JavaScript (summary, tables,
// source, all HTML-escaped); the script draws the charts and the tree as SVG
// from the embedded data (lib/report/assets/report.js).
#include <fmt/format.h>

#include <cmath>

#include "ksearch/report.hpp"
#include "report/assets.hpp"
#include "report/html.hpp"
#include "report/tree_view.hpp"

KS_NAMESPACE_BEGIN

namespace {

using report::esc;
using report::fill;
using report::ms;
using report::num_field;
using report::script_json;
using report::str_field;

std::string summary_html(const Json& data) {
  const Json& r = data["run"];
  const Json& u = r["usage"];
  const Json& best = data["best"];
  auto row = [](std::string_view k, const std::string& v) { return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", k, v); };
  std::string status = str_field(r, "status", "unknown");
  std::string st = fmt::format("<span class=\"badge st-{}\">{}</span>", esc(status), esc(status));
  if (!str_field(r, "stop_reason").empty()) st += " " + esc(str_field(r, "stop_reason"));
  if (status == "running") st += fmt::format(" (in progress; report made {})", esc(str_field(data, "generated")));
  std::string out = "<table class=\"kv\">\n";
  out += row("task", esc(str_field(r, "task")));
  out += row("status", st);
  if (!str_field(r, "error").empty()) out += row("error", esc(str_field(r, "error")));
  out += row("strategy / language", esc(str_field(r, "strategy")) + " / " + esc(str_field(r, "language")));
  out += row("model", esc(str_field(r, "model", str_field(r, "llm"))));
  int attempts = static_cast<int>(data["attempts"].size());
  out += row("rounds", fmt::format("{} of {} ({} attempts)", static_cast<long long>(num_field(r, "rounds").value_or(0)),
                                   static_cast<long long>(num_field(r, "max_rounds").value_or(0)), attempts));
  if (best.is_object()) {
    std::string b = fmt::format("{} (round {}): {}", esc(str_field(best, "solution_id")),
                                static_cast<long long>(num_field(best, "round").value_or(0)),
                                ms(num_field(best, "latency_ms").value_or(0)));
    double sp = num_field(best, "speedup").value_or(0);
    if (sp > 0) b += fmt::format(", {:.2f}x the reference's {}", sp, ms(num_field(best, "reference_latency_ms").value_or(0)));
    if (double vb = num_field(best, "vs_baseline").value_or(0); vb > 0)
      b += fmt::format(", {:.2f}x the task's baseline (mean over workloads)", vb);
    out += row("best kernel", b);
  } else {
    out += row("best kernel", "none passed yet");
  }
  out += row("LLM", fmt::format("{} calls, {} tokens in, {} out ({} reasoning), ${:.4f}",
                                static_cast<long long>(num_field(r, "llm_calls").value_or(0)),
                                static_cast<long long>(num_field(u, "input_tokens").value_or(0)),
                                static_cast<long long>(num_field(u, "output_tokens").value_or(0)),
                                static_cast<long long>(num_field(u, "reasoning_tokens").value_or(0)),
                                num_field(u, "cost_usd").value_or(0)));
  if (const Json& w = r["world_model"]; w.is_object()) {
    std::string mode = w.get_bool("lenient")
                           ? fmt::format("lenient edits, {} repairs in {} edits",
                                         static_cast<long long>(num_field(w, "repairs").value_or(0)),
                                         static_cast<long long>(num_field(w, "repaired_edits").value_or(0)))
                           : "strict edits";
    out += row("world model", fmt::format("{} edits committed, {} answers rejected, {} fallbacks; {}",
                                          static_cast<long long>(num_field(w, "edits").value_or(0)),
                                          static_cast<long long>(num_field(w, "rejected").value_or(0)),
                                          static_cast<long long>(num_field(w, "fallbacks").value_or(0)), mode));
  }
  out += row("device", esc(str_field(r, "device")));
  out += row("started / finished", esc(str_field(r, "created")) + " / " + esc(str_field(r, "finished", "-")));
  out += row("run folder", "<code>" + esc(str_field(r, "dir")) + "</code>");
  out += row("library", esc(str_field(r, "library_version")));
  return out + "</table>\n";
}

std::string workload_table(const Json& best) {
  if (!best.is_object()) return "<p>No kernel has passed yet.</p>\n";
  const Json& names = best["baselines"];
  std::string out = "<table class=\"grid\" id=\"workload-table\">\n<tr><th>workload</th><th>status</th><th>latency</th>"
                    "<th>&plusmn; (95%)</th><th>mean</th><th>median</th><th>reference</th><th>speedup</th>";
  for (const auto& n : names.as_array()) out += "<th>" + esc(n.as_string()) + "</th>";
  out += "<th>reps</th></tr>\n";
  for (const auto& w : best["workloads"].as_array()) {
    // Reports of runs made before the latency statistic read the mean.
    double mean = num_field(w, "mean_ms").value_or(0), ref = num_field(w, "reference_ms").value_or(0);
    double lat = num_field(w, "latency_ms").value_or(mean);
    auto ci = num_field(w, "ci_pct");
    std::string stat = str_field(w, "statistic");
    out += fmt::format("<tr><td>{}{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                       esc(str_field(w, "name")), w.get_bool("benchmark") ? "" : " <small>(check only)</small>",
                       esc(str_field(w, "status")), ms(lat), stat.empty() ? "" : " <small>(" + esc(stat) + ")</small>",
                       ci && lat > 0 ? fmt::format("{:.1f}%", *ci) : "-", ms(mean),
                       ms(num_field(w, "median_ms").value_or(0)), ms(ref) + (w.get_bool("paired") ? " <small>(beside it)</small>" : ""),
                       num_field(w, "speedup") ? fmt::format("{:.2f}x", *num_field(w, "speedup"))
                       : lat > 0 && ref > 0    ? fmt::format("{:.2f}x", ref / lat)
                                               : "-");
    for (const auto& n : names.as_array())
      out += "<td>" + ms(num_field(w["baselines"], n.as_string()).value_or(0)) + "</td>";
    auto reps = num_field(w, "reps");
    out += fmt::format("<td>{}</td></tr>\n", reps ? fmt::format("{}", static_cast<long long>(*reps)) : "-");
  }
  return out + "</table>\n";
}

std::string attempts_table(const Json& attempts) {
  std::string out = "<table class=\"grid\" id=\"attempts-table\">\n<tr><th>seq</th><th>round</th><th>status</th>"
                    "<th>latency</th><th>best so far</th><th>solution</th><th>action</th><th>reason</th></tr>\n";
  for (const auto& a : attempts.as_array()) {
    std::string status = str_field(a, "status");
    out += fmt::format("<tr{}><td>{}</td><td>{}</td><td><span class=\"badge st-{}\">{}</span></td><td>{}</td><td>{}</td>"
                       "<td><code>{}</code></td><td>{}</td><td class=\"reason\">{}</td></tr>\n",
                       a.get_bool("improved") ? " class=\"improved\"" : "",
                       static_cast<long long>(num_field(a, "seq").value_or(0)),
                       static_cast<long long>(num_field(a, "round").value_or(0)), esc(status), esc(status),
                       ms(num_field(a, "latency_ms").value_or(0)), ms(num_field(a, "best_ms").value_or(0)),
                       esc(str_field(a, "solution_id")), esc(str_field(a, "action")), esc(str_field(a, "reason")));
  }
  return out + "</table>\n";
}

std::string source_html(const Json& best) {
  if (!best.is_object()) return "<p>No kernel has passed yet.</p>\n";
  std::string out;
  for (const auto& s : best["sources"].as_array()) {
    out += fmt::format("<h3><code>{}</code></h3>\n", esc(str_field(s, "path")));
    if (s.get_bool("truncated"))
      out += fmt::format("<p class=\"warn\">Only the first {} of {} bytes are shown.</p>\n",
                         str_field(s, "content").size(), static_cast<long long>(num_field(s, "bytes").value_or(0)));
    out += "<pre class=\"source\"><code>" + esc(str_field(s, "content")) + "</code></pre>\n";
  }
  if (!str_field(best, "launch_plan").empty())
    out += "<h3>launch plan</h3>\n<pre class=\"source\"><code>" + esc(str_field(best, "launch_plan")) + "</code></pre>\n";
  return out;
}

std::string warnings_html(const Json& warnings) {
  if (warnings.empty()) return "";
  std::string out = "<div class=\"warnings\"><strong>Read with gaps:</strong><ul>\n";
  for (const auto& w : warnings.as_array()) out += "<li>" + esc(w.is_string() ? w.as_string() : w.dump()) + "</li>\n";
  return out + "</ul></div>\n";
}

}  // namespace

std::string render_run_report(const std::filesystem::path& run_dir, const ReportOptions& options) {
  Json data = run_report_data(run_dir, options);
  const Json& best = data["best"];
  std::string title = "ksearch report: " + str_field(data["run"], "task", run_dir.filename().string());
  const std::string body = fill(std::string(report::assets::report_page),
                                {{"JS", std::string(report::assets::report_js)},
                                 {"DATA", script_json(data)},
                                 {"SUMMARY", summary_html(data)},
                                 {"WARNINGS", warnings_html(data["warnings"])},
                                 {"WORKLOAD_TABLE", workload_table(best)},
                                 {"ATTEMPTS_TABLE", attempts_table(data["attempts"])},
                                 {"SOURCE", source_html(best)}});
  return report::html_page(title, body);
}

KS_NAMESPACE_END
