#include "report/tree_view.hpp"

namespace ks::report {

std::string str_field(const Json& j, std::string_view key, std::string def) {
  const Json* v = j.is_object() ? j.find(key) : nullptr;
  return v && v->is_string() ? v->as_string() : def;
}

std::optional<double> num_field(const Json& j, std::string_view key) {
  const Json* v = j.is_object() ? j.find(key) : nullptr;
  if (v && v->is_number()) return v->as_number();
  return std::nullopt;
}

TreeView read_tree(const Json& wm, const std::set<std::string>& failed) {
  TreeView t;
  const Json& dt = wm.is_object() ? wm["decision_tree"] : Json();
  t.root_id = str_field(dt, "root_id", "root");
  t.active_id = str_field(dt, "active_leaf_id");
  if (auto v = num_field(wm, "version")) t.version = static_cast<std::uint64_t>(*v);
  t.kernel_summary = str_field(wm, "kernel_summary");
  if (const Json* q = wm.is_object() ? wm.find("open_questions") : nullptr; q && q->is_array())
    for (const auto& s : q->as_array())
      if (s.is_string()) t.open_questions.push_back(s.as_string());
  const Json* nodes = dt.is_object() ? dt.find("nodes") : nullptr;
  if (!nodes || !nodes->is_array()) return t;

  std::set<std::string> solved;
  for (const auto& n : nodes->as_array()) {
    if (!n.is_object()) continue;
    ViewNode v;
    v.id = str_field(n, "node_id");
    if (v.id.empty()) continue;
    v.parent = str_field(n, "parent_id");
    v.decision = str_field(n, "decision");
    v.choice = str_field(n, "choice");
    v.notes = str_field(n, "notes");
    v.rating = num_field(n, "overall_rating_0_to_10");
    v.confidence = num_field(n, "confidence_0_to_1");
    if (auto r = num_field(n, "last_updated_round")) v.last_updated_round = static_cast<int>(*r);
    const Json& a = n["action"];
    v.title = str_field(a, "title");
    if (!v.title.empty()) {
      v.description = str_field(a, "description");
      v.rationale = str_field(a, "rationale");
      v.score = num_field(a, "score_0_to_1");
      if (auto d = num_field(a, "difficulty_1_to_5")) v.difficulty = static_cast<int>(*d);
      v.expected_factor = num_field(a, "expected_vs_baseline_factor");
    }
    const Json& ref = n["solution_ref"];
    v.solution_id = str_field(ref, "solution_id");
    if (!v.solution_id.empty()) {
      solved.insert(v.id);
      v.solution_name = str_field(ref, "solution_name");
      if (auto r = num_field(ref, "round_index")) v.solution_round = static_cast<int>(*r);
      const Json& e = ref["eval"];
      v.latency_ms = num_field(e, "latency_ms").value_or(0);
      v.speedup = num_field(e, "speedup").value_or(0);
    }
    const bool is_root = v.id == t.root_id || str_field(n, "node_type") == "root";
    if (is_root) v.parent.clear();
    v.status = is_root ? "root" : "";
    t.nodes.push_back(std::move(v));
  }
  for (auto& v : t.nodes) {
    if (v.status == "root") continue;
    if (!v.solution_id.empty()) v.status = "solved";
    else if (v.title.empty()) v.status = "decision";
    else if (failed.count(v.id)) v.status = "too_hard";
    else if (v.id == t.active_id) v.status = "active";
    else if (v.parent.empty() || v.parent == t.root_id || solved.count(v.parent)) v.status = "open";
    else v.status = "waiting";
    if (v.title.empty() && (!v.decision.empty() || !v.choice.empty()))
      v.title = v.decision.empty() ? v.choice : v.choice.empty() ? v.decision : v.decision + ": " + v.choice;
  }
  return t;
}

}  // namespace ks::report
