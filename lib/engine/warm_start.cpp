#include "engine/warm_start.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/response/parse.hpp"
#include "core/world_model_file.hpp"
#include "search/world_model/import.hpp"
#include "search/world_model/tree.hpp"
#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/search.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"
#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace ks::engine {

namespace fs = std::filesystem;

std::string task_fingerprint(const TaskSpec& spec) { return util::sha256_hex(spec.to_json().dump()).substr(0, 16); }

namespace {

std::string shown_path(const fs::path& p) { return fs::absolute(p).lexically_normal().string(); }

std::string device_text(const DeviceInfo& d) {
  if (d.name.empty()) return d.backend.empty() ? "an unknown device" : d.backend;
  return d.arch.empty() ? d.name : fmt::format("{} ({})", d.name, d.arch);
}

// A run folder's task fingerprint and device, from its manifest.
void read_provenance(const RunStore& run, RecordedEvaluation& rec) {
  const Json m = run.manifest();
  if (m.get_string("format") != "ksearch-run")
    throw Error(Status::invalid_argument, fmt::format("{}: manifest.json is not a ksearch run", run.dir().string()));
  const Json& task = m["task"];
  if (task.is_object()) rec.task_fingerprint = task.get_string("fingerprint");
  rec.device = DeviceInfo::from_json(m["device"]);
}

// The attempt folder of `id` in a run ("attempts/0003-5ba86dee"), as the store names it.
std::string attempt_folder(const AttemptRecord& a) {
  return fmt::format("attempts/{:04d}-{}", a.seq, a.solution.id.empty() ? "no-code" : a.solution.id);
}

// The tree as the new run starts it: version 1 of its own snapshots.
Json without_version(Json tree) {
  tree.erase("version");
  return tree;
}

// Checks a libksearch tree as the strategy will load it, and, as for an
// init answer, that it fits the snapshot cap: the run's edits start from it.
void check_tree(const Json& tree, const std::string& what) {
  try {
    make_tree_world_model()->load_json(tree);
  } catch (const Error& e) {
    throw Error(Status::invalid_argument, fmt::format("{} is not a valid libksearch world model: {}", what, e.what()));
  }
  core::wm::Problems problems;
  core::wm::check_snapshot_size(core::wm::read_tree(tree, /*from_llm=*/false, 0, problems), problems);
  if (!problems.empty()) throw Error(Status::invalid_argument, fmt::format("{}: {}", what, problems.list().front()));
}

// Every solution id the tree's nodes carry, with the node that carries it.
std::vector<std::pair<std::string, std::string>> attached_solutions(const Json& tree) {
  std::vector<std::pair<std::string, std::string>> out;
  const Json& nodes = tree["decision_tree"]["nodes"];
  if (!nodes.is_array()) return out;
  for (const auto& n : nodes.as_array()) {
    const Json& ref = n["solution_ref"];
    if (ref.is_object() && ref["solution_id"].is_string() && !ref["solution_id"].as_string().empty())
      out.emplace_back(n.get_string("node_id"), ref["solution_id"].as_string());
  }
  return out;
}

// Marks each attached evaluation in the tree with where it was recorded:
// the tree's evidence, never a measurement of this run.
void mark_recorded(Json& tree, const std::string& source) {
  Json* nodes = tree.find("decision_tree") ? tree["decision_tree"].find("nodes") : nullptr;
  if (!nodes || !nodes->is_array()) return;
  for (auto& n : nodes->as_array()) {
    Json* ref = n.find("solution_ref");
    Json* eval = ref ? ref->find("eval") : nullptr;
    if (eval && eval->is_object() && !eval->contains("recorded_in")) (*eval)["recorded_in"] = source;
  }
}

// A run folder's tree (its latest snapshot, or `snapshot`) and the kernels
// attached in it, copied with their recorded evaluations.
WorldModelImport import_run(const fs::path& dir, std::optional<Json> snapshot, const std::string& source) {
  RunStore run = RunStore::open_read_only(dir);
  RecordedEvaluation provenance;
  read_provenance(run, provenance);
  WorldModelImport w;
  w.source = source;
  w.format = "ksearch-run";
  if (!snapshot) {
    snapshot = run.latest_world_model();
    if (!snapshot)
      throw Error(Status::not_found,
                  fmt::format("{} has no world-model snapshot yet (world_model/ is empty): nothing to continue from",
                              shown_path(dir)));
  }
  w.tree = without_version(*snapshot);
  check_tree(w.tree, source);
  const std::vector<AttemptRecord> attempts = run.attempts();
  // What that run imported itself: kernels it knew by their code only.
  std::optional<WorldModelImport> earlier;
  const Json manifest = run.manifest();  // by value: `c` below refers into it
  if (const Json& c = manifest["config"]; c.is_object() && c["continue_from_world_model"].is_object()) {
    try {
      earlier = WorldModelImport::from_json(c["continue_from_world_model"]);
    } catch (const Error& e) {
      w.repairs.push_back(fmt::format("the tree that run imported does not read ({}): its kernels are not looked up",
                                      e.what()));
    }
  }
  // Looked up once, not per node: a solution's first passing attempt (else
  // its first), and what the earlier import brought.
  std::map<std::string, const AttemptRecord*> by_solution;
  for (const auto& a : attempts) {
    const AttemptRecord*& f = by_solution[a.solution.id];
    if (!f || (a.eval.passed() && !f->eval.passed())) f = &a;
  }
  std::map<std::string, const ImportedSolution*> earlier_by_id;
  if (earlier)
    for (const auto& s : earlier->solutions) earlier_by_id.emplace(s.solution.id, &s);
  std::set<std::string> copied;
  for (const auto& [node, id] : attached_solutions(w.tree)) {
    if (copied.count(id)) continue;
    auto it = by_solution.find(id);
    const AttemptRecord* found = it != by_solution.end() ? it->second : nullptr;
    if (!found) {
      if (auto e = earlier_by_id.find(id); e != earlier_by_id.end()) {
        w.solutions.push_back(*e->second);  // with its own record, if it had one: decided again for this run
        copied.insert(id);
        continue;
      }
    }
    if (!found) {
      w.repairs.push_back(fmt::format("node \"{}\": its solution {} is not among the run's attempts: it keeps no "
                                      "code, and the actions under it start from the task alone",
                                      node, id));
      continue;
    }
    ImportedSolution s;
    s.solution = found->solution;
    s.solution.parent_id.clear();
    RecordedEvaluation rec = provenance;
    rec.eval = found->eval;
    rec.eval.solution_id = id;
    rec.source = shown_path(dir / attempt_folder(*found));
    s.recorded = std::move(rec);
    w.solutions.push_back(std::move(s));
    copied.insert(id);
  }
  mark_recorded(w.tree, source);
  return w;
}

// K-Search's world_model.json, with the code of its kernels from the
// solution_db.jsonl beside it (the original keeps both in
// <artifacts>/<task>/world_model/).
WorldModelImport import_ksearch(const fs::path& file, const Json& j, const TaskSpec& spec, Language language) {
  WorldModelImport w;
  w.source = shown_path(file);
  w.format = "k-search";
  core::wm::NormalizedTree norm;
  try {
    norm = core::wm::normalize_ksearch_world_model(j);
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", w.source, e.what()));  // the caps' refusals name the file
  }
  w.tree = std::move(norm.tree);
  w.repairs = std::move(norm.repairs);
  const auto attached = attached_solutions(w.tree);
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  util::Folder folder(dir);
  std::map<std::string, std::pair<Json, std::size_t>> db;  // K-Search id -> record, its line
  if (folder.kind("solution_db.jsonl") == util::EntryKind::none) {
    if (!attached.empty())
      w.repairs.push_back(fmt::format("there is no solution_db.jsonl beside {}: the {} attached solution(s) keep no "
                                      "code, and the actions under them start from the task alone",
                                      w.source, attached.size()));
  } else {
    // Read through the folder: a link there is refused, never followed.
    const std::string text = folder.read("solution_db.jsonl", util::kMaxTranscriptBytes);
    std::size_t line_no = 0;
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t nl = text.find('\n', pos);
      std::string_view line(text.data() + pos, (nl == std::string::npos ? text.size() : nl) - pos);
      pos = nl == std::string::npos ? text.size() : nl + 1;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      std::string error;
      auto rec = Json::try_parse(line, &error);
      if (!rec || !rec->is_object() || !(*rec)["solution_id"].is_string()) {
        w.repairs.push_back(fmt::format("solution_db.jsonl line {} is not a solution record ({}): skipped", line_no,
                                        rec ? "no solution_id" : error));
        continue;
      }
      // Later lines with the same id replace earlier ones, as in the original.
      const std::string id = (*rec)["solution_id"].as_string();
      db[id] = {std::move(*rec), line_no};
    }
  }
  std::map<std::string, std::string> ids;  // K-Search id -> this library's
  std::set<std::string> copied;            // this library's ids in w.solutions
  for (const auto& [node, id] : attached) {
    if (ids.count(id)) continue;
    auto it = db.find(id);
    if (it == db.end()) {
      if (!db.empty())
        w.repairs.push_back(fmt::format("node \"{}\": its solution {} is not in solution_db.jsonl: it keeps no code, "
                                        "and the actions under it start from the task alone",
                                        node, id));
      continue;
    }
    const auto& [rec, line_no] = it->second;
    const Json* code = rec.find("code");
    if (!code || !code->is_string()) code = rec.find("code_excerpt");
    if (!code || !code->is_string()) {
      w.repairs.push_back(fmt::format("node \"{}\": solution {} (solution_db.jsonl line {}) has no code: it keeps "
                                      "none",
                                      node, id, line_no));
      continue;
    }
    Solution s;
    try {
      s = core::parse_candidate(code->as_string(), language);
    } catch (const Error& e) {
      w.repairs.push_back(fmt::format("node \"{}\": the code of solution {} (solution_db.jsonl line {}) is not a {} "
                                      "answer ({}): it keeps no code",
                                      node, id, line_no, to_string(language), e.what()));
      continue;
    }
    s.name = rec["solution_name"].is_string() ? rec["solution_name"].as_string() : id;
    s.task = spec.name;
    s.finalize();
    ids[id] = s.id;
    if (copied.insert(s.id).second) w.solutions.push_back(ImportedSolution{s, id, std::nullopt});
  }
  core::wm::remap_solution_ids(w.tree, ids);
  mark_recorded(w.tree, w.source);
  check_tree(w.tree, w.source);
  return w;
}

// The latest run folder of the task in `runs_dir` that has a world model.
fs::path latest_run(const fs::path& runs_dir, const TaskSpec& spec, const std::string& fingerprint) {
  std::error_code ec;
  fs::path best;
  std::string best_created;
  int runs = 0;
  if (fs::is_directory(runs_dir, ec)) {
    for (const auto& e : fs::directory_iterator(runs_dir, ec)) {
      if (!e.is_directory(ec) || e.is_symlink(ec) || !RunStore::exists(e.path())) continue;
      ++runs;
      try {
        RunStore run = RunStore::open_read_only(e.path());
        const Json m = run.manifest();
        if (m["task"].get_string("name") != spec.name || m["task"].get_string("fingerprint") != fingerprint) continue;
        if (run.world_model_versions().empty()) continue;
        const std::string created = m.get_string("created");
        if (best.empty() || created > best_created || (created == best_created && e.path() > best)) {
          best = e.path();
          best_created = created;
        }
      } catch (const std::exception&) {
        // A folder that does not read is not the one to continue from.
      }
    }
  }
  if (best.empty())
    throw Error(Status::not_found,
                fmt::format("continue_from_world_model auto: no run of task \"{}\" with a world model in {} (it holds "
                            "{} run folder(s)); give a run folder or a world-model file",
                            spec.name, shown_path(runs_dir), runs));
  return best;
}

}  // namespace

WorldModelImport load_world_model_import(const std::string& source, const TaskSpec& spec, Language language,
                                         const std::string& fingerprint, const fs::path& runs_dir) {
  if (source.empty()) throw Error(Status::invalid_argument, "continue_from_world_model: empty source");
  const fs::path p = source == "auto" ? latest_run(runs_dir, spec, fingerprint) : fs::path(source);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (!RunStore::exists(p))
      throw Error(Status::not_found, fmt::format("{} is a folder without a run (no manifest.json); give a run folder "
                                                 "or a world-model JSON file",
                                                 source));
    return import_run(p, std::nullopt, shown_path(p));
  }
  const std::string text = util::read_file(p, core::kMaxWorldModelFileBytes);
  std::string error;
  auto j = Json::try_parse(text, &error);
  if (!j) throw Error(Status::parse, fmt::format("{} is not JSON: {}", source, error));
  if (!j->is_object())
    throw Error(Status::invalid_argument, fmt::format("{} is not a world model (a JSON {}, not an object)", source,
                                                      json_type_name(j->type())));
  if (j->contains("version")) {
    // This library's snapshot. One inside a run folder brings that run's kernels.
    const fs::path wm_dir = p.parent_path();
    if (wm_dir.filename() == "world_model" && !wm_dir.parent_path().empty() && RunStore::exists(wm_dir.parent_path()))
      return import_run(wm_dir.parent_path(), *j, shown_path(p));
    WorldModelImport w;
    w.source = shown_path(p);
    w.format = "ksearch-snapshot";
    w.tree = without_version(*j);
    check_tree(w.tree, source);
    const auto attached = attached_solutions(w.tree);
    if (!attached.empty())
      w.repairs.push_back(fmt::format("{} is not in a run folder: its {} attached solution(s) keep no code, and the "
                                      "actions under them start from the task alone",
                                      w.source, attached.size()));
    mark_recorded(w.tree, w.source);
    return w;
  }
  return import_ksearch(p, *j, spec, language);
}

void decide_recorded_evaluations(SearchConfig& config, const std::string& fingerprint, const DeviceInfo& device) {
  auto decide = [&](RecordedEvaluation& rec, const std::string& solution_id) {
    rec.adopted = false;
    const EvalResult& e = rec.eval;
    const bool known_device = !rec.device.name.empty() || !e.device.empty();
    if (config.remeasure) {
      rec.why = "measured again (remeasure): the evaluation recorded in " + rec.source + " is not used";
    } else if (rec.task_fingerprint.empty()) {
      rec.why = rec.source + " is not in a run folder, so nothing says which task it evaluated: measured again";
    } else if (rec.task_fingerprint != fingerprint) {
      rec.why = fmt::format("task differs: recorded for the task with fingerprint {}, this run's is {}: measured again",
                            rec.task_fingerprint, fingerprint);
    } else if (!known_device) {
      rec.why = rec.source + " names no device: measured again";
    } else if (!rec.device.name.empty() && (rec.device.backend != device.backend || rec.device.name != device.name ||
                                            rec.device.arch != device.arch)) {
      rec.why = fmt::format("device differs: recorded on {}, this run on {}: measured again", device_text(rec.device),
                            device_text(device));
    } else if (!e.device.empty() && e.device != device.name) {
      rec.why = fmt::format("device differs: the evaluation says it ran on {}, this run on {}: measured again",
                            e.device, device_text(device));
    } else if (e.solution_id != solution_id) {
      rec.why = fmt::format("the recorded evaluation is of solution {}, not of this kernel {}: measured again",
                            e.solution_id.empty() ? "(none)" : e.solution_id, solution_id);
    } else if (!e.passed()) {
      rec.why = fmt::format("recorded as {}: measured again", to_string(e.status));
    } else if (!(std::isfinite(e.latency_ms) && e.latency_ms > 0 && std::isfinite(e.score) && e.score > 0)) {
      rec.why = fmt::format("the recorded result is not a measurement (latency {} ms, score {}): measured again",
                            e.latency_ms, e.score);
    } else {
      rec.adopted = true;
      rec.why = fmt::format("same task ({}) and device ({}): the evaluation recorded in {} is used, not measured again",
                            fingerprint, device_text(device), rec.source);
    }
  };
  if (config.continue_from_solution_eval && config.continue_from_solution)
    decide(*config.continue_from_solution_eval, config.continue_from_solution->id);
  if (config.continue_from_world_model)
    for (auto& s : config.continue_from_world_model->solutions)
      if (s.recorded) decide(*s.recorded, s.solution.id);
}

void check_recorded_decisions(const SearchConfig& config, const Json& manifest, const fs::path& dir) {
  const std::string fingerprint = manifest["task"].is_object() ? manifest["task"].get_string("fingerprint") : "";
  const DeviceInfo device = DeviceInfo::from_json(manifest["device"]);
  auto check = [&](const RecordedEvaluation& rec, const std::string& what) {
    if (!rec.adopted) return;
    if (rec.task_fingerprint != fingerprint || rec.device.name != device.name || rec.device.arch != device.arch ||
        rec.device.backend != device.backend)
      throw Error(Status::invalid_argument,
                  fmt::format("{}: manifest.json's configuration adopts the evaluation of {} recorded in {} for the "
                              "task {} on {}, but the run is of the task {} on {}; the manifest was changed",
                              dir.string(), what, rec.source, rec.task_fingerprint, device_text(rec.device),
                              fingerprint, device_text(device)));
  };
  if (config.continue_from_solution_eval) check(*config.continue_from_solution_eval, "continue_from_solution");
  if (config.continue_from_world_model)
    for (const auto& s : config.continue_from_world_model->solutions)
      if (s.recorded) check(*s.recorded, "the imported solution " + s.solution.id);
}

}  // namespace ks::engine

KS_NAMESPACE_BEGIN

std::optional<RecordedEvaluation> load_recorded_evaluation(const std::filesystem::path& source) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = source;
  // best.json or a solution.json: the folder it is in.
  if (!fs::is_directory(p, ec) && (p.filename() == "best.json" || p.filename() == "solution.json"))
    p = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(p, ec)) return std::nullopt;  // a solution file or an answer: nothing recorded
  RecordedEvaluation rec;
  std::optional<fs::path> run_dir;
  util::Folder folder(p);
  if (folder.kind("solution.json") != util::EntryKind::none) {
    // An attempt folder (RUN/attempts/NNNN-<id>) or best/ (RUN/best): its eval.json, its run's manifest.
    if (folder.kind("eval.json") == util::EntryKind::none) return std::nullopt;
    rec.eval = EvalResult::from_json(Json::parse(folder.read("eval.json", util::kMaxSolutionFileBytes)));
    rec.source = engine::shown_path(p);
    const fs::path abs = fs::absolute(p).lexically_normal();
    const fs::path parent = (abs.has_filename() ? abs : abs.parent_path()).parent_path();
    if (parent.filename() == "attempts" && RunStore::exists(parent.parent_path())) run_dir = parent.parent_path();
    else if (RunStore::exists(parent)) run_dir = parent;
  } else if (RunStore::exists(p)) {
    auto best = RunStore::open_read_only(p).best();
    if (!best) return std::nullopt;
    rec.eval = best->eval;
    rec.source = engine::shown_path(p / "best.json");
    run_dir = p;
  } else {
    return std::nullopt;
  }
  // Nothing is decided here: run_search compares the record with the run's
  // task and device, and with the kernel's id.
  if (run_dir) engine::read_provenance(RunStore::open_read_only(*run_dir), rec);
  return rec;
}

KS_NAMESPACE_END
