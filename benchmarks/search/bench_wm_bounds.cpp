// What large world models cost: the --continue-from-world-model import
// (K-Search's world_model.json and a libksearch snapshot), a model's init
// and edit answers, and `ksearch show`'s read-load-render, on a 30 000-node
// chain and 100 000 flat nodes (issue 42: both were hours of work before
// the caps), and on trees right at the caps (docs/world-model.md, "Limits").
// Each case runs in a child process of its own, so its peak RSS
// (getrusage) is its own; the parent kills a case past --timeout.
//
//   build/benchmarks/search/bench_wm_bounds [--timeout S] [--case SUBSTRING]
//
// Target (issue 42): each case within 5 s and under 500 MB peak RSS.
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/warm_start.hpp"
#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/task.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

namespace fs = std::filesystem;

namespace {

enum class Shape { chain, flat };

// One node in the schema both K-Search and libksearch read; about the size
// of a node K-Search writes (~350 bytes).
void append_node(std::string& out, std::size_t i, const std::string& id, const std::string& parent, bool root) {
  if (i) out += ",\n";
  if (root) {
    fmt::format_to(std::back_inserter(out),
                   R"({{"node_id": "{}", "parent_id": null, "node_type": "root", "decision": null, "choice": null,)"
                   R"( "notes": "root", "impacts": {{}}, "solution_ref": {{"solution_id": null, "eval": null}}}})",
                   id);
    return;
  }
  fmt::format_to(std::back_inserter(out),
                 R"({{"node_id": "{}", "parent_id": "{}", "node_type": "decision", "decision": "stage {}",)"
                 R"( "choice": "variant {}", "overall_rating_0_to_10": 6, "confidence_0_to_1": 0.5,)"
                 R"( "last_updated_round": 1, "notes": "generated node {}", "impacts": {{}},)"
                 R"( "solution_ref": {{"solution_id": null, "parent_solution_id": null, "eval": null}},)"
                 R"( "action": {{"title": "Try variant {}", "description": "a generated action",)"
                 R"( "difficulty_1_to_5": 2, "score_0_to_1": 0.6, "rationale": "benchmark"}}}})",
                 id, parent, i, i, i, i);
}

// A world model of `n` nodes below the root: a chain (each node the child
// of the one before, plus two more actions under the root so an init
// answer has its three) or flat (all under the root).
std::string world_model(Shape shape, std::size_t n, bool snapshot) {
  std::string out = R"({"kernel_summary": "A generated tree.", "open_questions": ["q"],)";
  if (snapshot) out += R"( "version": 1,)";
  out += R"( "decision_tree": {"root_id": "root", "active_leaf_id": "root", "nodes": [)" "\n";
  append_node(out, 0, "root", "", true);
  std::size_t k = 1;
  if (shape == Shape::chain) {
    append_node(out, k++, "a1", "root", false);
    append_node(out, k++, "a2", "root", false);
  }
  for (std::size_t i = 1; i <= n; ++i) {
    std::string parent = shape == Shape::flat || i == 1 ? "root" : fmt::format("n{}", i - 1);
    append_node(out, k++, fmt::format("n{}", i), parent, false);
  }
  out += "\n]}}\n";
  return out;
}

// An edit answer of `n` insert_node ops (a chain or all under the root), or
// `n` update_node ops re-scoring n1..nn.
std::string edit_answer(std::size_t n, bool chain, bool update) {
  std::string out = R"({"ops": [)";
  for (std::size_t i = 1; i <= n; ++i) {
    if (i > 1) out += ",\n";
    if (update) {
      fmt::format_to(std::back_inserter(out),
                     R"({{"op": "update_node", "node_id": "n{}", "patch": {{"action": {{"score_0_to_1": 0.7}}}}}})", i);
      continue;
    }
    std::string parent = !chain || i == 1 ? "root" : fmt::format("e{}", i - 1);
    fmt::format_to(std::back_inserter(out),
                   R"({{"op": "insert_node", "parent_id": "{}", "node": {{"node_id": "e{}", "decision": "d",)"
                   R"( "choice": "c", "action": {{"title": "edit action {}", "difficulty_1_to_5": 2,)"
                   R"( "score_0_to_1": 0.8}}}}}})",
                   parent, i, i);
  }
  out += "]}\n";
  return out;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

std::string first_line(std::string s, std::size_t max = 150) {
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

// What a case did: its input's size, the time its work took (the input
// made beforehand, outside the time) and what became of the input ("ok ..."
// or "refused: <message>").
struct Outcome {
  std::size_t input_bytes = 0;
  double seconds = 0;
  std::string what;
};

template <typename Work>
Outcome timed(std::size_t input_bytes, Work work) {
  auto t0 = std::chrono::steady_clock::now();
  std::string what = work();
  return {input_bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), what};
}

// A case makes its input and times its work, in the child process that
// runs it: the parent holds no input, so the child's peak RSS is its own.
struct Case {
  std::string name;
  std::function<Outcome()> run;
};

std::string import_file(const fs::path& p) {
  try {
    ks::WorldModelImport w = ks::engine::load_world_model_import(p.string(), ks::TaskSpec{}, ks::Language::cuda, "",
                                                                 p.parent_path());
    auto wm = ks::make_tree_world_model();
    wm->load_json(w.tree);  // as the strategy loads it
    return fmt::format("ok, {} repairs", w.repairs.size());
  } catch (const ks::Error& e) {
    return "refused: " + first_line(e.what());
  }
}

std::string init_answer(const std::string& answer) {
  auto wm = ks::make_tree_world_model();
  ks::EditRules rules;
  auto out = wm->initialize_with(answer, rules);
  if (!out.ok) return "refused: " + first_line(out.errors.empty() ? "?" : out.errors.front());
  return fmt::format("ok, snapshot {} bytes", wm->to_json().dump(2).size());
}

// A model whose tree is `tree`, for an edit.
std::unique_ptr<ks::WorldModel> loaded(const std::string& tree) {
  auto wm = ks::make_tree_world_model();
  wm->load_json(ks::Json::parse(tree));
  return wm;
}

std::string edit(ks::WorldModel& wm, const std::string& answer) {
  ks::EditRules rules;
  rules.max_new_nodes = 1 << 30;  // the node and op caps are what is measured
  auto out = wm.apply_edits(answer, rules);
  if (!out.ok) return "refused: " + first_line(out.errors.empty() ? "?" : out.errors.front());
  return fmt::format("ok, {} ops applied", out.applied_ops);
}

// `ksearch show`: a run folder's latest snapshot read (RunStore, as the CLI
// reads it), loaded and rendered as a tree.
std::string show(const fs::path& run_dir) {
  auto wm = ks::make_tree_world_model();
  try {
    auto snapshot = ks::RunStore::open_read_only(run_dir).latest_world_model();
    if (!snapshot) return "no snapshot";
    wm->load_json(*snapshot);
  } catch (const ks::Error& e) {
    return "refused: " + first_line(e.what());
  }
  return fmt::format("ok, {} characters rendered", wm->render_tree().size());
}

struct Result {
  double wall_s = 0;
  std::size_t input_bytes = 0;
  long peak_kb = 0;
  std::string what;
  bool killed = false;
};

// Runs `c` in a child process; its time is measured there, its peak RSS
// here (wait4).
Result run_isolated(const Case& c, double timeout_s) {
  int pipefd[2];
  if (pipe(pipefd) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    Outcome o;
    try {
      o = c.run();
    } catch (const std::exception& e) {
      o.what = std::string("error: ") + first_line(e.what());
    }
    std::string line = fmt::format("{}\n{}\n{}", o.seconds, o.input_bytes, o.what);
    if (::write(pipefd[1], line.data(), line.size()) < 0) _exit(2);
    _exit(0);
  }
  close(pipefd[1]);
  Result r;
  auto start = std::chrono::steady_clock::now();
  int status = 0;
  struct rusage ru {};
  for (;;) {
    pid_t done = wait4(pid, &status, WNOHANG, &ru);
    if (done == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      r.killed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  close(pipefd[0]);
  r.peak_kb = ru.ru_maxrss;
  if (r.killed) {
    r.wall_s = timeout_s;
    r.what = fmt::format("killed after {:.0f} s", timeout_s);
  } else if (auto nl = text.find('\n'), nl2 = text.find('\n', nl + 1); nl2 != std::string::npos) {
    r.wall_s = std::atof(text.substr(0, nl).c_str());
    r.input_bytes = std::strtoull(text.substr(nl + 1, nl2 - nl - 1).c_str(), nullptr, 10);
    r.what = text.substr(nl2 + 1);
  } else {
    r.what = fmt::format("the case died (status {})", status);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double timeout_s = 120;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--timeout" && i + 1 < argc) timeout_s = std::atof(argv[++i]);
    else if (a == "--case" && i + 1 < argc) only = argv[++i];
    else {
      fmt::print(stderr, "usage: {} [--timeout S] [--case SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  const fs::path dir = fs::temp_directory_path() / fmt::format("ks-bench-wm-bounds-{}", getpid());
  fs::create_directories(dir);

  // The inputs of issue 42, and trees right at the caps (4096 nodes; a
  // chain 512 levels deep).
  struct Input {
    std::string label;
    Shape shape;
    std::size_t n;
  };
  const std::vector<Input> inputs = {{"30000-node chain", Shape::chain, 30000},
                                     {"100000 flat nodes", Shape::flat, 100000},
                                     {"chain 512 deep (at the depth cap)", Shape::chain, 512},
                                     {"4095 flat nodes (at the node cap)", Shape::flat, 4095}};
  std::vector<Case> cases;
  for (const auto& in : inputs) {
    const std::string stem = fmt::format("{}-{}", in.shape == Shape::chain ? "chain" : "flat", in.n);
    // K-Search keeps world_model.json in a folder of its own.
    const fs::path ks_file = dir / ("ksearch-" + stem) / "world_model.json";
    const fs::path snap_file = dir / (stem + "-snapshot.json");
    auto import_case = [=](const fs::path& file, bool snapshot) {
      return [=] {
        fs::create_directories(file.parent_path());
        std::size_t bytes = 0;
        {
          const std::string text = world_model(in.shape, in.n, snapshot);
          write_text(file, text);
          bytes = text.size();
        }
        return timed(bytes, [&] { return import_file(file); });
      };
    };
    cases.push_back({"import K-Search world_model.json, " + in.label, import_case(ks_file, false)});
    cases.push_back({"import libksearch snapshot, " + in.label, import_case(snap_file, true)});
    cases.push_back({"init answer, " + in.label, [=] {
                       const std::string text = world_model(in.shape, in.n, false);
                       return timed(text.size(), [&] { return init_answer(text); });
                     }});
    cases.push_back({"show (read + load + render), " + in.label, [=] {
                       const fs::path run = dir / ("run-" + stem);
                       ks::RunStore::create(run, ks::Json::obj({{"task", "bench"}}));
                       const std::string text = world_model(in.shape, in.n, true);
                       fs::create_directories(run / "world_model");
                       write_text(run / "world_model" / "v000001.json", text);
                       return timed(text.size(), [&] { return show(run); });
                     }});
  }
  for (auto [label, n, chain] : {std::tuple{"edit answer, 30000 insert ops (a chain)", 30000, true},
                                 std::tuple{"edit answer, 100000 insert ops (flat)", 100000, false}}) {
    cases.push_back({label, [=] {
                       const std::string answer = edit_answer(static_cast<std::size_t>(n), chain, false);
                       auto wm = loaded(world_model(Shape::flat, 3, true));
                       return timed(answer.size(), [&] { return edit(*wm, answer); });
                     }});
  }
  cases.push_back({"edit answer, 128 update ops (at the op cap) on 4096 nodes", [] {
                     const std::string answer = edit_answer(128, false, true);
                     auto wm = loaded(world_model(Shape::flat, 4095, true));
                     return timed(answer.size(), [&] { return edit(*wm, answer); });
                   }});

  fmt::print("{:<66} {:>9} {:>8} {:>9}  {}\n", "case", "input KB", "time s", "peak MB", "outcome");
  int over = 0;
  for (const auto& c : cases) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    Result r = run_isolated(c, timeout_s);
    const bool within = !r.killed && r.wall_s <= 5 && r.peak_kb <= 500 * 1024;
    over += !within;
    fmt::print("{:<66} {:>9} {:>8.3f} {:>9.1f}  {}{}\n", c.name, r.input_bytes / 1024, r.wall_s, r.peak_kb / 1024.0,
               r.what, within ? "" : "  [over the target]");
    std::fflush(stdout);
  }
  fs::remove_all(dir);
  fmt::print("{} case(s) over the target (5 s, 500 MB)\n", over);
  return 0;
}
