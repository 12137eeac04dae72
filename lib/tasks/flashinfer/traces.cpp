#include "tasks/flashinfer/traces.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "ksearch/error.hpp"
#include "util/fs.hpp"

namespace ks::tasks::flashinfer {
namespace {

namespace fs = std::filesystem;

// A trace or solution file may be large; a dataset is not trusted to keep it sane.
constexpr std::size_t kMaxTraceFileBytes = std::size_t{1} << 30;
constexpr std::size_t kMaxSolutionFileBytes = std::size_t{64} << 20;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Regular files under root/sub with the extension, sorted, none reached
// through a link that leaves the dataset (it is someone else's folder).
std::vector<fs::path> dataset_files(const fs::path& root, const char* sub, const char* ext) {
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path dir = root / sub;
  if (!fs::is_directory(dir, ec)) return out;
  const fs::path real_root = fs::weakly_canonical(root, ec);
  // Folder links are not followed (the iterator's default).
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ext || !it->is_regular_file(ec)) continue;
    const fs::path real = fs::weakly_canonical(p, ec);
    const auto rel = real.lexically_relative(real_root);
    if (ec || rel.empty() || *rel.begin() == "..") continue;
    out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Best {
  double ms = 0;
  std::string where;  // traces/...jsonl:LINE
};

// Per solution, per hardware, per workload: the fastest PASSED trace.
using TraceIndex = std::map<std::string, std::map<std::string, std::map<std::string, Best>>>;

[[noreturn]] void bad_trace(const std::string& where, const std::string& what) {
  throw Error(Status::invalid_argument, fmt::format("FlashInfer trace {}: {}", where, what));
}

// Reads every trace of `definition` under DIR/traces (FlashInfer-Bench's
// Trace: definition, workload.uuid, solution, evaluation {status,
// performance.latency_ms, environment.hardware}).
TraceIndex read_traces(const fs::path& root, const std::string& definition) {
  TraceIndex index;
  const std::string quoted = "\"" + definition + "\"";
  for (const auto& file : dataset_files(root, "traces", ".jsonl")) {
    const std::string text = util::read_file(file, kMaxTraceFileBytes);
    const std::string rel = file.lexically_relative(root).generic_string();
    std::size_t start = 0;
    for (int line_no = 1; start < text.size(); ++line_no) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string_view line(text.data() + start, end - start);
      start = end + 1;
      // Other definitions' traces are skipped unread (a dataset has many).
      if (line.find(quoted) == std::string_view::npos) continue;
      const std::string where = fmt::format("{}:{}", rel, line_no);
      std::string err;
      auto t = Json::try_parse(line, &err);
      if (!t || !t->is_object()) bad_trace(where, "not a JSON object: " + err);
      if (t->get_string("definition") != definition) continue;
      const Json* sol = t->find("solution");
      const Json* ev = t->find("evaluation");
      if (!sol || !sol->is_string() || !ev || ev->is_null()) continue;  // a workload line
      if (!ev->is_object()) bad_trace(where, "\"evaluation\" must be an object");
      if (lower(ev->get_string("status")) != "passed") continue;
      const Json* wl = t->find("workload");
      const std::string uuid = wl && wl->is_object() ? wl->get_string("uuid") : "";
      if (uuid.empty()) bad_trace(where, "a PASSED trace without \"workload\".\"uuid\"");
      const Json* perf = ev->find("performance");
      const Json* ms = perf && perf->is_object() ? perf->find("latency_ms") : nullptr;
      if (!ms || !ms->is_number() || !(ms->as_number() > 0))
        bad_trace(where, "a PASSED trace needs a positive \"evaluation\".\"performance\".\"latency_ms\"");
      const Json* env = ev->find("environment");
      const std::string hw = env && env->is_object() ? env->get_string("hardware") : "";
      if (hw.empty()) bad_trace(where, "a PASSED trace without \"evaluation\".\"environment\".\"hardware\"");
      Best& b = index[sol->as_string()][hw][uuid];
      if (b.ms == 0 || ms->as_number() < b.ms) b = {ms->as_number(), where};
    }
  }
  return index;
}

struct SolutionFile {
  fs::path file;
  Json json;
};

// The dataset's Solution JSON files for `definition`, by name.
std::map<std::string, SolutionFile> read_solutions(const fs::path& root, const std::string& definition) {
  std::map<std::string, SolutionFile> out;
  const std::string quoted = "\"" + definition + "\"";
  for (const auto& file : dataset_files(root, "solutions", ".json")) {
    std::string text = util::read_file(file, kMaxSolutionFileBytes);
    if (text.find(quoted) == std::string::npos) continue;
    auto j = Json::try_parse(text);
    if (!j || !j->is_object() || j->get_string("definition") != definition) continue;
    const std::string name = j->get_string("name");
    if (!name.empty()) out.emplace(name, SolutionFile{file, std::move(*j)});
  }
  return out;
}

std::string joined(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

// FlashInfer's own kernel for the definition: a solution named
// flashinfer_wrapper*, else one whose author is flashinfer.
std::string default_baseline(const TraceIndex& traces, const std::map<std::string, SolutionFile>& solutions,
                             const std::string& definition) {
  std::set<std::string> wrappers, by_author;
  for (const auto& [name, t] : traces)
    if (name.rfind("flashinfer_wrapper", 0) == 0) wrappers.insert(name);
  for (const auto& [name, s] : solutions) {
    if (name.rfind("flashinfer_wrapper", 0) == 0) wrappers.insert(name);
    else if (lower(s.json.get_string("author")) == "flashinfer") by_author.insert(name);
  }
  const std::set<std::string>& pick = wrappers.empty() ? by_author : wrappers;
  if (pick.size() > 1)
    throw Error(Status::invalid_argument,
                fmt::format("FlashInfer definition \"{}\" has several FlashInfer baseline solutions ({}); name one with "
                            "--baseline-solution",
                            definition, joined(pick)));
  return pick.empty() ? std::string() : *pick.begin();
}

}  // namespace

void apply_trace_baselines(TaskSpec& spec, const fs::path& root, const std::string& definition,
                           const DatasetOptions& options) {
  if (options.baseline_solution == "none") {
    if (options.measure_baseline)
      throw Error(Status::invalid_argument,
                  "--measure-baseline needs a baseline solution, not --baseline-solution none");
    return;
  }
  const TraceIndex traces = read_traces(root, definition);
  const auto solutions = read_solutions(root, definition);
  const std::string name =
      options.baseline_solution.empty() ? default_baseline(traces, solutions, definition) : options.baseline_solution;
  if (name.empty()) {
    if (options.measure_baseline)
      throw Error(Status::invalid_argument,
                  fmt::format("--measure-baseline: the dataset {} has no FlashInfer baseline solution for \"{}\" "
                              "(flashinfer_wrapper*); name one with --baseline-solution",
                              root.string(), definition));
    return;  // no FlashInfer kernel in this dataset: the task's own baseline, if any
  }
  // Whether libksearch can measure the solution here, and if not, why.
  std::optional<Solution> runnable;
  std::string measure;
  if (auto it = solutions.find(name); it == solutions.end()) {
    measure = fmt::format("{} cannot be measured here: the dataset has no solutions/**/*.json named so", name);
  } else {
    try {
      Solution s = parse_solution_text(it->second.json.dump(), spec);
      if (std::find(spec.languages.begin(), spec.languages.end(), s.language) == spec.languages.end())
        throw Error(Status::invalid_argument,
                    fmt::format("it is a {} solution, which this task does not run", to_string(s.language)));
      s.name = name;
      runnable = std::move(s);
      // The Solution's own language: a cuda one runs as the Python module that builds it.
      const Json* fib_spec = it->second.json.find("spec");
      measure = fmt::format("--measure-baseline measures {} ({} solution {}) here instead", name,
                            fib_spec ? fib_spec->get_string("language", to_string(runnable->language))
                                 : std::string(to_string(runnable->language)),
                            it->second.file.lexically_relative(root).generic_string());
    } catch (const Error& e) {
      measure = fmt::format("{} ({}) cannot be measured here: {}", name,
                            it->second.file.lexically_relative(root).generic_string(), e.what());
    }
  }
  auto found = traces.find(name);
  if (found == traces.end() && !options.measure_baseline) {
    if (options.baseline_solution.empty()) return;  // a wrapper without traces: as if the dataset had none
    std::set<std::string> with;
    for (const auto& [n, t] : traces) with.insert(n);
    throw Error(Status::not_found,
                fmt::format("--baseline-solution {}: no PASSED trace of it for definition \"{}\" under {} (solutions "
                            "with PASSED traces: {})",
                            name, definition, (root / "traces").string(), joined(with)));
  }
  if (options.measure_baseline && !runnable) throw Error(Status::invalid_argument, "--measure-baseline: " + measure);

  Json latencies = Json::object(), where = Json::object(), hardware = Json::array();
  if (found != traces.end()) {
    for (const auto& [hw, per] : found->second) {
      Json ms = Json::object(), at = Json::object();
      for (const auto& [uuid, best] : per) {
        if (!spec.find_workload(uuid)) continue;  // a trace of a workload this dataset no longer lists
        ms[uuid] = best.ms;
        at[uuid] = best.where;
      }
      if (ms.as_object().empty()) continue;
      latencies[hw] = std::move(ms);
      where[hw] = std::move(at);
      hardware.push_back(hw);
    }
  }
  spec.baseline_latencies = std::move(latencies);
  spec.baseline_origin = Json::obj({{"kind", "traces"},
                                    {"dataset", root.string()},
                                    {"solution", name},
                                    {"hardware", hardware},
                                    {"traces", where},
                                    {"measure_here", options.measure_baseline},
                                    {"measure", measure}});
  // FlashInfer's latencies are never mixed with libksearch's own baseline
  // kernel's: that solution is measured only where the traces lack some.
  spec.baselines.clear();
  if (options.measure_baseline) spec.baselines[runnable->language] = *runnable;
  spec.score = ScoreMode::vs_baseline;
  for (auto& [lang, prompt] : spec.prompts)
    prompt += fmt::format("\n\nScores in this run are against FlashInfer's own kernel, the dataset's solution `{}` "
                          "(its latencies from the dataset's traces for this GPU{}); this replaces any other baseline "
                          "named above.\n",
                          name, options.measure_baseline ? ", or measured here" : "");
}

}  // namespace ks::tasks::flashinfer
