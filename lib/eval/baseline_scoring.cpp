#include "eval/baseline_scoring.hpp"

#include <fmt/format.h>

#include <cctype>
#include <algorithm>
#include <chrono>

#include "eval/phases.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace ks::eval {
namespace {

// "NVIDIA H100 80GB HBM3" -> "NVIDIA_H100_80GB_HBM3".
std::string normalize(const std::string& s) {
  std::string out;
  for (char c : s) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_');
  return out;
}

bool device_matches(const std::string& key, const std::string& device) {
  if (key == device) return true;
  const std::string k = normalize(key), d = normalize(device);
  return !k.empty() && (d == k || d.rfind(k + "_", 0) == 0);
}

// The hardware key of `table` that `device` matches, if any.
std::optional<std::string> matching_key(const Json& table, const std::string& device) {
  if (!table.is_object()) return std::nullopt;
  for (const auto& [key, per] : table.as_object())
    if (per.is_object() && device_matches(key, device)) return key;
  return std::nullopt;
}

std::string joined(const std::vector<std::string>& v, std::size_t max = 12) {
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < max; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > max) out += fmt::format(" and {} more", v.size() - max);
  return out;
}

}  // namespace

const Solution* baseline_solution_for(const TaskSpec& spec, Language language) {
  if (auto it = spec.baselines.find(language); it != spec.baselines.end()) return &it->second;
  // A dataset's own baseline (FlashInfer's kernel, measured here) is one
  // solution for candidates of every language.
  if (spec.baseline_origin.get_bool("measure_here") && !spec.baselines.empty()) return &spec.baselines.begin()->second;
  return nullptr;
}

std::optional<double> imported_baseline_ms(const Json& table, const std::string& device, const std::string& workload) {
  if (!table.is_object()) return std::nullopt;
  for (const auto& [key, per] : table.as_object()) {
    if (!device_matches(key, device) || !per.is_object()) continue;
    if (const Json* ms = per.find(workload); ms && ms->is_number() && ms->as_number() > 0) return ms->as_number();
  }
  return std::nullopt;
}

BaselineScoring::BaselineScoring(std::unique_ptr<Evaluator> inner, std::filesystem::path cache_dir)
    : inner_(std::move(inner)), dir_(std::move(cache_dir)) {}

EvalResult BaselineScoring::evaluate(const Task& task, const Solution& solution) {
  return evaluate_batch(task, {solution}).front();
}

std::vector<EvalResult> BaselineScoring::evaluate_batch(const Task& task, const std::vector<Solution>& solutions) {
  std::vector<EvalResult> results = inner_->evaluate_batch(task, solutions);
  const TaskSpec& spec = task.spec();
  if (spec.baselines.empty() && spec.baseline_latencies.is_null() && options().baseline_latencies.is_null())
    return results;
  for (std::size_t i = 0; i < results.size(); ++i) score(task, solutions[i].language, results[i]);
  return results;
}

std::string BaselineScoring::entry_key(const TaskSpec& task, const Solution& baseline, const std::string& device,
                                       const std::string& workload) const {
  // What the latency depends on: the workload's shapes and inputs, the
  // baseline's code, the device, and whether caches were flushed.
  const WorkloadSpec* w = task.find_workload(workload);
  util::Sha256 h;
  for (const std::string& field :
       {task.name, w ? w->to_json().dump() : workload, baseline.id.empty() ? baseline.compute_id() : baseline.id,
        device, std::string(inner_->options().flush_l2 ? "flush" : "warm")}) {
    h.update(std::to_string(field.size()) + ":");
    h.update(field);
  }
  return h.hex_digest().substr(0, 32);
}

std::filesystem::path BaselineScoring::cache_file(const TaskSpec& task) const {
  std::string safe;
  for (char c : task.name) safe.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_');
  return dir_ / "baselines" / (safe + ".json");
}

void BaselineScoring::load(const TaskSpec& task) {
  if (loaded_[task.name] || dir_.empty()) return;
  loaded_[task.name] = true;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(cache_file(task), ec)) return;
  try {
    Json j = Json::parse(util::read_file(cache_file(task)));
    if (const Json* e = j.find("entries"); e && e->is_object())
      for (const auto& [k, v] : e->as_object())
        if (v.is_object() && v.get_number("ms") > 0) ms_[task.name][k] = v.get_number("ms");
  } catch (const Error&) {
    // A damaged cache is remeasured, as a damaged reference file is recomputed.
  }
}

void BaselineScoring::save(const TaskSpec& task) {
  if (dir_.empty()) return;
  Json entries = Json::object();
  for (const auto& [k, ms] : ms_[task.name]) entries[k] = Json::obj({{"ms", ms}});
  try {
    util::make_dirs(cache_file(task).parent_path());
    util::write_file_atomic(cache_file(task), Json::obj({{"task", task.name}, {"entries", entries}}).dump(1));
  } catch (const Error&) {
    // Caching is an optimisation; the latencies are in memory.
  }
}

void BaselineScoring::score(const Task& task, Language language, EvalResult& r) {
  const TaskSpec& spec = task.spec();
  r.score_mode = spec.score;
  if (!r.passed()) return;
  std::lock_guard lock(mu_);
  load(spec);
  const Json& imported = inner_->options().baseline_latencies;
  const Solution* baseline = baseline_solution_for(spec, language);
  std::vector<std::string> missing;
  auto known = [&](const std::string& w) -> std::optional<double> {
    if (auto ms = imported_baseline_ms(imported, r.device, w)) return ms;
    if (auto ms = imported_baseline_ms(spec.baseline_latencies, r.device, w)) return ms;
    if (!baseline) return std::nullopt;
    const auto& mine = ms_[spec.name];
    auto it = mine.find(entry_key(spec, *baseline, r.device, w));
    if (it == mine.end()) return std::nullopt;
    return it->second;
  };
  for (const auto& w : r.workloads)
    if (w.benchmark && w.timing.count > 0 && !known(w.name)) missing.push_back(w.name);
  // Latencies from traces are never mixed with another kernel's: a
  // workload they lack is an error unless their own solution is measured.
  if (!missing.empty() && !baseline) check_baseline_coverage(spec, inner_->options(), r.device, language, missing);
  if (!missing.empty() && baseline) {
    // Measured once per device: the baseline runs as any candidate does, on
    // the workloads still missing, under the same timing options.
    EvalOptions& o = inner_->options();
    const EvalOptions saved = o;
    o.only_workloads = missing;
    o.baseline_latencies = Json();
    EvalResult b;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      b = inner_->evaluate(task, *baseline);
    } catch (...) {
      o = saved;
      throw;
    }
    o = saved;
    // The candidate's evaluation waited for it: its phases and wall time say so.
    if (Json* p = r.metrics.find("phases"); p && p->is_object()) {
      PhaseTimes t = PhaseTimes::from_json(*p);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      t[Phase::baseline] += s;
      t.wall_s += s;
      *p = t.to_json();
    }
    if (!b.passed())
      throw Error(Status::invalid_argument,
                  fmt::format("task \"{}\": its baseline solution \"{}\" does not pass on {} ({}); scores against it "
                              "cannot be computed; the task is at fault, not the candidate",
                              spec.name, baseline->name, r.device, b.summary()));
    for (const auto& w : b.workloads)
      if (w.timing.count > 0) ms_[spec.name][entry_key(spec, *baseline, b.device, w.name)] = w.timing.latency();
    save(spec);
  }
  for (auto& w : r.workloads)
    if (w.benchmark && w.timing.count > 0)
      if (auto ms = known(w.name)) w.baseline_ms = *ms;
  r.compute_summary();
}

}  // namespace ks::eval

KS_NAMESPACE_BEGIN

Json baseline_sources(const TaskSpec& spec, const EvalOptions& options, const std::string& device, Language language) {
  if (spec.score != ScoreMode::vs_baseline && spec.baseline_latencies.is_null() && options.baseline_latencies.is_null())
    return Json();
  const Solution* baseline = eval::baseline_solution_for(spec, language);
  const Json& origin = spec.baseline_origin;
  const auto trace_key = eval::matching_key(spec.baseline_latencies, device);
  Json workloads = Json::object();
  std::map<std::string, int> counts;
  for (const auto& w : spec.workloads) {
    if (!w.benchmark) continue;
    Json e;
    if (auto ms = eval::imported_baseline_ms(options.baseline_latencies, device, w.name)) {
      e = Json::obj({{"source", "imported"}, {"ms", *ms}});
    } else if (auto ms2 = eval::imported_baseline_ms(spec.baseline_latencies, device, w.name)) {
      e = Json::obj({{"source", "traces"}, {"ms", *ms2}, {"hardware", trace_key.value_or("")},
                     {"solution", origin.get_string("solution")},
                     {"trace", origin["traces"][trace_key.value_or("")].get_string(w.name)}});
    } else if (baseline) {
      const bool from_dataset = origin.get_bool("measure_here");
      e = Json::obj(
          {{"source", "measured"}, {"solution", baseline->name}, {"origin", from_dataset ? "dataset" : "task"}});
    } else {
      e = Json::obj({{"source", "none"}});
    }
    ++counts[e.get_string("source")];
    workloads[w.name] = std::move(e);
  }
  Json c = Json::object();
  for (const auto& [k, n] : counts) c[k] = n;
  Json j = Json::obj({{"device", device}, {"workloads", workloads}, {"counts", c}});
  if (!origin.is_null()) j["origin"] = origin;
  return j;
}

void check_baseline_coverage(const TaskSpec& spec, const EvalOptions& options, const std::string& device,
                             Language language, const std::vector<std::string>& only) {
  // Only latencies from traces are checked: a task's own baseline kernel is
  // measured wherever it runs.
  if (spec.baseline_latencies.is_null() || eval::baseline_solution_for(spec, language)) return;
  std::vector<std::string> missing;
  for (const auto& w : spec.workloads) {
    if (!w.benchmark) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), w.name) == only.end()) continue;
    if (!eval::imported_baseline_ms(options.baseline_latencies, device, w.name) &&
        !eval::imported_baseline_ms(spec.baseline_latencies, device, w.name))
      missing.push_back(w.name);
  }
  if (missing.empty()) return;
  const Json& origin = spec.baseline_origin;
  const std::string solution = origin.get_string("solution", "the baseline solution");
  std::vector<std::string> cards;
  if (spec.baseline_latencies.is_object())
    for (const auto& [k, v] : spec.baseline_latencies.as_object()) cards.push_back(k);
  std::string what;
  if (!eval::matching_key(spec.baseline_latencies, device))
    what = fmt::format("the traces of {} in {} cover {}, not this card ({})", solution,
                       origin.get_string("dataset", "the dataset"), cards.empty() ? "no card" : eval::joined(cards),
                       device.empty() ? "unknown" : device);
  else
    what = fmt::format("{} of the workloads have no PASSED trace of {} on this card ({}): {}", missing.size(), solution,
                       device, eval::joined(missing));
  const std::string measure = origin.get_string("measure");
  throw Error(Status::invalid_argument,
              fmt::format("task \"{}\": {}, so its scores against FlashInfer's kernel cannot be computed here. {}; or "
                          "give latencies for this card (--baseline-latencies FILE), or leave FlashInfer's latencies "
                          "out (--baseline-solution none: the task's own baseline kernel, where it has one)",
                          spec.name, what,
                          measure.empty() ? "--measure-baseline measures the baseline solution here instead"
                                          : measure));
}

KS_NAMESPACE_END
