// Bounded world-model work (docs/world-model.md, "Limits"): the node, depth,
// snapshot and op caps, refused with the cap named wherever a tree comes in
// (a model's init and edit answers, K-Search's world_model.json, this
// library's snapshots, --continue-from-world-model files), and trees at the
// caps handled. No test here times anything (bench_wm_bounds does): a
// quadratic check would show as a test that runs past its ctest timeout.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "engine/warm_start.hpp"
#include "ksearch/error.hpp"
#include "ksearch/task.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"
#include "search/world_model/edits.hpp"
#include "search/world_model/import.hpp"
#include "search/world_model/render.hpp"
#include "search/world_model/selection.hpp"
#include "search/world_model/tree.hpp"
#include "support/test_util.hpp"

using ks::Json;
namespace wm = ks::core::wm;
namespace fs = std::filesystem;

namespace {

enum class Shape { chain, flat };

// A world model's JSON text: a root and `n` action nodes below it, each the
// child of the one before (chain: n1 under the root, n2 under n1, ...; plus
// a1 and a2 under the root, so an init answer has three executable actions)
// or all under the root (flat). `snapshot`: this library's form (with
// "version"); else K-Search's, as the original writes it.
std::string tree_text(Shape shape, std::size_t n, bool snapshot = false) {
  std::string out = R"({"kernel_summary": "generated", "open_questions": [],)";
  if (snapshot) out += R"( "version": 1,)";
  out += R"( "decision_tree": {"root_id": "root", "active_leaf_id": "root", "nodes": [)";
  out += R"({"node_id": "root", "parent_id": null, "node_type": "root"})";
  auto add = [&](const std::string& id, const std::string& parent) {
    fmt::format_to(std::back_inserter(out),
                   R"(, {{"node_id": "{}", "parent_id": "{}", "node_type": "decision", "action": {{"title": "t {}",)"
                   R"( "difficulty_1_to_5": 2, "score_0_to_1": 0.6}}}})",
                   id, parent, id);
  };
  if (shape == Shape::chain) {
    add("a1", "root");
    add("a2", "root");
  }
  for (std::size_t i = 1; i <= n; ++i)
    add(fmt::format("n{}", i), shape == Shape::flat || i == 1 ? "root" : fmt::format("n{}", i - 1));
  return out + "]}}";
}

// A core tree built in memory, past every cap: what the index, the checks
// and the views must handle without recursion whatever they are given.
wm::Tree built_tree(Shape shape, std::size_t n) {
  wm::Tree t;
  wm::Node root;
  root.id = "root";
  root.is_root = true;
  t.nodes.push_back(root);
  for (std::size_t i = 1; i <= n; ++i) {
    wm::Node node;
    node.id = fmt::format("n{}", i);
    node.parent_id = shape == Shape::flat || i == 1 ? "root" : fmt::format("n{}", i - 1);
    node.action.title = "t";
    t.nodes.push_back(std::move(node));
  }
  return t;
}

std::string all(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// An edit answer of `n` insert_node ops, chained (each under the one
// before) or all under the root.
std::string inserts(std::size_t n, bool chained, const std::string& first_parent = "root") {
  std::string out = R"({"ops": [)";
  for (std::size_t i = 1; i <= n; ++i)
    fmt::format_to(std::back_inserter(out),
                   R"({}{{"op": "insert_node", "parent_id": "{}", "node": {{"node_id": "e{}", "action": {{"title": )"
                   R"("e{}", "difficulty_1_to_5": 2, "score_0_to_1": 0.9}}}}}})",
                   i > 1 ? ", " : "", chained && i > 1 ? fmt::format("e{}", i - 1) : first_parent, i, i);
  return out + "]}";
}

std::unique_ptr<ks::WorldModel> loaded(const std::string& text) {
  auto m = ks::make_tree_world_model();
  m->load_json(Json::parse(text));
  return m;
}

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

ks::WorldModelImport import_file(const fs::path& p) {
  return ks::engine::load_world_model_import(p.string(), ks::TaskSpec{}, ks::Language::cuda, "", p.parent_path());
}

}  // namespace

// ---------------------------------------------------------------------------
// The index and the checks, on trees past the caps

TEST_CASE("bounds: a 30000-deep chain is checked, walked and rendered without recursion") {
  const wm::Tree t = built_tree(Shape::chain, 30000);
  const wm::TreeIndex idx(t);
  CHECK(idx.depth(idx.position("n30000")) == 30000);
  CHECK(idx.deepest() == idx.position("n30000"));
  CHECK(idx.children(idx.position("n1")) == std::vector<std::size_t>{idx.position("n2")});
  CHECK(t.path_to("n30000").size() == 30001);
  wm::Problems p;
  wm::check_structure(t, p);
  const std::string errors = all(p.list());
  CHECK(p.size() == 2);
  CHECK(errors.find("the world model has 30001 nodes; at most 4096 are accepted (the world model's node cap") !=
        std::string::npos);
  CHECK(errors.find("node \"n30000\" is 30000 levels below the root; at most 512 are accepted (the world model's "
                    "depth cap") != std::string::npos);
  const std::string text = wm::render_tree(t);
  CHECK(std::count(text.begin(), text.end(), '\n') == 30001);
  // Indented 32 levels at most, so the text grows with the nodes, not with
  // the square of the depth.
  CHECK(text.find("\n" + std::string(2 * 32, ' ') + "[depth 30000] - n30000 t") != std::string::npos);
  CHECK(text.find("\n" + std::string(2 * 32, ' ') + "- n32 t") != std::string::npos);
  CHECK(text.size() < 30001 * 200);
}

TEST_CASE("bounds: 100000 flat nodes are checked once each") {
  const wm::Tree t = built_tree(Shape::flat, 100000);
  wm::Problems p;
  wm::check_structure(t, p);
  REQUIRE(p.size() == 1);
  CHECK(p.list()[0].find("has 100001 nodes; at most 4096") != std::string::npos);
  CHECK(wm::ranked_frontier(t).size() == 100000);
  CHECK(wm::next_node_id(t, 0) == "r0_n1");
  const std::string status = wm::status_text(t);
  CHECK(status.find("nodes: 100001") != std::string::npos);
}

TEST_CASE("bounds: cycles are found in one pass, tails below them too, and nothing else") {
  // c1 -> c3 -> c2 -> c1 (each node's parent) is a cycle, d hangs below it,
  // e's parent is missing, f is under the root.
  wm::Tree t = built_tree(Shape::flat, 0);
  for (auto [id, parent] : {std::pair{"c1", "c3"}, {"c2", "c1"}, {"c3", "c2"}, {"d", "c2"}, {"e", "gone"},
                            {"f", "root"}}) {
    wm::Node n;
    n.id = id;
    n.parent_id = parent;
    t.nodes.push_back(n);
  }
  const wm::TreeIndex idx(t);
  for (const char* id : {"c1", "c2", "c3", "d"}) CHECK_MESSAGE(idx.cyclic(idx.position(id)), id);
  for (const char* id : {"root", "e", "f"}) CHECK_FALSE_MESSAGE(idx.cyclic(idx.position(id)), id);
  CHECK(idx.depth(idx.position("f")) == 1);
  CHECK(idx.depth(idx.position("e")) == wm::TreeIndex::npos);
  CHECK(idx.depth(idx.position("d")) == wm::TreeIndex::npos);
  wm::Problems p;
  wm::check_structure(t, p);
  const std::string errors = all(p.list());
  for (const char* id : {"c1", "c2", "c3", "d"})
    CHECK(errors.find(fmt::format("node \"{}\" is part of a parent cycle", id)) != std::string::npos);
  CHECK(errors.find("node \"e\": parent_id \"gone\" does not exist") != std::string::npos);
  CHECK(errors.find("node \"f\" is part") == std::string::npos);
  // The view still shows every node once.
  const std::string text = wm::render_tree(t);
  CHECK(std::count(text.begin(), text.end(), '\n') == 7);
}

TEST_CASE("bounds: the under-explored root children are found by one marking pass") {
  wm::Tree t = built_tree(Shape::chain, 600);
  wm::Node other;
  other.id = "side";
  other.parent_id = "root";
  other.action.title = "side";
  t.nodes.push_back(other);
  t.nodes[600].solution.solution_id = "deep_kernel";  // n600, 600 levels down the n1 branch
  const std::string status = wm::status_text(t);
  CHECK(status.find("under-explored root children: side\n") != std::string::npos);
}

// ---------------------------------------------------------------------------
// A model's answers

TEST_CASE("bounds: an init answer over the node cap is refused with the cap, and nothing else, named") {
  for (auto [shape, n, count] : {std::tuple{Shape::chain, 30000, "30003"}, std::tuple{Shape::flat, 100000, "100001"}}) {
    for (bool lenient : {false, true}) {
      auto m = ks::make_tree_world_model();
      ks::EditRules rules;
      rules.lenient = lenient;
      auto out = m->initialize_with(tree_text(shape, static_cast<std::size_t>(n)), rules);
      CHECK_FALSE(out.ok);
      CHECK_FALSE(m->initialized());
      REQUIRE(out.errors.size() == 1);
      CHECK(out.errors[0] == fmt::format("the world model has {} nodes; at most 4096 are accepted (the world model's "
                                         "node cap, docs/world-model.md \"Limits\")",
                                         count));
    }
  }
}

TEST_CASE("bounds: an init answer over the depth cap names the deepest node; one at the caps is taken") {
  auto deep = ks::make_tree_world_model();
  auto out = deep->initialize(tree_text(Shape::chain, 513), 0);
  CHECK_FALSE(out.ok);
  CHECK(all(out.errors).find("node \"n513\" is 513 levels below the root; at most 512 are accepted") !=
        std::string::npos);

  auto at_depth = ks::make_tree_world_model();
  out = at_depth->initialize(tree_text(Shape::chain, 512), 0);
  CHECK_MESSAGE(out.ok, all(out.errors));
  const std::string text = at_depth->render_tree();
  CHECK(text.find(std::string(2 * 32, ' ') + "[depth 512] - n512 t n512") != std::string::npos);
  CHECK_FALSE(at_depth->render_compact(50000).empty());

  auto at_count = ks::make_tree_world_model();
  out = at_count->initialize(tree_text(Shape::flat, 4095), 0);
  CHECK_MESSAGE(out.ok, all(out.errors));
  CHECK(out.new_nodes == 4096);
  CHECK(at_count->frontier().size() == 4095);
}

TEST_CASE("bounds: an init answer over the snapshot cap is refused with its size") {
  const std::string notes(1 << 20, 'x');
  std::string nodes = R"({"node_id": "root", "node_type": "root"})";
  for (int i = 1; i <= 9; ++i)
    nodes += fmt::format(R"(, {{"node_id": "n{}", "parent_id": "root", "notes": "{}", "action": {{"title": "t"}}}})", i,
                         notes);
  auto m = ks::make_tree_world_model();
  auto out = m->initialize(R"({"kernel_summary": "k", "decision_tree": {"root_id": "root", "nodes": [)" + nodes + "]}}",
                           0);
  CHECK_FALSE(out.ok);
  REQUIRE(out.errors.size() == 1);
  CHECK(out.errors[0].find("as a snapshot; at most 8388608 are accepted (the world model's snapshot cap") !=
        std::string::npos);
}

TEST_CASE("bounds: an edit answer over the op cap is refused whole, before any op runs") {
  for (auto [n, chained] : {std::pair{30000, true}, std::pair{100000, false}}) {
    for (bool lenient : {false, true}) {
      auto m = loaded(tree_text(Shape::flat, 3, true));
      ks::EditRules rules;
      rules.lenient = lenient;
      rules.max_new_nodes = 1 << 30;
      auto out = m->apply_edits(inserts(static_cast<std::size_t>(n), chained), rules);
      CHECK_FALSE(out.ok);
      REQUIRE(out.errors.size() == 1);
      CHECK(out.errors[0] == fmt::format("the answer has {} ops; at most 128 are accepted in one edit (the world "
                                         "model's op cap, docs/world-model.md \"Limits\"): send the few that matter "
                                         "most",
                                         n));
      CHECK(m->version() == 1);
    }
  }
}

TEST_CASE("bounds: an edit may not take the tree past the node or depth cap") {
  ks::EditRules rules;
  auto full = loaded(tree_text(Shape::flat, 4094, true));
  auto out = full->apply_edits(inserts(2, false), rules);
  CHECK_FALSE(out.ok);
  CHECK(all(out.errors).find("the world model has 4097 nodes; at most 4096 are accepted") != std::string::npos);
  // One more node is within the cap.
  CHECK(full->apply_edits(inserts(1, false), rules).ok);

  auto deep = loaded(tree_text(Shape::chain, 511, true));
  out = deep->apply_edits(inserts(2, true, "n511"), rules);
  CHECK_FALSE(out.ok);
  CHECK(all(out.errors).find("node \"e2\" is 513 levels below the root; at most 512 are accepted") !=
        std::string::npos);

  // Lenient: the op that would pass a cap is skipped, as any op that breaks a rule.
  rules.lenient = true;
  out = deep->apply_edits(inserts(2, true, "n511"), rules);
  CHECK_MESSAGE(out.ok, all(out.errors));
  CHECK(out.new_nodes == 1);
  CHECK(all(out.repairs).find("op 2 (insert_node) skipped: node \"e2\" is 513 levels below the root") !=
        std::string::npos);
}

TEST_CASE("bounds: an op skipped in lenient mode is undone exactly, and the ops after it see the tree before it") {
  auto m = loaded(tree_text(Shape::chain, 512, true));
  const Json before = m->to_json();
  ks::EditRules rules;
  rules.lenient = true;
  // Op 1 patches n512 and puts a child 513 levels down: skipped whole.
  // Op 2 deletes a leaf; op 3 patches a node and is kept.
  auto out = m->apply_edits(R"({"ops": [
      {"op": "split_node", "node_id": "n512", "parent_patch": {"notes": "changed"},
       "children": [{"node_id": "deep", "action": {"title": "too deep"}}]},
      {"op": "delete_node", "node_id": "a1"},
      {"op": "update_node", "node_id": "n3", "patch": {"notes": "kept"}}]})",
                            rules);
  REQUIRE_MESSAGE(out.ok, all(out.errors));
  CHECK(all(out.repairs).find("op 1 (split_node) skipped: node \"deep\" is 513 levels below the root") !=
        std::string::npos);
  const Json after = m->to_json();
  const Json& nodes = after["decision_tree"]["nodes"];
  const Json& old_nodes = before["decision_tree"]["nodes"];
  REQUIRE(nodes.size() == old_nodes.size() - 1);
  CHECK(old_nodes[1].get_string("node_id") == "a1");
  CHECK(nodes[0] == old_nodes[0]);
  // Every node but a1 is as it was, in its place, but n3's notes.
  for (std::size_t i = 1; i + 1 < old_nodes.size(); ++i) {
    Json want = old_nodes[i + 1];
    if (want.get_string("node_id") == "n3") {
      CHECK(nodes[i]["notes"].as_string() == "kept");
      continue;
    }
    if (nodes[i] != want) {
      FAIL_CHECK("node " << want.get_string("node_id") << " changed: " << nodes[i].dump());
      break;
    }
  }
}

TEST_CASE("bounds: an edit may not grow the snapshot past its cap") {
  auto m = loaded(tree_text(Shape::flat, 3, true));
  ks::EditRules rules;
  const std::string big(9 << 20, 'x');
  auto out = m->apply_edits(R"({"ops": [{"op": "update_node", "node_id": "n1", "patch": {"notes": ")" + big + R"("}}]})",
                            rules);
  CHECK_FALSE(out.ok);
  CHECK(all(out.errors).find("as a snapshot; at most 8388608 are accepted") != std::string::npos);
  CHECK(m->version() == 1);
}

TEST_CASE("bounds: at the node cap the deterministic fallbacks insert nothing") {
  // 4095 decisions without actions under the root: nothing is executable,
  // so the propose fallback would insert an action under the root.
  std::string text = tree_text(Shape::flat, 0, true);
  std::string nodes;
  for (int i = 1; i <= 4095; ++i) nodes += fmt::format(R"(, {{"node_id": "d{}", "parent_id": "root"}})", i);
  text.insert(text.size() - 3, nodes);
  auto m = loaded(text);
  REQUIRE(m->frontier().empty());
  const auto version = m->version();
  m->fallback_after_propose(1);
  CHECK(m->version() == version);
  CHECK(m->frontier().empty());
  CHECK(m->to_json()["decision_tree"]["nodes"].size() == 4096);
}

// ---------------------------------------------------------------------------
// Files: this library's snapshots, K-Search's world_model.json, imports

TEST_CASE("bounds: load_json refuses a snapshot over the node or depth cap") {
  for (auto [shape, n, want] : {std::tuple{Shape::chain, 30000, "has 30003 nodes; at most 4096 are accepted"},
                                std::tuple{Shape::flat, 100000, "has 100001 nodes; at most 4096 are accepted"},
                                std::tuple{Shape::chain, 600, "node \"n600\" is 600 levels below the root; at most 512"}}) {
    auto m = ks::make_tree_world_model();
    const Json j = Json::parse(tree_text(shape, static_cast<std::size_t>(n), true));
    CHECK_THROWS_WITH_AS(m->load_json(j), doctest::Contains(want), ks::Error);
    CHECK_FALSE(m->initialized());
  }
}

TEST_CASE("bounds: normalising K-Search's world model refuses the caps, handles what is within them") {
  for (auto [shape, n, want] : {std::tuple{Shape::chain, 30000, "the world model has 30003 nodes; at most 4096"},
                                std::tuple{Shape::flat, 100000, "the world model has 100001 nodes; at most 4096"},
                                std::tuple{Shape::chain, 600, "node \"n600\" is 600 levels below the root; at most 512"}}) {
    const Json j = Json::parse(tree_text(shape, static_cast<std::size_t>(n)));
    CHECK_THROWS_WITH_AS(wm::normalize_ksearch_world_model(j), doctest::Contains(want), ks::Error);
  }
  for (auto [shape, n] : {std::pair{Shape::chain, 512}, std::pair{Shape::flat, 4095}}) {
    auto norm = wm::normalize_ksearch_world_model(Json::parse(tree_text(shape, static_cast<std::size_t>(n))));
    CHECK_MESSAGE(norm.repairs.empty(), all(norm.repairs));
    CHECK_NOTHROW(loaded(norm.tree.dump()));
  }
}

TEST_CASE("bounds: K-Search's long cycles and many copies of one id are repaired in one pass each") {
  // 500 nodes in one parent cycle (c1's parent is c2, ..., c500's is c1):
  // the first found is re-pointed to the root, and the rest hang below it in
  // a chain 500 deep (a longer cycle would pass the depth cap once broken).
  std::string nodes = R"({"node_id": "root", "node_type": "root"})";
  for (int i = 1; i <= 500; ++i)
    nodes += fmt::format(R"(, {{"node_id": "c{}", "parent_id": "c{}"}})", i, i == 500 ? 1 : i + 1);
  auto norm = wm::normalize_ksearch_world_model(
      Json::parse(R"({"decision_tree": {"root_id": "root", "nodes": [)" + nodes + "]}}"));
  REQUIRE(norm.repairs.size() == 1);
  CHECK(norm.repairs[0] == "node \"c1\" is on a parent cycle: re-pointed to the root");
  auto m = loaded(norm.tree.dump());
  CHECK(m->render_tree().find("[depth 500] - c2 ") != std::string::npos);

  // 3000 nodes all named "x": x, x_2, ..., x_3000.
  nodes = R"({"node_id": "root", "node_type": "root"})";
  for (int i = 1; i <= 3000; ++i) nodes += R"(, {"node_id": "x", "parent_id": "root"})";
  norm = wm::normalize_ksearch_world_model(
      Json::parse(R"({"decision_tree": {"root_id": "root", "nodes": [)" + nodes + "]}}"));
  const Json& out = norm.tree["decision_tree"]["nodes"];
  REQUIRE(out.size() == 3001);
  CHECK(out[1].get_string("node_id") == "x");
  CHECK(out[2].get_string("node_id") == "x_2");
  CHECK(out[3000].get_string("node_id") == "x_3000");
}

TEST_CASE("bounds: --continue-from-world-model names the file and the cap it passes") {
  const fs::path dir = ks::test::scratch_dir("wm_bounds_import");
  for (auto [shape, n, count] : {std::tuple{Shape::chain, 30000, "30003"}, std::tuple{Shape::flat, 100000, "100001"}}) {
    for (bool snapshot : {false, true}) {
      const fs::path file = dir / fmt::format("{}-{}-{}", n, snapshot ? "snapshot" : "ksearch", "x") /
                            (snapshot ? "v000001.json" : "world_model.json");
      const std::string text = tree_text(shape, static_cast<std::size_t>(n), snapshot);
      write_text(file, text);
      std::string message;
      try {
        import_file(file);
      } catch (const ks::Error& e) {
        message = e.what();
      }
      INFO(message);
      CHECK(message.find(fs::absolute(file).lexically_normal().string()) != std::string::npos);
      if (text.size() > (std::size_t{16} << 20))
        CHECK(message.find("over the limit of 16777216 bytes") != std::string::npos);
      else
        CHECK(message.find(fmt::format("has {} nodes; at most 4096 are accepted", count)) != std::string::npos);
    }
  }
  // A file over the size cap is not parsed.
  const fs::path huge = dir / "huge" / "world_model.json";
  write_text(huge, R"({"kernel_summary": ")" + std::string(17 << 20, 'x') + R"("})");
  std::string message;
  try {
    import_file(huge);
  } catch (const ks::Error& e) {
    message = e.what();
  }
  CHECK(message.find(huge.string()) != std::string::npos);
  CHECK(message.find("over the limit of 16777216 bytes") != std::string::npos);
  // Within the caps: imported.
  const fs::path ok = dir / "at-cap" / "world_model.json";
  write_text(ok, tree_text(Shape::chain, 512));
  CHECK(import_file(ok).format == "k-search");
}

TEST_CASE("bounds: an imported tree must leave its edits room under the snapshot cap") {
  const fs::path dir = ks::test::scratch_dir("wm_bounds_import_size");
  const std::string notes((1 << 20) - 64, 'x');
  std::string nodes = R"({"node_id": "root", "node_type": "root"})";
  for (int i = 1; i <= 9; ++i)
    nodes += fmt::format(R"(, {{"node_id": "n{}", "parent_id": "root", "notes": "{}"}})", i, notes);
  const fs::path file = dir / "big" / "world_model.json";
  write_text(file, R"({"decision_tree": {"root_id": "root", "nodes": [)" + nodes + "]}}");
  CHECK_THROWS_WITH_AS(import_file(file), doctest::Contains("as a snapshot; at most 8388608 are accepted"), ks::Error);
}
