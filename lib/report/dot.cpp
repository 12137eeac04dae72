// The world-model tree in Graphviz dot (`ksearch show RUN --dot`).
#include <fmt/format.h>

#include "ksearch/report.hpp"
#include "report/tree_view.hpp"

namespace ks {

namespace {

// A dot string literal: quotes and backslashes escaped, line breaks as \n
// (centred lines), other control characters dropped.
std::string dot_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  return out + "\"";
}

std::string shorten(const std::string& s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t n = max - 3;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

// The same colours as the HTML report's legend.
const char* fill_of(const std::string& status) {
  if (status == "root") return "#e0e0e0";
  if (status == "solved") return "#a5d6a7";
  if (status == "active") return "#90caf9";
  if (status == "open") return "#fff59d";
  if (status == "too_hard") return "#ef9a9a";
  if (status == "waiting") return "#f5f5f5";
  return "#ffffff";  // decision
}

}  // namespace

namespace report {

std::string tree_dot(const Json& world_model, const std::string& title, const std::set<std::string>& failed) {
  TreeView t = read_tree(world_model, failed);
  std::string out = "digraph world_model {\n";
  std::string label = title.empty() ? fmt::format("world model v{}", t.version) : title;
  out += fmt::format("  graph [rankdir=TB, labelloc=t, label={}, fontname=\"Helvetica\"];\n", dot_string(label));
  out += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  out += "  edge [color=\"#757575\"];\n";
  for (const auto& n : t.nodes) {
    std::string text = n.id + (n.title.empty() ? "" : ": " + shorten(n.title, 60));
    std::string line2 = n.status;
    if (n.score) line2 += fmt::format(" | V {:.2f}", *n.score);
    if (n.difficulty) line2 += fmt::format(" | difficulty {}", n.difficulty);
    if (n.status == "root") text = n.id;
    else text += "\n" + line2;
    if (!n.solution_id.empty()) {
      text += "\nkernel " + n.solution_id.substr(0, 12);
      if (n.latency_ms > 0) text += fmt::format(": {:.4g} ms", n.latency_ms);
      if (n.speedup > 0) text += fmt::format(" ({:.2f}x)", n.speedup);
    }
    std::string attrs = fmt::format("label={}, fillcolor=\"{}\"", dot_string(text), fill_of(n.status));
    if (n.id == t.active_id) attrs += ", penwidth=2.5";
    if (n.status == "waiting" || n.status == "decision") attrs += ", color=\"#9e9e9e\"";
    out += fmt::format("  {} [{}];\n", dot_string(n.id), attrs);
  }
  for (const auto& n : t.nodes)
    if (!n.parent.empty()) out += fmt::format("  {} -> {};\n", dot_string(n.parent), dot_string(n.id));
  out += "}\n";
  return out;
}

}  // namespace report

}  // namespace ks

KS_NAMESPACE_BEGIN

std::string world_model_dot(const Json& world_model, const std::string& title) {
  return report::tree_dot(world_model, title, {});
}

KS_NAMESPACE_END
