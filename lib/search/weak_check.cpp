// The weak-check detection (ksearch/weak_check.hpp): trivial candidates and
// the task's weakened references through the task's own evaluator, then,
// where one passes, what the reference's outputs look like and a fix found
// by trying other input distributions. Everything goes through the
// Evaluator interface: statistics of the reference's outputs are measured by
// checking candidates against them with an exact tolerance, where the
// matched ratio is the share of elements a candidate reproduces.
#include "ksearch/weak_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>

#include "core/inputs.hpp"
#include "search/weak_check/candidates.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "util/expr.hpp"

KS_NAMESPACE_BEGIN

namespace {

using Clock = std::chrono::steady_clock;

// A workload's check is passed when its outputs matched. `invalid` (faster
// than the speed-of-light bound) is given only after they did, and a
// candidate that computes nothing is that fast.
bool passed_check(EvalStatus s) { return s == EvalStatus::passed || s == EvalStatus::invalid; }

// Correctness only, as cheap as the evaluator allows: two seeds, no
// re-check, no reference timing, a benchmark workload's timing cut to one
// call after the warm-up (the evaluator times every benchmark workload that
// passes), and no baseline latencies to score against.
void make_cheap(EvalOptions& o) {
  o.run_tests = o.run_benchmarks = true;
  o.seeds_per_workload = 2;
  o.recheck_after_timing = false;
  o.time_reference = false;
  o.flush_l2 = false;
  o.timing = TimingMode::standard;
  o.min_reps = o.max_reps = 1;
  o.min_time_per_workload_s = 0;
  o.max_time_per_workload_s = 0.01;
  o.target_rel_stderr = 1;
  o.baseline_latencies = Json();
}

// The task as the check evaluates it: without baselines (a passing trivial
// candidate must not set off a baseline measurement under the check's cheap
// timing). Name, tensors, workloads and reference are unchanged, so the
// reference outputs the evaluator caches serve the search afterwards.
TaskSpec check_spec_of(const TaskSpec& s) {
  TaskSpec c = s;
  c.baselines.clear();
  c.score = ScoreMode::latency;
  return c;
}

// With an exact tolerance the matched ratio of a candidate is the share of
// elements it reproduces exactly (the smallest over outputs and seeds). A
// ratio of 0 fails, after the ratio was recorded.
TaskSpec exact_spec_of(TaskSpec s) {
  s.tolerance.atol = 0;
  s.tolerance.rtol = 0;
  s.tolerance.rule = Tolerance::Rule::ref_relative;
  s.tolerance.min_matched_ratio = 1e-12;
  s.tolerance.nan_policy = Tolerance::NanPolicy::must_match;
  return s;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// "99.997" for 0.99997: enough decimals that a share below 1 never reads
// as 100 and one above 0 never as 0.
std::string percent(double f) {
  if (f == 0 || f == 1) return f == 0 ? "0" : "100";
  const double p = 100 * f;
  for (int decimals = 1;; ++decimals) {
    std::string s = fmt::format("{:.{}f}", p, decimals);
    const bool reads_100 = f < 1 && std::strtod(s.c_str(), nullptr) >= 100;
    const bool reads_0 = f > 0 && std::strtod(s.c_str(), nullptr) <= 0;
    if ((!reads_100 && !reads_0) || decimals >= 6) return s;
  }
}

// A distribution parameter as a task file writes it: a number where it is one.
Json param_json(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (!text.empty() && end && *end == '\0' && std::isfinite(v)) {
    if (v == std::floor(v) && std::abs(v) < 1e15) return static_cast<std::int64_t>(v);
    return v;
  }
  return text;
}

Json dist_json(const Distribution& d) {
  Json j = d.to_json();
  for (auto& [k, v] : j.as_object())
    if (k != "kind" && v.is_string()) v = param_json(v.as_string());
  return j;
}

Json workload_json(const WorkloadSpec& w) {
  Json j = w.to_json();
  if (Json* dist = j.find("dist"))
    for (auto& [k, v] : dist->as_object()) v = dist_json(w.dist_overrides.at(k));
  return j;
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

// The distributions tried for an input, in the order of `rank` (the same
// for every input): centring is what a mostly negative ReLU input wants;
// mirroring, widening and narrowing cover a shift of the other sign,
// outputs drowned by the tolerance, and saturation.
struct Change {
  int rank = 0;
  std::string what;
  Distribution to;
};

std::vector<Change> changes_of(const Distribution& d, double p0, double p1) {
  using K = Distribution::Kind;
  std::vector<Change> out;
  auto add = [&](int rank, const char* what, double a, double b) {
    Distribution n = d;
    n.p0 = num(a);
    n.p1 = num(b);
    out.push_back({rank, what, n});
  };
  if (d.kind == K::normal || d.kind == K::cauchy) {  // (location, scale)
    if (p0 != 0) add(0, "centred at 0", 0, p1);
    if (p0 != 0) add(1, "mirrored", -p0, p1);
    if (p1 > 0) {
      add(2, "10x wider", p0, 10 * p1);
      add(3, "10x narrower", p0, p1 / 10);
      add(4, "100x wider", p0, 100 * p1);
    }
  } else if (d.kind == K::uniform) {  // [low, high)
    const double c = (p0 + p1) / 2, h = (p1 - p0) / 2;
    if (c != 0) add(0, "centred at 0", -h, h);
    if (c != 0) add(1, "mirrored", -p1, -p0);
    if (h > 0) {
      add(2, "10x wider", c - 10 * h, c + 10 * h);
      add(3, "10x narrower", c - h / 10, c + h / 10);
      add(4, "100x wider", c - 100 * h, c + 100 * h);
    }
  }
  return out;
}

class Checker {
 public:
  Checker(const Task& task, Language lang, Evaluator& ev, const WeakCheckOptions& opts, WeakCheckReport& report)
      : spec_(task.spec()),
        lang_(lang),
        ev_(ev),
        opts_(opts),
        report_(report),
        check_(check_spec_of(spec_)),
        exact_(exact_spec_of(check_spec_of(spec_))) {}

  void run() {
    trivial_ = core::weak::trivial_candidates(spec_, lang_);
    for (const auto& t : trivial_) {
      report_.candidates.push_back({t.name, "trivial", t.description, {}, {}, {}});
      solutions_.push_back(t.solution);
    }
    for (const auto& w : spec_.weakened_references) {
      if (w.language != lang_) continue;
      report_.candidates.push_back({w.name, "weakened_reference",
                                    w.description.empty() ? "the reference with a term dropped" : w.description, {},
                                    {}, {}});
      solutions_.push_back(w);
    }
    first_pass();
    order_lists();
    bool everywhere = false;
    for (const auto& c : report_.candidates) everywhere = everywhere || c.passes_all(report_.workloads);
    const auto flagged = report_.flagged_workloads();
    report_.status = everywhere ? "weak" : flagged.empty() ? "ok" : "weak_workloads";
    if (flagged.empty()) return;
    for (const auto& w : flagged) report_.stats.push_back(measure(exact_, w));
    if (report_.weak()) {
      if (opts_.suggest_fixes && spec_.oracle.is_null()) find_fix();
      suggest();
    }
  }

 private:
  std::vector<EvalResult> evaluate(const SpecTask& task, const std::vector<Solution>& solutions,
                                   const std::vector<std::string>& workloads) {
    ev_.options().only_workloads = workloads;
    ++report_.evaluations;
    return ev_.evaluate_batch(task, solutions);
  }

  // Every candidate on the checked workloads. An evaluation stops at the
  // first workload that fails; with every_workload a candidate is evaluated
  // again on the workloads after it, so the report says everywhere it
  // passes (one that passes on some workloads only is worth a note).
  // Candidates fail on the first input seed, and the reference outputs
  // computed meanwhile are the ones the search's first evaluation takes from
  // the evaluator's cache.
  void first_pass() {
    const std::size_t n = solutions_.size();
    std::vector<std::vector<std::string>> remaining(n, report_.workloads);
    for (;;) {
      std::map<std::vector<std::string>, std::vector<std::size_t>> groups;
      for (std::size_t i = 0; i < n; ++i)
        if (!remaining[i].empty()) groups[remaining[i]].push_back(i);
      if (groups.empty()) return;
      for (const auto& [workloads, members] : groups) {
        std::vector<Solution> batch;
        for (std::size_t i : members) batch.push_back(solutions_[i]);
        auto results = evaluate(check_, batch, workloads);
        for (std::size_t k = 0; k < members.size(); ++k) {
          WeakCandidate& c = report_.candidates[members[k]];
          record(c, results.at(k), remaining[members[k]]);
          if (!opts_.every_workload && !c.failed.empty()) remaining[members[k]].clear();
        }
      }
    }
  }

  static void record(WeakCandidate& c, const EvalResult& r, std::vector<std::string>& remaining) {
    if (r.workloads.empty() || r.status == EvalStatus::compile_error) {
      c.error = fmt::format("{}: {}", to_string(r.status), r.failure_reason());
      remaining.clear();
      return;
    }
    for (const auto& w : r.workloads) {
      (passed_check(w.status) ? c.passed : c.failed).push_back(w.name);
      remaining.erase(std::remove(remaining.begin(), remaining.end(), w.name), remaining.end());
    }
  }

  // Lists in the order the workloads were checked.
  void order_lists() {
    auto rank = [&](const std::string& w) {
      return std::find(report_.workloads.begin(), report_.workloads.end(), w) - report_.workloads.begin();
    };
    for (auto& c : report_.candidates) {
      std::sort(c.passed.begin(), c.passed.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
      std::sort(c.failed.begin(), c.failed.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
    }
  }

  // The reference's outputs on one workload of `exact`: zeros give the zero
  // share and the largest |value|; where zeros are not the majority, the
  // most-common-value probe (host tasks) gives that value's share.
  WeakOutputStats measure(const SpecTask& exact, const std::string& workload) {
    WeakOutputStats s;
    s.workload = workload;
    const EvalResult z = evaluate(exact, {trivial_.front().solution}, {workload}).front();
    if (const WorkloadResult* w = ratio_of(z)) {
      s.zero_fraction = w->matched_ratio;
      s.max_abs = w->max_abs_error;
    }
    if (s.zero_fraction > 0.5) {
      s.most_common_fraction = s.zero_fraction;  // zeros are the most common value in every output
    } else if (auto probe = most_common_probe()) {
      const EvalResult m = evaluate(exact, {*probe}, {workload}).front();
      if (const WorkloadResult* w = ratio_of(m)) s.most_common_fraction = w->matched_ratio;
    }
    return s;
  }

  // The workload result whose matched ratio was measured: checked outputs
  // (passed, faster than light, or fewer matches than the tiny ratio asks).
  static const WorkloadResult* ratio_of(const EvalResult& r) {
    if (r.workloads.empty()) return nullptr;
    const WorkloadResult& w = r.workloads.front();
    return passed_check(w.status) || w.status == EvalStatus::incorrect ? &w : nullptr;
  }

  const std::optional<Solution>& most_common_probe() {
    if (!probe_made_) {
      probe_ = core::weak::most_common_value_probe(spec_, lang_);
      probe_made_ = true;
    }
    return probe_;
  }

  // The workload to try fixes on: the largest with at most 4M output
  // elements (a one-element edge case says little about a distribution),
  // else the smallest.
  const WorkloadSpec* fix_base() const {
    const WorkloadSpec* best = nullptr;
    const WorkloadSpec* smallest = nullptr;
    double best_n = -1, smallest_n = 0;
    for (const auto& name : report_.workloads) {
      const WorkloadSpec* w = spec_.find_workload(name);
      if (!w) continue;
      const util::Vars dims(w->dims.begin(), w->dims.end());
      double n = 0;
      for (const auto& t : spec_.tensors)
        if (t.is_output) n += static_cast<double>(core::element_count(core::tensor_shape(t, dims)));
      if (n <= double(1 << 22) && n > best_n) best = w, best_n = n;
      if (!smallest || n < smallest_n) smallest = w, smallest_n = n;
    }
    return best ? best : smallest;
  }

  // Tries other distributions for one input at a time on one workload,
  // added as a correctness workload of its own, until every candidate that
  // passed everywhere fails there while the reference still passes its own
  // check with NaN forbidden (a distribution its reference cannot take,
  // e.g. negative inputs to a logarithm, is no fix).
  void find_fix() {
    auto ref = spec_.references.find(lang_);
    const WorkloadSpec* base = fix_base();
    if (ref == spec_.references.end() || !base) return;
    std::vector<Solution> batch;
    for (std::size_t i = 0; i < solutions_.size(); ++i)
      if (report_.candidates[i].passes_all(report_.workloads)) batch.push_back(solutions_[i]);
    Solution reference = ref->second;
    reference.finalize();
    batch.push_back(reference);
    std::string name = base->name + "_weak_fix";
    while (spec_.find_workload(name)) name += "_";
    const util::Vars dims(base->dims.begin(), base->dims.end());
    struct Trial {
      const TensorSpec* tensor;
      Distribution from;
      Change change;
    };
    std::vector<Trial> trials;
    for (const auto& t : spec_.tensors) {
      if (t.is_output || t.scalar || !dtype_is_float(t.dtype) || base->data.count(t.name)) continue;
      const Distribution& d = core::distribution_of(t, *base);
      try {
        for (auto& c : changes_of(d, util::eval_double_expr(d.p0, dims), util::eval_double_expr(d.p1, dims)))
          trials.push_back({&t, d, std::move(c)});
      } catch (const Error&) {
        continue;  // parameters that are not numbers here: leave the input as it is
      }
    }
    // Every input centred first, then every input mirrored, ...
    std::stable_sort(trials.begin(), trials.end(),
                     [](const Trial& a, const Trial& b) { return a.change.rank < b.change.rank; });
    int tried = 0;
    for (const auto& trial : trials) {
      if (tried++ >= opts_.max_fix_trials) return;
      WorkloadSpec extra = *base;
      extra.name = name;
      extra.benchmark = false;
      extra.dist_overrides[trial.tensor->name] = trial.change.to;
      TaskSpec with = check_spec_of(spec_);
      with.workloads.push_back(extra);
      with.tolerance.nan_policy = Tolerance::NanPolicy::forbid;
      try {
        const SpecTask task(with);
        auto results = evaluate(task, batch, {name});
        if (!results.back().passed()) continue;  // the reference itself does not pass: NaN, a crash
        bool all_fail = true;
        for (std::size_t i = 0; i + 1 < results.size(); ++i) all_fail = all_fail && !passed_check(results[i].status);
        if (!all_fail) continue;
        WeakCheckFix fix;
        fix.workload = base->name;
        fix.tensor = trial.tensor->name;
        fix.change = trial.change.what;
        fix.from = trial.from;
        fix.to = trial.change.to;
        fix.extra_workload = extra;
        TaskSpec exact = exact_spec_of(check_spec_of(spec_));
        exact.workloads.push_back(extra);
        fix.stats = measure(SpecTask(exact), name);
        report_.fix = fix;
        return;
      } catch (const Error& e) {
        if (e.status() == Status::cancelled) throw;
        // The reference failed on these inputs (a fault of the task's): not a fix.
      }
    }
  }

  void suggest() {
    auto& out = report_.suggestions;
    if (const auto& f = report_.fix) {
      // What made the outputs degenerate, measured again on the new inputs.
      const WeakOutputStats& s = f->stats;
      bool zeros = false, repeats = false;
      for (const auto& b : report_.stats) {
        zeros = zeros || b.zero_fraction >= 0.5;
        repeats = repeats || b.most_common_fraction >= 0.5;
      }
      std::string after;
      if (zeros && s.zero_fraction >= 0)
        after = fmt::format(" and the reference's outputs are {} % zeros", percent(s.zero_fraction));
      else if (repeats && s.most_common_fraction >= 0)
        after = fmt::format(" and the most common value of the reference's outputs makes up {} %",
                            percent(s.most_common_fraction));
      out.push_back(fmt::format(
          "Suggested fix: draw input \"{}\" from {} ({}) instead of {}: on workload \"{}\" every candidate above then "
          "fails{}. In the task file, set \"dist\": {{\"{}\": {}}} in workload \"{}\", or add the workload {}{}.",
          f->tensor, dist_json(f->to).dump(), f->change, dist_json(f->from).dump(), f->workload, after, f->tensor,
          dist_json(f->to).dump(), f->workload, workload_json(f->extra_workload).dump(),
          spec_.has_feedback_subset() ? " and list it in \"feedback_workloads\"" : ""));
    }
    // Zeros that pass where most elements are not zero pass by the
    // tolerance: the outputs are small beside atol.
    const WeakCandidate* zeros = report_.candidates.empty() ? nullptr : &report_.candidates.front();
    for (const auto& w : zeros ? zeros->passed : std::vector<std::string>{}) {
      const WeakOutputStats* s = report_.stats_for(w);
      if (!s || s->zero_fraction < 0 || s->zero_fraction >= 0.5 || s->max_abs <= 0) continue;
      out.push_back(fmt::format(
          "Tolerance: on workload \"{}\" the largest |output| is {}, within atol = {} (+ rtol = {} x |reference|), "
          "so zeros match everywhere; an atol well below {} (or inputs that give larger outputs) tells them apart.",
          w, num(s->max_abs), num(spec_.tolerance.atol), num(spec_.tolerance.rtol), num(s->max_abs)));
      break;
    }
    if (out.empty())
      out.push_back(fmt::format("{}Add a workload whose outputs are not almost all one value (other shapes, or "
                                "inputs given as \"data\") and that the candidates above get wrong, or tighten the "
                                "tolerance where the outputs are small beside it.",
                                opts_.suggest_fixes && spec_.oracle.is_null()
                                    ? "No other input distribution tried tells the candidates apart. "
                                    : ""));
  }

  const TaskSpec& spec_;
  Language lang_;
  Evaluator& ev_;
  const WeakCheckOptions& opts_;
  WeakCheckReport& report_;
  const SpecTask check_;
  const SpecTask exact_;
  std::vector<core::weak::TrivialCandidate> trivial_;
  std::vector<Solution> solutions_;  // trivial candidates, then weakened references, as report_.candidates
  std::optional<Solution> probe_;
  bool probe_made_ = false;
};

Json string_list(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

std::vector<std::string> strings_of(const Json* j) {
  std::vector<std::string> out;
  if (j && j->is_array())
    for (const auto& s : j->as_array())
      if (s.is_string()) out.push_back(s.as_string());
  return out;
}

}  // namespace

bool WeakCandidate::passes_all(const std::vector<std::string>& workloads) const {
  if (!error.empty() || workloads.empty()) return false;
  for (const auto& w : workloads)
    if (std::find(passed.begin(), passed.end(), w) == passed.end()) return false;
  return true;
}

Json WeakCandidate::to_json() const {
  Json j = Json::obj({{"name", name},
                      {"kind", kind},
                      {"description", description},
                      {"passed", string_list(passed)},
                      {"failed", string_list(failed)}});
  if (!error.empty()) j["error"] = error;
  return j;
}

WeakCandidate WeakCandidate::from_json(const Json& j) {
  return {j.get_string("name"),        j.get_string("kind"),        j.get_string("description"),
          strings_of(j.find("passed")), strings_of(j.find("failed")), j.get_string("error")};
}

Json WeakOutputStats::to_json() const {
  return Json::obj({{"workload", workload},
                    {"zero_fraction", zero_fraction},
                    {"most_common_fraction", most_common_fraction},
                    {"max_abs", max_abs}});
}

WeakOutputStats WeakOutputStats::from_json(const Json& j) {
  return {j.get_string("workload"), j.get_number("zero_fraction", -1), j.get_number("most_common_fraction", -1),
          j.get_number("max_abs", -1)};
}

Json WeakCheckFix::to_json() const {
  return Json::obj({{"workload", workload},
                    {"tensor", tensor},
                    {"change", change},
                    {"from", dist_json(from)},
                    {"to", dist_json(to)},
                    {"extra_workload", workload_json(extra_workload)},
                    {"stats", stats.to_json()}});
}

WeakCheckFix WeakCheckFix::from_json(const Json& j) {
  WeakCheckFix f;
  f.workload = j.get_string("workload");
  f.tensor = j.get_string("tensor");
  f.change = j.get_string("change");
  f.from = Distribution::from_json(j.at("from"));
  f.to = Distribution::from_json(j.at("to"));
  f.extra_workload = WorkloadSpec::from_json(j.at("extra_workload"));
  f.stats = WeakOutputStats::from_json(j.at("stats"));
  return f;
}

std::vector<std::string> WeakCheckReport::flagged_workloads() const {
  std::vector<std::string> out;
  for (const auto& w : workloads)
    for (const auto& c : candidates)
      if (std::find(c.passed.begin(), c.passed.end(), w) != c.passed.end()) {
        out.push_back(w);
        break;
      }
  return out;
}

const WeakOutputStats* WeakCheckReport::stats_for(const std::string& workload) const {
  for (const auto& s : stats)
    if (s.workload == workload) return &s;
  return nullptr;
}

std::string WeakCheckReport::text() const {
  if (status == "skipped") return fmt::format("weak-check detection skipped: {}", reason);
  const std::string checked = fmt::format("workload{} {}", workloads.size() == 1 ? "" : "s", join(workloads));
  if (status == "ok")
    return fmt::format("weak-check detection: ok: none of {} candidates ({}) passes the check of task \"{}\" on {} "
                       "({:.1f} s)",
                       candidates.size(),
                       [&] {
                         std::vector<std::string> names;
                         for (const auto& c : candidates) names.push_back(c.name);
                         return join(names);
                       }(),
                       task, checked, wall_s);
  std::string s =
      weak() ? fmt::format("the correctness check of task \"{}\" ({}) is weak: a candidate that does not compute the "
                           "task passes it on every workload checked ({}), so a search would accept such a kernel as "
                           "correct:\n",
                           task, to_string(language), join(workloads))
             : fmt::format("the correctness check of task \"{}\" ({}) is weak on some workloads: candidates that do "
                           "not compute the task pass there (other workloads tell them apart, so a search is not "
                           "misled, but those workloads check little):\n",
                           task, to_string(language));
  auto who = [](const WeakCandidate& c) {
    return c.kind == "trivial" ? c.name : fmt::format("weakened reference \"{}\"", c.name);
  };
  std::vector<std::string> apart, broken;
  for (const auto& c : candidates) {
    if (!c.error.empty()) broken.push_back(fmt::format("{} ({})", who(c), c.error));
    else if (c.passed.empty()) apart.push_back(who(c));
    else
      s += fmt::format("  {} ({}) passes on {}{}\n", who(c), c.description, join(c.passed),
                       c.failed.empty() ? "" : fmt::format("; fails on {}", join(c.failed)));
  }
  if (!apart.empty()) s += fmt::format("  told apart everywhere: {}\n", join(apart));
  if (!broken.empty()) s += fmt::format("  not evaluated: {}\n", join(broken, "; "));
  const char* each = outputs > 1 ? " (the least of its outputs)" : "";
  for (const auto& st : stats) {
    std::vector<std::string> parts;
    if (st.zero_fraction >= 0) parts.push_back(fmt::format("{} % zeros", percent(st.zero_fraction)));
    // A most common value under 1 % says only that values hardly repeat.
    if (st.most_common_fraction >= 0.01 && st.most_common_fraction > st.zero_fraction)
      parts.push_back(fmt::format("its most common value makes up {} %", percent(st.most_common_fraction)));
    if (st.max_abs >= 0) parts.push_back(fmt::format("largest |value| {}", num(st.max_abs)));
    if (parts.empty()) continue;
    s += fmt::format("  workload \"{}\": the reference's outputs are {}{}\n", st.workload, join(parts, ", "), each);
  }
  for (const auto& sg : suggestions) s += "  " + sg + "\n";
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

Json WeakCheckReport::to_json() const {
  Json cands = Json::array();
  for (const auto& c : candidates) cands.push_back(c.to_json());
  Json st = Json::array();
  for (const auto& x : stats) st.push_back(x.to_json());
  Json j = Json::obj({{"status", status},
                      {"task", task},
                      {"language", to_string(language)},
                      {"workloads", string_list(workloads)},
                      {"outputs", outputs},
                      {"candidates", cands},
                      {"stats", st},
                      {"suggestions", string_list(suggestions)},
                      {"evaluations", evaluations},
                      {"wall_s", wall_s}});
  if (!reason.empty()) j["reason"] = reason;
  if (fix) j["fix"] = fix->to_json();
  return j;
}

WeakCheckReport WeakCheckReport::from_json(const Json& j) {
  WeakCheckReport r;
  r.status = j.get_string("status", "skipped");
  r.reason = j.get_string("reason");
  r.task = j.get_string("task");
  r.language = language_from_string(j.get_string("language", "cpp")).value_or(Language::cpp);
  r.workloads = strings_of(j.find("workloads"));
  r.outputs = static_cast<int>(j.get_int("outputs", 0));
  if (const Json* c = j.find("candidates"); c && c->is_array())
    for (const auto& x : c->as_array()) r.candidates.push_back(WeakCandidate::from_json(x));
  if (const Json* s = j.find("stats"); s && s->is_array())
    for (const auto& x : s->as_array()) r.stats.push_back(WeakOutputStats::from_json(x));
  if (const Json* f = j.find("fix"); f && f->is_object()) r.fix = WeakCheckFix::from_json(*f);
  r.suggestions = strings_of(j.find("suggestions"));
  r.evaluations = static_cast<int>(j.get_int("evaluations", 0));
  r.wall_s = j.get_number("wall_s", 0);
  return r;
}

WeakCheckReport weak_check_skipped(const Task& task, Language language, std::string reason) {
  WeakCheckReport r;
  r.status = "skipped";
  r.reason = std::move(reason);
  r.task = task.name();
  r.language = language;
  return r;
}

WeakCheckReport check_weak(const Task& task, Language language, Evaluator& evaluator,
                           const WeakCheckOptions& options) {
  const auto start = Clock::now();
  const TaskSpec& spec = task.spec();
  WeakCheckReport report;
  report.task = spec.name;
  report.language = language;
  for (const auto& t : spec.tensors) report.outputs += t.is_output ? 1 : 0;
  if (!options.workloads.empty()) report.workloads = options.workloads;
  else if (spec.has_feedback_subset()) report.workloads = spec.feedback_workloads;
  else
    for (const auto& w : spec.workloads) report.workloads.push_back(w.name);
  EvalOptions& o = evaluator.options();
  const EvalOptions saved = o;
  struct Restore {
    EvalOptions& o;
    const EvalOptions& saved;
    ~Restore() { o = saved; }
  } restore{o, saved};
  make_cheap(o);
  Checker(task, language, evaluator, options, report).run();
  report.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

KS_NAMESPACE_END
