#include "eval/baseline_scoring.hpp"

#include <fmt/format.h>

#include <cctype>
#include <chrono>

#include "eval/phases.hpp"
#include "ksearch/error.hpp"
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

}  // namespace

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
  if (spec.baselines.empty() && options().baseline_latencies.is_null()) return results;
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
  auto baseline_it = spec.baselines.find(language);
  const Solution* baseline = baseline_it == spec.baselines.end() ? nullptr : &baseline_it->second;
  std::vector<std::string> missing;
  auto known = [&](const std::string& w) -> std::optional<double> {
    if (auto ms = imported_baseline_ms(imported, r.device, w)) return ms;
    if (!baseline) return std::nullopt;
    const auto& mine = ms_[spec.name];
    auto it = mine.find(entry_key(spec, *baseline, r.device, w));
    if (it == mine.end()) return std::nullopt;
    return it->second;
  };
  for (const auto& w : r.workloads)
    if (w.benchmark && w.timing.count > 0 && !known(w.name)) missing.push_back(w.name);
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
      if (w.timing.count > 0) ms_[spec.name][entry_key(spec, *baseline, b.device, w.name)] = w.timing.mean_ms;
    save(spec);
  }
  for (auto& w : r.workloads)
    if (w.benchmark && w.timing.count > 0)
      if (auto ms = known(w.name)) w.baseline_ms = *ms;
  r.compute_summary();
}

}  // namespace ks::eval
