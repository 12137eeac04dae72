// The comparison of runs (compare.cpp's data) as an HTML page and as text.
// The page is the run report's style (its CSS) with the plots drawn here as
// inline SVG: it needs no script, loads nothing, and every label from a run
// folder is escaped.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "ksearch/report.hpp"
#include "report/assets.hpp"
#include "report/html.hpp"
#include "report/tree_view.hpp"

KS_NAMESPACE_BEGIN

namespace {

using report::esc;
using report::num_field;
using report::str_field;

// One colour per label, in the order the labels first appear.
constexpr const char* kPalette[] = {"#1565c0", "#2e7d32", "#c62828", "#6a1b9a",
                                    "#ef6c00", "#00838f", "#4e342e", "#ad1457"};

const char* colour(std::size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

std::size_t label_index(const Json& data, const std::string& label) {
  const auto& groups = data["groups"].as_array();
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (groups[i]["label"].as_string() == label) return i;
  return 0;
}

std::optional<double> number(const Json& j) {
  if (j.is_number() && std::isfinite(j.as_number())) return j.as_number();
  return std::nullopt;
}

std::string fmt_ms(const Json& v) {
  auto x = number(v);
  return x && *x > 0 ? fmt::format("{:.4g}", *x) : "-";
}
std::string fmt_score(const Json& v) {
  auto x = number(v);
  return x ? fmt::format("{:.1f}", *x) : "-";
}
std::string fmt_int(const Json& v) {
  auto x = number(v);
  return x ? fmt::format("{}", static_cast<long long>(std::llround(*x))) : "-";
}
std::string fmt_mean(const Json& v) {  // a mean of counts: an integer when it is one
  auto x = number(v);
  if (!x) return "-";
  return std::fabs(*x - std::round(*x)) < 1e-9 ? fmt::format("{}", static_cast<long long>(std::llround(*x)))
                                              : fmt::format("{:.1f}", *x);
}
std::string fmt_s(const Json& v) {
  auto x = number(v);
  return x ? fmt::format("{:.1f}", *x) : "-";
}

// "mean [min-max]" of a stats object, each value written by `f`.
std::string spread(const Json& st, const std::function<std::string(const Json&)>& f) {
  if (!st.is_object()) return "-";
  std::string out = f(st["mean"]);
  if (st["n"].as_int() > 1) out += fmt::format(" [{}-{}]", f(st["min"]), f(st["max"]));
  return out;
}

std::string fraction(const Json& w) {
  if (!w.is_object()) return "-";
  return fmt::format("{}/{} ({:.0f} %)", w["at_least"].as_int(), w["workloads"].as_int(),
                     100.0 * w["fraction"].as_number());
}

std::string calls_cell(const Json& llm) {
  return fmt::format("{} ({}+{})", llm["calls"].as_int(), llm["code_calls"].as_int(), llm["world_model_calls"].as_int());
}

// ---------------------------------------------------------------------------
// SVG

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double px_lo = 0, px_hi = 1;  // pixel positions of lo and hi
  double at(double v) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return px_lo + t * (px_hi - px_lo);
  }
};

double nice_step(double span, int target) {
  const double raw = span / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::vector<double> ticks(const Axis& a) {
  std::vector<double> out;
  if (a.log) {
    for (int d = static_cast<int>(std::floor(std::log10(a.lo))); d <= static_cast<int>(std::ceil(std::log10(a.hi))); ++d)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, d);
        if (v >= a.lo * (1 - 1e-9) && v <= a.hi * (1 + 1e-9)) out.push_back(v);
      }
    if (out.size() < 2) out = {a.lo, a.hi};
    return out;
  }
  const double step = nice_step(a.hi - a.lo, 5);
  for (double v = std::ceil(a.lo / step) * step; v <= a.hi + step * 1e-9; v += step) out.push_back(v);
  return out;
}

std::string tick_text(double v) {
  if (v >= 100) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

// One line of a chart: values by round (index 0 = round 1), nullable.
struct Line {
  std::vector<std::optional<double>> v;
  std::string colour, tip;
  double width = 1.5;
  double opacity = 1;
};

std::vector<std::optional<double>> curve_of(const Json& c, const char* field = nullptr) {
  std::vector<std::optional<double>> out;
  if (!c.is_array()) return out;
  for (const auto& x : c.as_array()) out.push_back(field ? (x.is_object() ? number(x[field]) : std::nullopt) : number(x));
  return out;
}

// A best-so-far curve as steps: flat to the next round, then up or down.
std::string step_path(const std::vector<std::optional<double>>& v, const Axis& x, const Axis& y) {
  std::string d;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i]) continue;
    const double px = x.at(static_cast<double>(i + 1)), py = y.at(*v[i]);
    if (d.empty()) d = fmt::format("M{:.1f},{:.1f}", px, py);
    else d += fmt::format(" H{:.1f} V{:.1f}", px, py);
  }
  return d;
}

struct Chart {
  int width = 900, height = 340;
  int left = 70, right = 20, top = 14, bottom = 44;
};

// The best-so-far chart of one quantity (latency: log scale, lower is
// better; score: linear). `field` is "best_latency_ms" or "best_score".
std::string best_chart(const Json& data, const char* field, bool log, const std::string& y_label) {
  const Chart c;
  const int max_round = std::max<int>(1, static_cast<int>(data["max_round"].as_int()));
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& r : data["runs"].as_array())
    for (const auto& v : curve_of(r["curve"][field]))
      if (v && (!log || *v > 0)) {
        lo = any ? std::min(lo, *v) : *v;
        hi = any ? std::max(hi, *v) : *v;
        any = true;
      }
  if (!any) return "<p class=\"note\">No run has a passing kernel yet.</p>";
  Axis y{lo, hi, log, static_cast<double>(c.height - c.bottom), static_cast<double>(c.top)};
  if (log) {
    y.lo = lo / 1.25;
    y.hi = hi * 1.25;
  } else {
    const double pad = hi > lo ? (hi - lo) * 0.08 : std::max(1.0, std::fabs(hi) * 0.1);
    y.lo = std::max(0.0, lo - pad);
    y.hi = hi + pad;
  }
  Axis x{0.5, max_round + 0.5, false, static_cast<double>(c.left), static_cast<double>(c.width - c.right)};
  std::string body = "<g class=\"grid\">";
  for (double t : ticks(y)) body += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>", c.left, c.width - c.right, y.at(t), y.at(t));
  body += "</g><g class=\"axis\">";
  body += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/><line x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\"/>",
                      c.left, c.top, c.height - c.bottom, c.width - c.right);
  for (double t : ticks(y))
    body += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", c.left - 6, y.at(t) + 4, tick_text(t));
  const int xstep = std::max(1, static_cast<int>(nice_step(max_round, 10)));
  for (int r = 1; r <= max_round; ++r)
    if (r == 1 || r % xstep == 0 || r == max_round)
      body += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"/><text x=\"{0:.1f}\" y=\"{3}\" "
                          "text-anchor=\"middle\">{4}</text>",
                          x.at(r), c.height - c.bottom, c.height - c.bottom + 4, c.height - c.bottom + 17, r);
  body += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"muted\">round</text>",
                      (c.left + c.width - c.right) / 2, c.height - 6);
  body += fmt::format("<text x=\"14\" y=\"{0}\" text-anchor=\"middle\" class=\"muted\" transform=\"rotate(-90 14 {0})\">{1}</text>",
                      (c.top + c.height - c.bottom) / 2, esc(y_label));
  body += "</g>";

  // Bands and means of labels with several runs, then every run, then the
  // rounds-to-90 rings on top.
  const auto& groups = data["groups"].as_array();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Json& gc = groups[g]["curve"][field];
    if (groups[g]["runs"].size() < 2 || !gc.is_array()) continue;
    auto lo_c = curve_of(gc, "min"), hi_c = curve_of(gc, "max");
    std::string upper = step_path(hi_c, x, y), lower;
    // The lower edge, walked back from the last round.
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < lo_c.size(); ++i)
      if (lo_c[i]) {
        if (!pts.empty()) pts.emplace_back(x.at(static_cast<double>(i + 1)), pts.back().second);
        pts.emplace_back(x.at(static_cast<double>(i + 1)), y.at(*lo_c[i]));
      }
    for (auto it = pts.rbegin(); it != pts.rend(); ++it) lower += fmt::format(" L{:.1f},{:.1f}", it->first, it->second);
    if (!upper.empty())
      body += fmt::format("<path d=\"{}{} Z\" fill=\"{}\" fill-opacity=\"0.14\" stroke=\"none\"><title>{}: min-max over {} "
                          "runs</title></path>",
                          upper, lower, colour(g), esc(groups[g]["label"].as_string()), groups[g]["runs"].size());
    body += fmt::format("<path class=\"mean\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"3\"><title>{}: mean over "
                        "{} runs</title></path>",
                        step_path(curve_of(gc, "mean"), x, y), colour(g), esc(groups[g]["label"].as_string()),
                        groups[g]["runs"].size());
  }
  std::string rings;
  for (const auto& r : data["runs"].as_array()) {
    const std::size_t g = label_index(data, r["label"].as_string());
    const bool alone = groups[g]["runs"].size() < 2;
    const auto v = curve_of(r["curve"][field]);
    const std::string who = r["label"].as_string() + " / " + r["name"].as_string();
    const std::string best = log ? fmt_ms(r[field]) + " ms" : fmt_score(r[field]);
    body += fmt::format("<path class=\"run\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" stroke-opacity=\"{}\">"
                        "<title>{}: best {} after {} rounds</title></path>",
                        step_path(v, x, y), colour(g), alone ? 2.5 : 1.2, alone ? 1.0 : 0.6, esc(who), esc(best),
                        r["rounds"].as_int());
    const Json& r90 = r[log ? "rounds_to_90" : "rounds_to_90_score"];
    if (r90.is_number()) {
      const auto i = static_cast<std::size_t>(r90.as_int() - 1);
      if (i < v.size() && v[i])
        rings += fmt::format("<circle class=\"r90\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"#fff\" stroke=\"{}\" "
                             "stroke-width=\"2\"><title>{}: within 90 % of its final best at round {}</title></circle>",
                             x.at(static_cast<double>(i + 1)), y.at(*v[i]), colour(g), esc(who), r90.as_int());
    }
  }
  body += rings;
  return fmt::format("<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\">{3}</svg>",
                     c.width, c.height, esc(y_label + " by round"), body);
}

std::string legend(const Json& data) {
  std::string out = "<div class=\"legend\">";
  const auto& groups = data["groups"].as_array();
  for (std::size_t g = 0; g < groups.size(); ++g)
    out += fmt::format("<span><span class=\"sw\" style=\"background:{}\"></span>{} ({} run{})</span>", colour(g),
                       esc(groups[g]["label"].as_string()), groups[g]["runs"].size(),
                       groups[g]["runs"].size() == 1 ? "" : "s");
  return out + "</div>\n";
}

// Horizontal bars per run: calls (code and world model), and tokens (input
// and output) where any were counted.
std::string llm_chart(const Json& data) {
  const auto& runs = data["runs"].as_array();
  double max_calls = 1, max_tokens = 0;
  for (const auto& r : runs) {
    max_calls = std::max(max_calls, r["llm"]["calls"].as_number());
    max_tokens = std::max(max_tokens, r["llm"]["input_tokens"].as_number() + r["llm"]["output_tokens"].as_number());
  }
  const int row = 22, name_w = 230, bar_w = max_tokens > 0 ? 300 : 560, gap = 40;
  const int width = name_w + bar_w + (max_tokens > 0 ? gap + bar_w : 0) + 120;
  const int height = 24 + row * static_cast<int>(runs.size()) + 8;
  std::string body = fmt::format("<text x=\"{}\" y=\"14\" class=\"muted\">calls: code, world model</text>", name_w);
  if (max_tokens > 0)
    body += fmt::format("<text x=\"{}\" y=\"14\" class=\"muted\">tokens: input, output</text>", name_w + bar_w + gap);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Json& r = runs[i];
    const Json& l = r["llm"];
    const int y = 24 + row * static_cast<int>(i);
    const std::string who = r["label"].as_string() + " / " + r["name"].as_string();
    body += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", name_w - 8, y + 13, esc(who));
    const double code = l["code_calls"].as_number(), other = l["calls"].as_number() - code;
    const double wc = bar_w * code / max_calls, wo = bar_w * other / max_calls;
    body += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"14\" fill=\"#1565c0\"><title>{}: {} code calls</title></rect>",
                        name_w, y + 2, wc, esc(who), l["code_calls"].as_int());
    body += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"14\" fill=\"#8e24aa\"><title>{}: {} other calls "
                        "({} world model)</title></rect>",
                        name_w + wc, y + 2, wo, esc(who), static_cast<long long>(other), l["world_model_calls"].as_int());
    body += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>", name_w + wc + wo + 4, y + 13, l["calls"].as_int());
    if (max_tokens > 0) {
      const double in = l["input_tokens"].as_number(), out = l["output_tokens"].as_number();
      const double x0 = name_w + bar_w + gap, wi = bar_w * in / max_tokens, wt = bar_w * out / max_tokens;
      body += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"14\" fill=\"#00838f\"><title>{}: {} input "
                          "tokens</title></rect><rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"14\" fill=\"#ef6c00\">"
                          "<title>{}: {} output tokens</title></rect><text x=\"{:.1f}\" y=\"{}\">{}</text>",
                          x0, y + 2, wi, esc(who), l["input_tokens"].as_int(), x0 + wi, y + 2, wt, esc(who),
                          l["output_tokens"].as_int(), x0 + wi + wt + 4, y + 13,
                          l["input_tokens"].as_int() + l["output_tokens"].as_int());
    }
  }
  return fmt::format("<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"LLM calls and "
                     "tokens per run\">{2}</svg>",
                     width, height, body);
}

std::string llm_legend(const Json& data) {
  bool tokens = false;
  for (const auto& r : data["runs"].as_array())
    tokens = tokens || r["llm"]["input_tokens"].as_int() + r["llm"]["output_tokens"].as_int() > 0;
  std::string out = "<div class=\"legend\"><span><span class=\"sw\" style=\"background:#1565c0\"></span>code calls</span>"
                    "<span><span class=\"sw\" style=\"background:#8e24aa\"></span>world-model and other calls</span>";
  if (tokens)
    out += "<span><span class=\"sw\" style=\"background:#00838f\"></span>input tokens</span>"
           "<span><span class=\"sw\" style=\"background:#ef6c00\"></span>output tokens</span>";
  else
    out += "<span>no token counts recorded (a command or offline model reports none)</span>";
  return out + "</div>\n";
}

// ---------------------------------------------------------------------------
// Tables (HTML and text share the cells)

struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

bool has_fraction(const Json& data) {
  for (const auto& r : data["runs"].as_array())
    if (r["workloads_at_least"].is_object()) return true;
  return false;
}

std::string at_least_head(const Json& data) {
  return fmt::format("workloads >= {:g}x baseline", data["at_least"].as_number());
}

Table runs_table(const Json& data) {
  const bool score = data["score"].as_bool(), frac = has_fraction(data);
  Table t;
  t.head = {"label", "run", "strategy", "model", "rounds", "best ms", "+-", "timed calls"};
  if (score) t.head.push_back("best score");
  t.head.insert(t.head.end(), {"best round", "to 90%"});
  if (score) t.head.push_back("to 90% (score)");
  t.head.insert(t.head.end(), {"calls (code+wm)", "tokens in", "tokens out", "wall s"});
  if (frac) t.head.push_back(at_least_head(data));
  t.head.push_back("status");
  for (const auto& r : data["runs"].as_array()) {
    std::vector<std::string> row = {r["label"].as_string(), r["name"].as_string(), r["strategy"].as_string(),
                                    r["model"].as_string(),
                                    fmt::format("{}/{}", r["rounds"].as_int(), fmt_int(r["max_rounds"])),
                                    fmt_ms(r["best_latency_ms"]),
                                    r["best_ci_pct"].is_number() ? fmt::format("{:.1f}%", r["best_ci_pct"].as_number())
                                                                 : "-",
                                    fmt_int(r["best_timed_calls"])};
    if (score) row.push_back(fmt_score(r["best_score"]));
    row.insert(row.end(), {fmt_int(r["best_round"]), fmt_int(r["rounds_to_90"])});
    if (score) row.push_back(fmt_int(r["rounds_to_90_score"]));
    row.insert(row.end(), {calls_cell(r["llm"]), fmt_int(r["llm"]["input_tokens"]), fmt_int(r["llm"]["output_tokens"]),
                           r["replayed"].as_bool() ? "replay" : fmt_s(r["wall_s"])});
    if (frac) row.push_back(fraction(r["workloads_at_least"]));
    std::string st = r["status"].as_string();
    if (!r["stop_reason"].as_string().empty()) st += " (" + r["stop_reason"].as_string() + ")";
    row.push_back(st);
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table groups_table(const Json& data) {
  const bool score = data["score"].as_bool(), frac = has_fraction(data);
  Table t;
  t.head = {"label", "runs", "best ms"};
  if (score) t.head.push_back("best score");
  t.head.push_back("to 90%");
  if (score) t.head.push_back("to 90% (score)");
  t.head.insert(t.head.end(), {"calls", "wm calls", "tokens in", "tokens out", "wall s"});
  if (frac) t.head.push_back(at_least_head(data));
  for (const auto& g : data["groups"].as_array()) {
    std::vector<std::string> row = {g["label"].as_string(), fmt::format("{}", g["runs"].size()),
                                    spread(g["best_latency_ms"], fmt_ms)};
    if (score) row.push_back(spread(g["best_score"], fmt_score));
    row.push_back(spread(g["rounds_to_90"], fmt_mean));
    if (score) row.push_back(spread(g["rounds_to_90_score"], fmt_mean));
    row.insert(row.end(), {spread(g["llm_calls"], fmt_mean), spread(g["world_model_calls"], fmt_mean),
                           spread(g["input_tokens"], fmt_mean), spread(g["output_tokens"], fmt_mean),
                           spread(g["wall_s"], fmt_s)});
    if (frac)
      row.push_back(spread(g["workloads_at_least_fraction"], [](const Json& v) {
        auto x = number(v);
        return x ? fmt::format("{:.0f} %", 100 * *x) : std::string("-");
      }));
    t.rows.push_back(std::move(row));
  }
  return t;
}

// The rounds a by-round table shows: all of them up to 25, else about 25
// evenly spaced and the last.
std::vector<int> table_rounds(int max_round) {
  std::vector<int> out;
  const int step = std::max(1, (max_round + 24) / 25);
  for (int r = step; r <= max_round; r += step) out.push_back(r);
  if (max_round > 0 && (out.empty() || out.back() != max_round)) out.push_back(max_round);
  if (step > 1) out.insert(out.begin(), 1);
  return out;
}

Table by_round_table(const Json& data, const char* field, const std::function<std::string(const Json&)>& f) {
  Table t;
  t.head = {"round"};
  for (const auto& g : data["groups"].as_array()) t.head.push_back(g["label"].as_string());
  for (int r : table_rounds(static_cast<int>(data["max_round"].as_int()))) {
    std::vector<std::string> row = {fmt::format("{}", r)};
    for (const auto& g : data["groups"].as_array()) {
      const Json& c = g["curve"][field];
      const auto i = static_cast<std::size_t>(r - 1);
      row.push_back(c.is_array() && i < c.size() ? spread(c[i], f) : "-");
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string html_table(const Table& t, const char* id) {
  std::string out = fmt::format("<table class=\"grid\" id=\"{}\">\n<tr>", id);
  for (const auto& h : t.head) out += "<th>" + esc(h) + "</th>";
  out += "</tr>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (const auto& cell : row) out += "<td>" + esc(cell) + "</td>";
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

// Display width of UTF-8 text: one column per code point.
std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string text_table(const Table& t) {
  std::vector<std::size_t> w(t.head.size(), 0);
  for (std::size_t i = 0; i < t.head.size(); ++i) w[i] = columns(t.head[i]);
  for (const auto& row : t.rows)
    for (std::size_t i = 0; i < row.size() && i < w.size(); ++i) w[i] = std::max(w[i], columns(row[i]));
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      out += cells[i];
      if (i + 1 < cells.size()) out += std::string(w[i] - columns(cells[i]) + 2, ' ');
    }
    return out + "\n";
  };
  std::string out = line(t.head);
  for (const auto& row : t.rows) out += line(row);
  return out;
}

std::string compare_summary_html(const Json& data) {
  auto row = [](std::string_view k, const std::string& v) { return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", k, v); };
  std::string out = "<table class=\"kv\">\n";
  out += row("task", esc(data["task"].as_string()));
  out += row("runs", fmt::format("{} in {} label(s), up to {} rounds", data["runs"].size(), data["groups"].size(),
                                 data["max_round"].as_int()));
  std::string labels;
  for (const auto& g : data["groups"].as_array()) {
    const std::string st = spread(g["best_latency_ms"], fmt_ms);
    labels += fmt::format("{}<strong>{}</strong>: best {} ms, within 90 % after {} rounds", labels.empty() ? "" : "<br>",
                          esc(g["label"].as_string()), esc(st), esc(spread(g["rounds_to_90"], fmt_mean)));
    if (g["best_score"].is_object()) labels += ", best score " + esc(spread(g["best_score"], fmt_score));
  }
  out += row("best (mean over runs)", labels);
  out += row("generated", esc(data["generated"].as_string()));
  return out + "</table>\n";
}

std::string compare_warnings_html(const Json& warnings) {
  if (!warnings.is_array() || warnings.empty()) return "";
  std::string out = "<div class=\"warnings\"><strong>Not like for like:</strong><ul>\n";
  for (const auto& w : warnings.as_array()) out += "<li>" + esc(w.is_string() ? w.as_string() : w.dump()) + "</li>\n";
  return out + "</ul></div>\n";
}

std::string definitions_html(const Json& data) {
  std::string out = "<dl>\n";
  for (const auto& [k, v] : data["definitions"].as_object())
    out += fmt::format("<dt><code>{}</code></dt><dd>{}</dd>\n", esc(k), esc(v.is_string() ? v.as_string() : v.dump()));
  return out + "</dl>\n";
}

}  // namespace

std::string render_compare_report(const Json& data) {
  const std::string title = "ksearch compare: " + str_field(data, "task");
  std::string score_section;
  if (data["score"].as_bool())
    score_section = "<section id=\"score\">\n<h2>Best score so far over rounds</h2>\n<p class=\"note\">Score: 100 &times; "
                    "the mean over workloads of the baseline's latency over the kernel's (100 is the baseline's "
                    "speed). A ring marks the round where a run reached 90&nbsp;% of its final best score.</p>\n" +
                    legend(data) + "<div class=\"chart\" id=\"score-chart\">" +
                    best_chart(data, "best_score", false, "best score") + "</div>\n" +
                    html_table(by_round_table(data, "best_score", fmt_score), "score-by-round") + "</section>\n";
  const std::string body = report::fill(
      std::string(report::assets::compare_page),
      {{"SUMMARY", compare_summary_html(data)},
       {"WARNINGS", compare_warnings_html(data["warnings"])},
       {"LATENCY_LEGEND", legend(data)},
       {"LATENCY_CHART", best_chart(data, "best_latency_ms", true, "best latency (ms)") +
                             html_table(by_round_table(data, "best_latency_ms", fmt_ms), "latency-by-round")},
       {"SCORE_SECTION", score_section},
       {"GROUPS_TABLE", html_table(groups_table(data), "groups-table")},
       {"RUNS_TABLE", html_table(runs_table(data), "runs-table")},
       {"LLM_LEGEND", llm_legend(data)},
       {"LLM_CHART", llm_chart(data)},
       {"DEFINITIONS", definitions_html(data)},
       {"DATA", report::script_json(data)}});
  return report::html_page(title, body);
}

std::string render_compare_text(const Json& data) {
  std::string out = fmt::format("Task {}: {} run(s) in {} label(s)\n\nRuns\n", data["task"].as_string(),
                                data["runs"].size(), data["groups"].size());
  out += text_table(runs_table(data));
  out += "\nLabels (mean [min-max] over runs)\n" + text_table(groups_table(data));
  out += "\nBest latency so far by round (ms; a label's mean [min-max] over its runs)\n" +
         text_table(by_round_table(data, "best_latency_ms", fmt_ms));
  if (data["score"].as_bool())
    out += "\nBest score so far by round (100 = the baseline's speed)\n" +
           text_table(by_round_table(data, "best_score", fmt_score));
  out += "\nto 90%: the first round whose best so far is within 90 % of the run's final best (latency <= final / 0.9)\n";
  for (const auto& w : data["warnings"].as_array()) out += "note: " + w.as_string() + "\n";
  return out;
}

KS_NAMESPACE_END
