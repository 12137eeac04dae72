// TaskSpec: consistency checks and the JSON form sent to worker processes
// (sources inline). Task files on disk are read by lib/tasks, which resolves
// file references and then calls TaskSpec::from_json.
#include "ksearch/task.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/fib_solution.hpp"
#include "core/response/parse.hpp"
#include "core/rng/structured.hpp"
#include "core/solution_files.hpp"
#include "core/param_space.hpp"
#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "util/expr.hpp"
#include "util/fs.hpp"
#include "util/json_fields.hpp"

KS_NAMESPACE_BEGIN

const TensorSpec* TaskSpec::find_tensor(std::string_view n) const {
  for (const auto& t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

const WorkloadSpec* TaskSpec::find_workload(std::string_view n) const {
  for (const auto& w : workloads)
    if (w.name == n) return &w;
  return nullptr;
}

std::vector<const WorkloadSpec*> TaskSpec::benchmark_workloads() const {
  std::vector<const WorkloadSpec*> out;
  for (const auto& w : workloads)
    if (w.benchmark) out.push_back(&w);
  return out;
}

std::vector<const WorkloadSpec*> TaskSpec::test_workloads() const {
  std::vector<const WorkloadSpec*> out;
  for (const auto& w : workloads)
    if (!w.benchmark) out.push_back(&w);
  return out;
}

namespace {

[[noreturn]] void invalid(const TaskSpec& t, const std::string& what) {
  throw Error(Status::invalid_argument, fmt::format("task \"{}\": {}", t.name, what));
}

void check_expr(const TaskSpec& t, const std::string& where, const std::string& text,
                const std::set<std::string>& known) {
  util::Expr e;
  try {
    e = util::Expr::parse(text);
  } catch (const Error& err) {
    invalid(t, fmt::format("{}: {}", where, err.what()));
  }
  for (const auto& v : e.variables())
    if (!known.count(v)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      invalid(t, fmt::format("{}: \"{}\" uses unknown dimension \"{}\" (dimensions: {})", where, text,
                             v, list));
    }
}

// Evaluates `text` on a workload's dimensions `vars`, naming where it failed.
double eval_on(const TaskSpec& t, const WorkloadSpec& w, const util::Vars& vars, const std::string& where,
               const std::string& text) {
  double v = 0;
  try {
    v = util::eval_double_expr(text, vars);
  } catch (const Error& e) {
    invalid(t, fmt::format("workload \"{}\": {} \"{}\": {}", w.name, where, text, e.what()));
  }
  if (!std::isfinite(v)) invalid(t, fmt::format("workload \"{}\": {} \"{}\" is not finite", w.name, where, text));
  return v;
}

// The values a workload gives the formulas: checked at load, so a task file
// that could only fail in the middle of an evaluation is refused up front.
void check_workload_values(const TaskSpec& t, const WorkloadSpec& w) {
  const util::Vars vars(w.dims.begin(), w.dims.end());
  for (const auto& ts : t.tensors) {
    double count = 1;
    for (const auto& s : ts.shape) {
      const double extent = eval_on(t, w, vars, fmt::format("tensor \"{}\" shape", ts.name), s);
      if (extent < 0)
        invalid(t, fmt::format("workload \"{}\": tensor \"{}\" has a negative extent \"{}\"", w.name, ts.name, s));
      count *= extent;
    }
    if (ts.is_output) continue;
    if (auto data = w.data.find(ts.name); data != w.data.end()) {
      if (!data->second.from_file() && static_cast<double>(data->second.values.size()) != count)
        invalid(t, fmt::format("workload \"{}\": input \"{}\" is given {} values but has {} elements", w.name,
                               ts.name, data->second.values.size(), count));
      continue;
    }
    auto o = w.dist_overrides.find(ts.name);
    const Distribution& d = o != w.dist_overrides.end() ? o->second : ts.dist;
    const std::string where = fmt::format("distribution of \"{}\"", ts.name);
    const double p0 = eval_on(t, w, vars, where, d.p0), p1 = eval_on(t, w, vars, where, d.p1);
    const char* wrong = nullptr;
    switch (d.kind) {
      case Distribution::Kind::normal: wrong = p1 < 0 ? "a negative standard deviation" : nullptr; break;
      case Distribution::Kind::uniform:
      case Distribution::Kind::int_range: wrong = p0 > p1 ? "a lower bound above its upper bound" : nullptr; break;
      case Distribution::Kind::cauchy: wrong = !(p1 > 0) ? "a scale that is not positive" : nullptr; break;
      case Distribution::Kind::clamped_normal: wrong = p0 > p1 ? "a lower bound above its upper bound" : nullptr; break;
      case Distribution::Kind::constant: break;
      case Distribution::Kind::indptr:
      case Distribution::Kind::permutation: {
        std::string why = core::structured_problem(d.kind, static_cast<std::size_t>(count), p0, p1);
        if (!why.empty()) invalid(t, fmt::format("workload \"{}\": input \"{}\": {}", w.name, ts.name, why));
        break;
      }
    }
    if (wrong)
      invalid(t, fmt::format("workload \"{}\": the {} distribution of \"{}\" has {} ({}, {})", w.name,
                             to_string(d.kind), ts.name, wrong, p0, p1));
  }
  for (const auto& [field, text] : {std::pair{"flops", &t.flops}, std::pair{"bytes", &t.bytes}})
    if (!text->empty() && eval_on(t, w, vars, field, *text) < 0)
      invalid(t, fmt::format("workload \"{}\": {} \"{}\" is negative", w.name, field, *text));
}

// A solution's parameter declaration, checked against every workload: a
// bad declaration or a default that breaks a constraint is the task file's
// error, reported when it loads rather than when the tuner first runs.
void check_solution(const TaskSpec& t, const Solution& s, const std::string& what) {
  // A task's solutions are read, not recorded: a plan off the schema is an error now.
  if (!s.launch_plan.readable()) invalid(t, fmt::format("{}: {}", what, s.launch_plan.problem()));
  if (s.params.empty()) return;
  core::ParamSpace space;
  try {
    space = core::ParamSpace(s.params);
    for (const auto& w : t.workloads) space.resolve(s.params, w.name, util::Vars(w.dims.begin(), w.dims.end()));
  } catch (const Error& e) {
    invalid(t, fmt::format("{}: {}", what, e.what()));
  }
  for (const auto& p : space.params())
    if (std::find(t.dims.begin(), t.dims.end(), p.name) != t.dims.end() || t.find_tensor(p.name))
      invalid(t, fmt::format("{}: parameter \"{}\" has the name of a dimension or tensor", what, p.name));
}

}  // namespace

namespace {

// The calling convention of Python candidates (docs/python-candidates.md):
// a function, or a class the evaluator builds (KernelBench's ModelNew).
void check_python_convention(const TaskSpec& t) {
  const Json& p = t.python;
  auto bad = [&](const std::string& why) { invalid(t, "\"python\": " + why); };
  if (!p.is_object()) bad("must be an object naming the entry point (\"function\" or \"class\")");
  const Json* fn = p.find("function");
  const Json* cls = p.find("class");
  if ((fn == nullptr) == (cls == nullptr)) bad("names exactly one of \"function\" and \"class\"");
  for (const char* key : {"function", "class", "module", "signature", "adapter", "init_inputs", "parameters"})
    if (const Json* v = p.find(key); v && !v->is_string()) bad(fmt::format("\"{}\" must be a string", key));
  for (const char* key : {"dps", "cast_outputs"})
    if (const Json* v = p.find(key); v && !v->is_bool()) bad(fmt::format("\"{}\" must be true or false", key));
  if (const Json* m = p.find("modules"); m && !m->is_object()) bad("\"modules\" must map module names to sources");
  int inputs = 0;
  for (const auto& ts : t.tensors) inputs += ts.is_output ? 0 : 1;
  if (const Json* n = p.find("inputs"); n && (!n->is_number() || n->as_int() < 0 || n->as_int() > inputs))
    bad(fmt::format("\"inputs\" must count forward()'s inputs among the task's {}", inputs));
  if (const Json* m = p.find("parameters"); m && m->is_string() && m->as_string() != "seeded" && m->as_string() != "loaded")
    bad("\"parameters\" is \"seeded\" (built after the seed) or \"loaded\" (the task's inputs copied in)");
  if (cls && (p.contains("adapter") || p.contains("dps")))
    bad("a class entry point takes no \"adapter\" or \"dps\"");
}

}  // namespace

namespace {

// Parts of TaskSpec::validate, each naming the first problem it finds.
void check_tensors(const TaskSpec& spec, const std::set<std::string>& dim_set) {
  std::set<std::string> names;
  bool has_output = false;
  for (const auto& t : spec.tensors) {
    if (t.name.empty()) invalid(spec, "a tensor has an empty name");
    if (!names.insert(t.name).second) invalid(spec, fmt::format("tensor \"{}\" is declared twice", t.name));
    if (dim_set.count(t.name)) invalid(spec, fmt::format("tensor \"{}\" has the name of a dimension", t.name));
    has_output = has_output || t.is_output;
    if (t.scalar) {
      if (t.is_output) invalid(spec, fmt::format("output \"{}\" cannot be a scalar (\"shape\": null)", t.name));
      if (t.dtype == DType::f16 || t.dtype == DType::bf16 || t.dtype == DType::f8e4m3 || t.dtype == DType::f8e5m2)
        invalid(spec, fmt::format("scalar \"{}\" must be f32, f64, an integer type or bool, not {}", t.name,
                                   to_string(t.dtype)));
      if (t.dist.structured())
        invalid(spec, fmt::format("scalar \"{}\" cannot use the \"{}\" distribution", t.name, to_string(t.dist.kind)));
    }
    if (!t.is_output && t.dist.structured() && dtype_is_float(t.dtype))
      invalid(spec, fmt::format("tensor \"{}\": the \"{}\" distribution needs an integer dtype, not {}", t.name,
                                 to_string(t.dist.kind), to_string(t.dtype)));
    for (const auto& s : t.shape) check_expr(spec, fmt::format("tensor \"{}\" shape", t.name), s, dim_set);
    if (!t.is_output) {
      check_expr(spec, fmt::format("tensor \"{}\" distribution", t.name), t.dist.p0, dim_set);
      check_expr(spec, fmt::format("tensor \"{}\" distribution", t.name), t.dist.p1, dim_set);
    }
  }
  if (!has_output) invalid(spec, "no tensor has role \"output\"");
}

void check_workloads(const TaskSpec& spec, const std::set<std::string>& dim_set) {
  if (spec.workloads.empty()) invalid(spec, "no workloads");
  std::set<std::string> wnames;
  for (const auto& w : spec.workloads) {
    if (!wnames.insert(w.name).second) invalid(spec, fmt::format("workload \"{}\" is declared twice", w.name));
    for (const auto& d : spec.dims)
      if (!w.dims.count(d)) invalid(spec, fmt::format("workload \"{}\" does not set dimension \"{}\"", w.name, d));
    for (const auto& [k, v] : w.dims) {
      if (!dim_set.count(k)) invalid(spec, fmt::format("workload \"{}\" sets unknown dimension \"{}\"", w.name, k));
      if (v <= 0) invalid(spec, fmt::format("workload \"{}\": dimension \"{}\" must be positive, is {}", w.name, k, v));
    }
    for (const auto& [k, d] : w.dist_overrides) {
      const TensorSpec* t = spec.find_tensor(k);
      if (!t) invalid(spec, fmt::format("workload \"{}\" overrides the distribution of unknown tensor \"{}\"", w.name, k));
      if (t->is_output) invalid(spec, fmt::format("workload \"{}\" overrides the distribution of output \"{}\"", w.name, k));
      check_expr(spec, fmt::format("workload \"{}\" distribution of \"{}\"", w.name, k), d.p0, dim_set);
      check_expr(spec, fmt::format("workload \"{}\" distribution of \"{}\"", w.name, k), d.p1, dim_set);
      if (d.structured() && (t->scalar || dtype_is_float(t->dtype)))
        invalid(spec, fmt::format("workload \"{}\": \"{}\" cannot use the \"{}\" distribution (it needs an "
                                   "integer tensor)", w.name, k, to_string(d.kind)));
    }
    for (const auto& [k, d] : w.data) {
      const TensorSpec* t = spec.find_tensor(k);
      if (!t) invalid(spec, fmt::format("workload \"{}\" gives data for unknown tensor \"{}\"", w.name, k));
      if (t->is_output) invalid(spec, fmt::format("workload \"{}\" gives data for output \"{}\"", w.name, k));
      if (t->scalar)
        invalid(spec, fmt::format("workload \"{}\" gives data for scalar \"{}\"; set a scalar with a constant "
                                   "distribution, e.g. \"dist\": {{\"{}\": {{\"kind\": \"constant\", \"value\": ...}}}}",
                                   w.name, k, k));
      if (d.from_file() && d.key.empty())
        invalid(spec, fmt::format("workload \"{}\": data of \"{}\" names a file but no \"key\"", w.name, k));
    }
  }
}

void check_references(const TaskSpec& spec) {
  for (auto lang : spec.languages) {
    // A Python candidate is checked against the reference of the backend it
    // runs on: the CUDA one on the GPU, the C++ one on the CPU.
    const bool found = lang == Language::python   ? spec.references.count(Language::cuda) || spec.references.count(Language::cpp)
                       : lang == Language::triton ? spec.references.count(Language::cuda) > 0
                                                  : spec.references.count(lang) > 0;
    if (!found && spec.oracle.is_null())
      invalid(spec, fmt::format("no reference solution for language \"{}\"{}", to_string(lang),
                                 language_is_python(lang) ? " (Python candidates are checked against the cuda "
                                                            "reference on the GPU, the cpp one on the CPU)"
                                                          : ""));
  }
  for (const auto& [lang, ref] : spec.references)
    if (language_is_python(lang))
      invalid(spec, fmt::format("a reference in {} is not supported: references are cuda or cpp solutions",
                                 to_string(lang)));
  if (!spec.python.is_null()) check_python_convention(spec);
  for (const auto& [lang, ref] : spec.references)
    if (ref.language != lang)
      invalid(spec, fmt::format("the reference for \"{}\" is written in \"{}\"", to_string(lang),
                                 to_string(ref.language)));
  for (const auto& [lang, ref] : spec.references)
    check_solution(spec, ref, fmt::format("the {} reference", to_string(lang)));
  for (const auto& [lang, b] : spec.baselines) {
    if (b.language != lang)
      invalid(spec, fmt::format("the baseline for \"{}\" is written in \"{}\"", to_string(lang), to_string(b.language)));
    check_solution(spec, b, fmt::format("the {} baseline", to_string(lang)));
  }
}

void check_baselines_and_seeds(const TaskSpec& spec) {
  if (spec.score == ScoreMode::vs_baseline && spec.baselines.empty() && spec.baseline_latencies.is_null())
    invalid(spec, "\"score\": \"vs_baseline\" needs a baseline solution (\"baselines\") or baseline latencies "
                   "(\"baseline_latencies\")");
  if (!spec.baseline_latencies.is_null()) {
    if (!spec.baseline_latencies.is_object()) invalid(spec, "\"baseline_latencies\" must map hardware names to objects");
    for (const auto& [hw, per] : spec.baseline_latencies.as_object()) {
      if (!per.is_object()) invalid(spec, fmt::format("baseline_latencies[\"{}\"] must map workloads to ms", hw));
      for (const auto& [w, ms] : per.as_object())
        if (!ms.is_number() || !(ms.as_number() > 0) || !spec.find_workload(w))
          invalid(spec, fmt::format("baseline_latencies[\"{}\"][\"{}\"] must be a positive latency of a workload "
                                     "of the task", hw, w));
    }
  }
  for (std::size_t i = 0; i < spec.starting_points.size(); ++i) {
    const Solution& sp = spec.starting_points[i];
    check_solution(spec, sp, sp.name.empty() ? fmt::format("starting point {}", i + 1)
                                                     : fmt::format("starting point \"{}\"", sp.name));
  }
  std::set<std::string> weakened_names;
  for (std::size_t i = 0; i < spec.weakened_references.size(); ++i) {
    const Solution& s = spec.weakened_references[i];
    const std::string what = fmt::format("weakened reference \"{}\"", s.name);
    if (s.name.empty()) invalid(spec, fmt::format("weakened_references[{}] has no \"name\"", i));
    if (!weakened_names.insert(s.name).second) invalid(spec, what + " is declared twice");
    if (std::find(spec.languages.begin(), spec.languages.end(), s.language) == spec.languages.end())
      invalid(spec, fmt::format("{} is written in {}, which the task does not list in \"languages\"", what,
                                 to_string(s.language)));
    check_solution(spec, s, what);
  }
}

}  // namespace

void TaskSpec::validate() const {
  if (name.empty()) throw Error(Status::invalid_argument, "task: \"name\" is empty");
  if (languages.empty()) invalid(*this, "no languages (expected \"cuda\" and/or \"cpp\")");
  std::set<std::string> dim_set(dims.begin(), dims.end());
  if (dim_set.size() != dims.size()) invalid(*this, "dimension names repeat");
  if (tensors.empty()) invalid(*this, "no tensors");
  check_tensors(*this, dim_set);
  check_workloads(*this, dim_set);
  if (benchmark_workloads().empty()) invalid(*this, "no workload has \"benchmark\": true");
  std::set<std::string> feedback;
  for (const auto& f : feedback_workloads) {
    if (!find_workload(f)) invalid(*this, fmt::format("feedback workload \"{}\" is not a workload of the task", f));
    if (!feedback.insert(f).second) invalid(*this, fmt::format("feedback workload \"{}\" is listed twice", f));
  }
  if (!flops.empty()) check_expr(*this, "flops", flops, dim_set);
  if (!bytes.empty()) check_expr(*this, "bytes", bytes, dim_set);
  for (const auto& w : workloads) check_workload_values(*this, w);
  if (!oracle.is_null()) {
    const Json* argv = oracle.is_object() ? oracle.find("argv") : nullptr;
    bool ok = argv && argv->is_array() && argv->size() > 0;
    for (std::size_t i = 0; ok && i < argv->size(); ++i) ok = (*argv)[i].is_string();
    if (!ok) invalid(*this, "\"oracle\" must be an object with \"argv\": a non-empty array of strings");
  }
  check_references(*this);
  check_baselines_and_seeds(*this);
}

Json TaskSpec::to_json() const {
  Json langs = Json::array();
  for (auto l : languages) langs.push_back(to_string(l));
  Json dims_j = Json::array();
  for (const auto& d : dims) dims_j.push_back(d);
  Json tensors_j = Json::array();
  for (const auto& t : tensors) tensors_j.push_back(t.to_json());
  Json workloads_j = Json::array();
  for (const auto& w : workloads) workloads_j.push_back(w.to_json());
  Json refs = Json::object();
  for (const auto& [l, s] : references) refs[to_string(l)] = s.to_json();
  Json prompts_j = Json::object();
  for (const auto& [l, p] : prompts) prompts_j[to_string(l)] = p;
  Json starts = Json::array();
  for (const auto& s : starting_points) starts.push_back(s.to_json());
  Json feedback = Json::array();
  for (const auto& f : feedback_workloads) feedback.push_back(f);
  Json bases = Json::object();
  for (const auto& [l, s] : baselines) bases[to_string(l)] = s.to_json();
  Json j = Json::obj({{"name", name},
                    {"description", description},
                    {"languages", langs},
                    {"dims", dims_j},
                    {"tensors", tensors_j},
                    {"workloads", workloads_j},
                    {"tolerance", tolerance.to_json()},
                    {"flops", flops},
                    {"bytes", bytes},
                    {"references", refs},
                    {"prompts", prompts_j},
                    {"starting_points", starts},
                    {"targets", targets}});
  if (!oracle.is_null()) j["oracle"] = oracle;  // absent for native tasks: their keys stay as they were
  // Written only when set, so the JSON (and the key of cached work) of a
  // task without them is what it was before they existed.
  if (!feedback_workloads.empty()) j["feedback_workloads"] = feedback;
  if (score != ScoreMode::latency) j["score"] = to_string(score);
  if (!baselines.empty()) j["baselines"] = bases;
  if (!baseline_latencies.is_null()) j["baseline_latencies"] = baseline_latencies;
  if (!baseline_origin.is_null()) j["baseline_origin"] = baseline_origin;
  if (!python.is_null()) j["python"] = python;
  if (!weakened_references.empty()) {
    Json weakened = Json::array();
    for (const auto& s : weakened_references) weakened.push_back(s.to_json());
    j["weakened_references"] = weakened;
  }
  return j;
}

TaskSpec TaskSpec::from_json(const Json& j) {
  util::FieldReader r(j, "task");
  TaskSpec t;
  t.name = r.required_string("name");
  r.set_context(fmt::format("task \"{}\"", t.name));
  t.description = j.get_string("description");
  for (const auto& l : r.required_array("languages")) {
    auto lang = l.is_string() ? language_from_string(l.as_string()) : std::nullopt;
    if (!lang) invalid(t, "\"languages\" entries must be \"cuda\", \"cpp\", \"triton\" or \"python\"");
    t.languages.push_back(*lang);
  }
  for (const auto& d : r.required_array("dims")) {
    if (!d.is_string()) invalid(t, "\"dims\" entries must be strings");
    t.dims.push_back(d.as_string());
  }
  for (const auto& tj : r.required_array("tensors")) t.tensors.push_back(TensorSpec::from_json(tj));
  for (const auto& wj : r.required_array("workloads")) t.workloads.push_back(WorkloadSpec::from_json(wj));
  if (const Json* tol = j.find("tolerance")) t.tolerance = Tolerance::from_json(*tol);
  t.flops = j.get_string("flops");
  t.bytes = j.get_string("bytes");
  if (const Json* refs = j.find("references"); refs && refs->is_object()) {
    for (const auto& [k, v] : refs->as_object()) {
      auto lang = language_from_string(k);
      if (!lang) invalid(t, fmt::format("\"references\" has unknown language \"{}\"", k));
      t.references[*lang] = Solution::from_json(v);
    }
  }
  if (const Json* ps = j.find("prompts"); ps && ps->is_object()) {
    for (const auto& [k, v] : ps->as_object()) {
      auto lang = language_from_string(k);
      if (!lang || !v.is_string()) invalid(t, fmt::format("\"prompts\" entry \"{}\" is not a language and text", k));
      t.prompts[*lang] = v.as_string();
    }
  }
  if (const Json* ss = j.find("starting_points"); ss && ss->is_array())
    for (const auto& s : ss->as_array()) t.starting_points.push_back(Solution::from_json(s));
  if (const Json* tg = j.find("targets")) t.targets = *tg;
  if (const Json* fw = j.find("feedback_workloads"); fw && !fw->is_null()) {
    if (!fw->is_array()) invalid(t, "\"feedback_workloads\" must be an array of workload names");
    for (const auto& f : fw->as_array()) {
      if (!f.is_string()) invalid(t, "\"feedback_workloads\" entries must be workload names");
      t.feedback_workloads.push_back(f.as_string());
    }
  }
  if (const Json* sc = j.find("score"); sc && !sc->is_null()) {
    auto m = sc->is_string() ? score_mode_from_string(sc->as_string()) : std::nullopt;
    if (!m) invalid(t, fmt::format("\"score\" must be \"latency\" or \"vs_baseline\", found {}", sc->dump()));
    t.score = *m;
  }
  if (const Json* bs = j.find("baselines"); bs && !bs->is_null()) {
    if (!bs->is_object()) invalid(t, "\"baselines\" must map languages to solutions");
    for (const auto& [k, v] : bs->as_object()) {
      auto lang = language_from_string(k);
      if (!lang) invalid(t, fmt::format("\"baselines\" has unknown language \"{}\"", k));
      t.baselines[*lang] = Solution::from_json(v);
    }
  }
  if (const Json* bl = j.find("baseline_latencies"); bl && !bl->is_null()) {
    if (!bl->is_object()) invalid(t, "\"baseline_latencies\" must map hardware names to {workload: ms} objects");
    t.baseline_latencies = *bl;
  }
  if (const Json* bo = j.find("baseline_origin")) t.baseline_origin = *bo;
  if (const Json* o = j.find("oracle")) t.oracle = *o;
  if (const Json* py = j.find("python")) t.python = *py;
  if (const Json* wr = j.find("weakened_references"); wr && !wr->is_null()) {
    if (!wr->is_array()) invalid(t, "\"weakened_references\" must be an array of solutions");
    for (const auto& s : wr->as_array()) t.weakened_references.push_back(Solution::from_json(s));
  }
  r.allow({"name", "description", "languages", "dims", "tensors", "workloads", "tolerance", "flops",
           "bytes", "references", "prompts", "starting_points", "targets", "feedback_workloads", "score",
           "baselines", "baseline_latencies", "baseline_origin", "oracle", "weakened_references", "python"});
  return t;
}

namespace {

// The specification of a task without a prompt of its own for a Python
// language: what the data says (tensors in argument order, workloads,
// tolerance), for the documented run(...) convention.
std::string python_specification(const TaskSpec& s, Language lang) {
  std::string out = fmt::format("Write {} for task {}: {}\n\n", lang == Language::triton ? "Triton kernels" : "PyTorch code",
                                s.name, s.description.empty() ? "(no description)" : s.description);
  out += "Tensors, in the entry point's argument order (inputs, then outputs):\n\n| name | role | dtype | shape |\n|---|---|---|---|\n";
  for (const auto& t : s.tensors) {
    std::string shape;
    for (const auto& d : t.shape) shape += (shape.empty() ? "" : ", ") + d;
    out += fmt::format("| {} | {} | {} | {} |\n", t.name, t.is_output ? "output" : t.scalar ? "scalar input" : "input",
                       to_string(t.dtype), t.scalar ? "(a Python number)" : "[" + shape + "]");
  }
  out += "\nWorkloads (dimension values):\n";
  for (const auto& w : s.workloads) {
    std::string dims;
    for (const auto& [k, v] : w.dims) dims += fmt::format("{}{}={}", dims.empty() ? "" : ", ", k, v);
    out += fmt::format("- {} ({}): {}\n", w.name, w.benchmark ? "timed" : "correctness", dims);
  }
  // "(1 of elements must match)" read as garbled to a real model.
  out += fmt::format("\nCorrectness: every output element within atol {} and rtol {} of the reference ({}).\n",
                     s.tolerance.atol, s.tolerance.rtol,
                     s.tolerance.min_matched_ratio >= 1
                         ? std::string("every element must match")
                         : fmt::format("at least {:g}% of the elements must match", 100 * s.tolerance.min_matched_ratio));
  for (Language ref : {Language::cpp, Language::cuda})
    if (auto it = s.prompts.find(ref); it != s.prompts.end()) {
      out += fmt::format("\nThe task's own description, written for {} kernels (its answer format does not apply "
                         "to you):\n\n{}\n",
                         to_string(ref), it->second);
      break;
    }
  return out;
}

}  // namespace

std::string Task::prompt(Language lang) const {
  const auto& s = spec();
  auto it = s.prompts.find(lang);
  if (it != s.prompts.end()) return it->second;
  if (language_is_python(lang) &&
      std::find(s.languages.begin(), s.languages.end(), lang) != s.languages.end())
    return python_specification(s, lang);
  throw Error(Status::not_found,
              fmt::format("task \"{}\" has no prompt for language \"{}\"", s.name, to_string(lang)));
}

Solution parse_solution_text(std::string_view text, const TaskSpec& spec) {
  // Solution JSON first: an object with "sources".
  std::size_t first = text.find_first_not_of(" \t\r\n");
  std::string json_problem;  // why text that looks like solution JSON is not one
  if (first != std::string_view::npos && text[first] == '{') {
    std::string err;
    if (auto j = Json::try_parse(text, &err); j && j->is_object() && j->contains("sources")) {
      if (j->contains("spec") && !j->contains("language")) return core::import_flashinfer_solution(*j, spec);
      Solution s = Solution::from_json(*j);
      if (s.task.empty()) s.task = spec.name;
      return s;
    } else {
      json_problem = j ? "it has no \"sources\"" : "it is not valid JSON: " + err;
    }
  }
  std::string first_error;
  const auto accepts = [&](Language l) {
    return std::find(spec.languages.begin(), spec.languages.end(), l) != spec.languages.end();
  };
  for (Language lang : spec.languages) {
    try {
      Solution s = core::parse_candidate(text, lang);
      s.task = spec.name;
      // Python code is triton when it uses Triton, where the task takes both.
      if (language_is_python(lang) && accepts(Language::triton) && accepts(Language::python)) {
        bool triton = false;
        for (const auto& f : s.sources)
          triton = triton || f.content.find("import triton") != std::string::npos ||
                   f.content.find("from triton") != std::string::npos;
        s.language = triton ? Language::triton : Language::python;
        s.finalize();
      }
      return s;
    } catch (const Error& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (first_error.empty()) throw Error(Status::parse, "the task declares no language");
  // A truncated solution JSON would otherwise be reported as an answer
  // without code blocks, which says nothing about the actual damage.
  if (!json_problem.empty())
    throw Error(Status::parse, fmt::format("this looks like solution JSON, but {}", json_problem));
  throw Error(Status::parse, first_error);
}

Solution load_solution_file(const std::filesystem::path& path, const TaskSpec& spec) {
  // The path is the caller's choice and followed; what is read beside it (a
  // folder's solution.json, the source files a solution.json names) is not:
  // it may be a run folder from someone else, with links to private files.
  std::error_code ec;
  const bool is_folder = std::filesystem::is_directory(path, ec);
  if (is_folder && !std::filesystem::exists(std::filesystem::symlink_status(path / "solution.json", ec)) &&
      RunStore::exists(path)) {
    // A run folder: its best solution.
    auto best = RunStore::open_read_only(path).best();
    if (!best) throw Error(Status::not_found, fmt::format("{} is a run folder without a passing solution yet", path.string()));
    if (std::find(spec.languages.begin(), spec.languages.end(), best->solution.language) == spec.languages.end())
      throw Error(Status::invalid_argument, fmt::format("{}: its best solution is {}, which this task does not take here",
                                                        path.string(), to_string(best->solution.language)));
    return best->solution;
  }
  const std::filesystem::path dir = is_folder ? path : path.parent_path().empty() ? "." : path.parent_path();
  const std::filesystem::path shown = is_folder ? path / "solution.json" : path;
  std::string text = is_folder ? util::Folder(dir).read("solution.json", util::kMaxSolutionFileBytes)
                               : util::read_file(path, util::kMaxSolutionFileBytes);
  try {
    // A run folder's solution.json names its source files instead of repeating them.
    if (auto j = Json::try_parse(text); j && core::has_source_file_refs(*j))
      text = core::inline_source_files(*j, util::Folder(dir), "", util::kMaxSolutionFileBytes).dump();
    return parse_solution_text(text, spec);
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", shown.string(), e.what()));
  }
}

SpecTask::SpecTask(TaskSpec spec) : spec_(std::move(spec)) { spec_.validate(); }

KS_NAMESPACE_END
