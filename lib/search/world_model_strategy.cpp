// The K-Search loop: the world model proposes actions; each action gets a
// cycle of local refinement (generate, then debug or improve) until it
// stagnates; the cycle's evidence then edits the tree (refine after a pass,
// too-hard after none). See docs/search.md and docs/world-model.md.
//
// With `parallel` N, N cycles run at once on the top N frontier actions, one
// per slot. Each step sends one request per busy slot in one batch (code and
// tree edits alike), evaluates the step's candidates together (spread over
// the GPUs) and takes the answers in slot order, so a parallel run is as
// deterministic under replay and resume as a sequential one. With N = 1 a
// step is one call, and the steps make the sequential loop's calls in its
// order.
#include <fmt/format.h>

#include <algorithm>

#include "core/response/parse.hpp"
#include "core/run_events.hpp"
#include "search/code_answer.hpp"
#include "search/cycle.hpp"
#include "search/prompts.hpp"
#include "search/settings_rows.hpp"
#include "search/strategies.hpp"
#include "search/world_model/prompts.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::core {
namespace {

using events::emit;

Json compact_eval(const EvalResult& r) {
  Json j = Json::obj({{"status", to_string(r.status)},
                      {"latency_ms", r.latency_ms},
                      {"speedup", r.speedup},
                      {"score", r.score}});
  // K-Search's name for the mean of baseline / candidate latency.
  if (r.vs_baseline > 0) j["mean_vs_baseline_factor"] = r.vs_baseline;
  return j;
}

Json compact_eval_with_id(const Solution& s, const EvalResult& r) {
  Json j = compact_eval(r);
  j["solution_id"] = s.id;
  return j;
}

std::string short_id(const std::string& id) { return id.empty() ? "(none)" : id.substr(0, 8); }

// "5ba86dee (0.1780 ms)", or its status when it did not pass.
std::string kernel_brief(const std::optional<Solution>& s, const std::optional<EvalResult>& r) {
  if (!s || !r) return "none";
  if (!r->passed()) return fmt::format("{} ({})", short_id(s->id), to_string(r->status));
  return fmt::format("{} ({:.4f} ms)", short_id(s->id), r->latency_ms);
}

// The stagnation check after one attempt of a cycle, as a "decision" event:
// what it chose, the next request, and the timings it compared. A replay
// compares these with the recording's to say which decision changed.
Json stagnation_decision(const SearchContext& ctx, int cycle, const CycleTracker& tracker,
                         std::optional<PromptKind> resend, PromptKind next_code, const std::optional<Solution>& last,
                         const std::optional<EvalResult>& last_eval, const std::optional<Solution>& cycle_best,
                         const std::optional<EvalResult>& cycle_best_eval, const std::optional<Solution>& base,
                         const std::optional<EvalResult>& base_eval) {
  const int window = std::max(1, ctx.config().world_model.stagnation_window);
  const int round = ctx.rounds_used();
  const bool ends = tracker.stagnant();
  const bool has_base = base && base_eval && base_eval->passed() && base_eval->score > 0;
  std::string next = ends ? (cycle_best ? "wm_refine" : "wm_too_hard") : to_string(next_code);
  std::string this_attempt = resend ? "the LLM request failed (no evidence)"
                             : last  ? "this attempt " + kernel_brief(last, last_eval)
                                     : "this attempt held no usable candidate";
  std::string best = kernel_brief(cycle_best, cycle_best_eval);
  std::string base_text = has_base ? kernel_brief(base, base_eval) : "";
  std::string why;
  if (ends && tracker.no_improve_streak() >= window) {
    why = fmt::format("cycle {} ends after round {} (next: {}): {} attempt(s) in a row without beating the "
                      "cycle's best {}, reaching the window of {}; {}",
                      cycle, round, next, tracker.no_improve_streak(), best, window, this_attempt);
  } else if (ends) {
    why = fmt::format("cycle {} ends after round {} (next: {}): for {} attempt(s) the cycle's best {} has not beaten "
                      "the base kernel {}, reaching the window of {}; {}",
                      cycle, round, next, tracker.no_improve_over_base_streak(), best, base_text, window,
                      this_attempt);
  } else {
    why = fmt::format("cycle {} goes on after round {} (next: {}): {}; the cycle's best is {}; {} of {} attempts "
                      "without beating it",
                      cycle, round, next, this_attempt, best, tracker.no_improve_streak(), window);
    if (has_base && tracker.has_pass())
      why += fmt::format("; against the base kernel {}: {} of {}", base_text, tracker.no_improve_over_base_streak(),
                         window);
  }
  Json j = Json::obj({{"decision", ends ? "cycle_ends" : "cycle_goes_on"},
                      {"next", next},
                      {"cycle", cycle},
                      {"round", round},
                      {"window", window},
                      {"no_improve_streak", tracker.no_improve_streak()},
                      {"no_improve_over_base_streak", tracker.no_improve_over_base_streak()},
                      {"why", why}});
  if (last && last_eval) j["attempt"] = compact_eval_with_id(*last, *last_eval);
  if (cycle_best && cycle_best_eval) j["cycle_best"] = compact_eval_with_id(*cycle_best, *cycle_best_eval);
  if (has_base) j["base"] = compact_eval_with_id(*base, *base_eval);
  return j;
}

// The prediction and the observation in one unit: the factor over the
// action's base kernel (what expected_vs_baseline_factor predicts), with
// the factor over the task's baseline, or else the reference, beside it.
std::string prediction_text(const ActionInfo& action, const EvalResult& best_eval,
                            const std::optional<EvalResult>& base_eval) {
  std::string out = fmt::format(
      "expected_vs_baseline_factor (the predicted speedup over the action's base kernel): {}; confidence: 0.5; "
      "rationale: {}\n",
      action.expected_factor ? fmt::format("{:.3f}", *action.expected_factor) : "null", action.rationale);
  if (base_eval && base_eval->passed() && base_eval->latency_ms > 0 && best_eval.latency_ms > 0) {
    const double factor = base_eval->latency_ms / best_eval.latency_ms;
    out += fmt::format("observed: {:.3f}x over the base kernel ({:.4f} ms -> {:.4f} ms)", factor,
                       base_eval->latency_ms, best_eval.latency_ms);
    // A cycle whose best is slower than its base found only regressions.
    if (factor < 0.995)
      out += fmt::format(": a regression, the cycle's best kernel is {:.2f}x slower than its base", 1 / factor);
  } else
    out += "observed: no base kernel (the action started from the task alone), so no factor over a base";
  // A task scored against a baseline (FlashInfer's) speaks in its factor.
  if (best_eval.vs_baseline > 0) out += fmt::format("; {:.3f}x over the task's baseline", best_eval.vs_baseline);
  else if (best_eval.speedup > 0) out += fmt::format("; {:.3f}x over the reference", best_eval.speedup);
  return out;
}

// One world-model edit spread over LLM calls, a try per call: a rejected
// answer's reasons go into the next try, and nothing invalid is committed.
struct EditJob {
  PromptKind kind = PromptKind::wm_init;
  WmPromptInputs in;
  EditRules rules;  // propose, refine and too hard (wm_init has none)
  int tries = 0;
  int max_tries = 1;
  bool wrote_code = false;  // the last answer held source code, not the JSON asked for
};

enum class EditProgress { committed, retry, spent };

// One action's local refinement: its base kernel, the stagnation tracker,
// the best and the last attempt.
struct Cycle {
  int number = 0;
  std::string node_id;
  ActionInfo action;
  std::optional<Solution> base;
  std::optional<EvalResult> base_eval;
  CycleTracker tracker{1, 0};
  std::optional<Solution> best;
  std::optional<EvalResult> best_eval;
  std::optional<Solution> last;
  std::optional<EvalResult> last_eval;
  std::string last_raw;  // an answer that did not parse
  std::vector<AttemptBrief> attempts;  // every attempt, for the prompts
  int attempt = 0;
  // A request that failed (outage, timeout) is sent again as it was: there
  // is no new evidence to debug or improve on.
  std::optional<LlmRequest> resend;
  PromptKind pending_kind = PromptKind::generate;  // the request whose candidate awaits evaluation
};

// Where one of the `parallel` lanes of work stands.
struct Slot {
  enum class Phase {
    idle,        // between cycles: proposes when the tree asks for it, then selects
    proposing,   // its wm_propose edit is in flight
    selecting,   // takes the best free action once no proposal is in flight
    attempting,  // its cycle generates and evaluates kernels
    closing,     // its cycle ended; its wm_refine or wm_too_hard edit is in flight
  };
  Phase phase = Phase::idle;
  std::optional<Cycle> cycle;  // attempting, closing
  std::optional<EditJob> edit;  // proposing, closing
  // The tree version at which nothing was free for this slot (it waits for
  // a change), and the count of closed cycles when it last proposed because
  // of that (once per closed cycle: a model whose proposals are never free
  // must not be asked again and again while the other cycles run).
  std::optional<std::uint64_t> waited_at;
  std::optional<int> proposed_after;
};

class WorldModelStrategy final : public SearchStrategy {
 public:
  std::string name() const override { return "world_model"; }

  void run(SearchContext& ctx) override {
    WorldModel& wm = ctx.world_model();
    if (!wm.initialized()) {
      start(ctx);
    } else if (ctx.config().continue_from_solution || ctx.config().continue_from_world_model) {
      // (A resumed run starts empty and replays its journal: only a host's own
      // world model can arrive initialized.)
      throw Error(Status::invalid_argument,
                  fmt::format("{} needs a world model that starts empty; this one is initialized already",
                              ctx.config().continue_from_world_model ? "continue_from_world_model"
                                                                     : "continue_from_solution"));
    }
    slots_.assign(static_cast<std::size_t>(std::max(1, ctx.config().parallel)), Slot{});
    for (;;) {
      if (ctx.should_stop()) {
        // Between cycles the run ends here. Inside one, the context's next
        // call would throw: no edit is made on partial evidence.
        for (const Slot& s : slots_)
          if (s.phase != Slot::Phase::idle) throw SearchStopped(ctx.stop_reason().value_or(StopReason::cancelled));
        return;
      }
      if (!start_work(ctx)) {
        emit(ctx, events::SearchExhausted{"no executable open action in the world model"});
        return;
      }
      step(ctx);
    }
  }

  // The stop cut cycles short (the round budget, a cancel): each one's best
  // kernel is attached to its action, as the original's last cycle ends
  // with an attach, so the final tree holds the kernels the run found. No
  // refine edit: the LLM takes no call after the stop, and a resume with a
  // larger budget goes on with the cycle instead (docs/world-model.md, "The loop").
  void finish(SearchContext& ctx) override {
    WorldModel& wm = ctx.world_model();
    if (!wm.initialized()) return;
    for (Slot& s : slots_) {
      if (s.phase != Slot::Phase::attempting || !s.cycle || !s.cycle->best) continue;
      const Cycle& c = *s.cycle;
      if (c.base && c.best->id == c.base->id) continue;  // its parent's kernel: nothing new to attach
      if (!wm.action(c.node_id).solution_id.empty()) continue;  // the stop came after the cycle's own attach
      wm.attach_solution(c.node_id, solution_ref(ctx, c));
      const std::string why =
          fmt::format("the run stopped ({}) in cycle {} after {} attempt(s); the cycle's best kernel {} is attached "
                      "to its action without a refine edit (no LLM call after the stop)",
                      to_string(ctx.stop_reason().value_or(StopReason::strategy_done)), c.number, c.attempt,
                      kernel_brief(c.best, c.best_eval));
      ctx.event("world_model_attached_at_stop", Json::obj({{"cycle", c.number},
                                                           {"node_id", c.node_id},
                                                           {"solution_id", c.best->id},
                                                           {"attempts", c.attempt},
                                                           {"why", why}}));
    }
    ctx.snapshot_world_model();
  }

 private:
  SelectionPolicy selection_policy(const SearchContext& ctx) const {
    SelectionPolicy p;
    p.max_difficulty = ctx.config().world_model.max_difficulty;
    p.in_progress = in_progress(nullptr);
    return p;
  }

  // The actions the slots' cycles work on (but `except`'s).
  std::vector<std::string> in_progress(const Slot* except) const {
    std::vector<std::string> ids;
    for (const Slot& s : slots_)
      if (&s != except && s.cycle) ids.push_back(s.cycle->node_id);
    return ids;
  }

  bool proposal_in_flight() const {
    return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.phase == Slot::Phase::proposing; });
  }

  WmPromptInputs base_inputs(SearchContext& ctx) const {
    WmPromptInputs in;
    const Task& task = ctx.task();
    const SearchConfig& cfg = ctx.config();
    in.task_spec = task.prompt(cfg.language);
    in.code_format = answer_format_text(cfg.language, &ctx.task().spec());
    in.targets = targets_text(task.spec());
    in.round = ctx.rounds_used();
    in.device = ctx.device_description();
    in.backend = device_backend(in.device, cfg.language);
    in.language = language_text(cfg.language);
    in.workloads = workloads_text(task.spec(), wm::PromptBudgets::workloads);
    in.search_state = fmt::format(
        "{} of {} rounds used, {} left (a round is one kernel evaluated; world-model calls are not rounds). {} "
        "cycle(s) finished. A cycle ends when {} attempts in a row bring no new best kernel of the cycle, or its best "
        "stays slower than its base kernel that long; when the rounds run out, the last cycle's best kernel is "
        "attached to its action as it stands.",
        ctx.rounds_used(), cfg.max_rounds, ctx.rounds_left(), cycles_closed_, std::max(1, cfg.world_model.stagnation_window));
    in.lenient_edits = cfg.world_model.lenient_edits;
    return in;
  }

  // "cuda" or "host", for the prompts' wording: from the device's
  // description's first line (a GPU is "..., a GPU"), else the language.
  static std::string device_backend(const std::string& device, Language lang) {
    const std::string first = device.substr(0, device.find('\n'));
    if (first.find(", a GPU") != std::string::npos) return "cuda";
    if (first.find(", the host CPU") != std::string::npos) return "host";
    return lang == Language::cuda || lang == Language::triton ? "cuda" : lang == Language::cpp ? "host" : "";
  }

  static SolutionRef solution_ref(const SearchContext& ctx, const Cycle& c) {
    SolutionRef ref;
    ref.solution_id = c.best->id;
    ref.solution_name = c.best->name;
    ref.parent_solution_id = c.base ? c.base->id : "";
    ref.round = ctx.rounds_used();
    ref.eval = compact_eval(*c.best_eval);
    return ref;
  }

  // Why the deterministic fallback stood in, and what likely caused it.
  static std::string fallback_why(const EditJob& job, std::string_view instead) {
    const auto& errors = job.in.validation_errors;
    bool unreadable = job.wrote_code;
    for (const auto& e : errors)
      unreadable = unreadable || e.find("could not be read as JSON") != std::string::npos ||
                   e.find("has no \"ops\" array") != std::string::npos ||
                   e.find("decision_tree is required") != std::string::npos ||
                   e.find("The previous request failed") != std::string::npos;
    std::string last = errors.empty() ? "none given" : errors.front();
    if (last.size() > 300) last = last.substr(0, 297) + "...";
    const std::string cause =
        unreadable ? "the model does not answer world-model prompts with the JSON object they ask for (it writes code "
                     "or prose): use a model that follows JSON instructions, or --strategy greedy, which asks only "
                     "for code"
                   : "the model's answers break the tree's rules (each rejection's reasons are in events.jsonl, "
                     "world_model_edit_rejected); --wm-lenient-edits repairs what can be repaired safely";
    return fmt::format("all {} answers to {} were rejected (the last: {}); {}. Likely cause: {}", job.tries,
                       to_string(job.kind), last, instead, cause);
  }

  static EditJob new_edit(const SearchContext& ctx, PromptKind kind, WmPromptInputs in) {
    EditJob job;
    job.kind = kind;
    job.in = std::move(in);
    job.rules.round = ctx.rounds_used();
    job.rules.lenient = ctx.config().world_model.lenient_edits;
    job.max_tries = std::max(1, ctx.config().world_model.edit_retries);
    return job;
  }

  static LlmRequest edit_request(SearchContext& ctx, const EditJob& job) {
    LlmRequest req;
    req.kind = job.kind;
    req.system = world_model_system_message(job.kind, ctx.config().language, job.in.backend);
    req.prompt = ctx.world_model().build_prompt(job.kind, job.in);
    return req;
  }

  // Takes one try's answer: the events say what became of it.
  template <typename Apply>
  static EditProgress take_edit_answer(SearchContext& ctx, EditJob& job, const LlmResponse& resp, Apply apply) {
    const int t = ++job.tries;
    if (!resp.ok) {
      emit(ctx, events::WorldModelEditFailed{std::string(to_string(job.kind)), t, {resp.error}});
      job.in.validation_errors = {"The previous request failed: " + resp.error};
    } else {
      // A model that writes a kernel whatever it is asked (its answer may even
      // hold a JSON plan block) is the likely cause of a fallback.
      job.wrote_code = false;
      for (const char* fence : {"```cpp", "```cuda", "```c++", "```python", "__global__", "#include"})
        job.wrote_code = job.wrote_code || resp.text.find(fence) != std::string::npos;
      EditOutcome out = apply(resp.text);
      events::WorldModelEdit edit{std::string(to_string(job.kind)), t, out.applied_ops, out.new_nodes, out.errors,
                                  out.report, out.repairs};
      if (out.ok) {
        emit(ctx, events::WorldModelEdited{std::move(edit)});
        return EditProgress::committed;
      }
      emit(ctx, events::WorldModelEditRejected{std::move(edit)});
      job.in.validation_errors = out.errors;
    }
    return t >= job.max_tries ? EditProgress::spent : EditProgress::retry;
  }

  void initialize(SearchContext& ctx) {
    WorldModel& wm = ctx.world_model();
    EditJob job = new_edit(ctx, PromptKind::wm_init, base_inputs(ctx));
    EditProgress p;
    do {
      LlmResponse resp = ctx.llm(edit_request(ctx, job));
      // An init answer gets the repairs of a lenient edit too (job.rules: round and mode).
      p = take_edit_answer(ctx, job, resp, [&](const std::string& text) { return wm.initialize_with(text, job.rules); });
    } while (p == EditProgress::retry);
    if (p == EditProgress::spent) {
      wm.initialize_fallback(ctx.task().prompt(ctx.config().language), ctx.rounds_used());
      emit(ctx, events::WorldModelFallback{"wm_init", fallback_why(job, "the search goes on from a generic starting tree")});
    }
    ctx.snapshot_world_model();
  }

  // How the search starts, before its first cycle: the tree from wm_init
  // or imported (K-Search's --continue-from-world-model), then the kernel
  // at its root: the given one (--continue-from-solution) or, when nothing
  // was given, the task's starting point in the run's language.
  void start(SearchContext& ctx) {
    const SearchConfig& cfg = ctx.config();
    if (cfg.continue_from_world_model) import_world_model(ctx, *cfg.continue_from_world_model);
    else initialize(ctx);
    if (cfg.continue_from_solution) {
      warm_start(ctx, *cfg.continue_from_solution, cfg.continue_from_solution_eval, "continue_from_solution");
    } else if (!cfg.continue_from_world_model && cfg.start_from_starting_point) {
      for (const auto& sp : ctx.task().spec().starting_points) {
        if (sp.language != cfg.language) continue;
        warm_start(ctx, sp, std::nullopt, "starting_point");
        break;
      }
    }
  }

  // Another run's tree instead of wm_init. Its kernels become known to the
  // run: those whose recorded evaluation was adopted (the same task and
  // device) as uncounted attempts with that result, which may be the best
  // so far; the others as code only (a base for the actions under them,
  // their numbers left as the tree's evidence).
  void import_world_model(SearchContext& ctx, const WorldModelImport& in) {
    WorldModel& wm = ctx.world_model();
    wm.load_json(in.tree);
    Json solutions = Json::array();
    for (const auto& imp : in.solutions) {
      Solution s = imp.solution;
      Json j = Json::obj({{"solution_id", s.id}});
      if (!imp.original_id.empty()) j["original_id"] = imp.original_id;
      if (imp.recorded && imp.recorded->adopted) {
        ctx.adopt_recorded(s, imp.recorded->eval, imp.recorded->source);
        j["evaluation"] = "recorded";
      } else {
        ctx.add_solution(s);
        j["evaluation"] = "none (code only)";
      }
      if (imp.recorded) j["why"] = imp.recorded->why;
      solutions.push_back(std::move(j));
    }
    std::size_t nodes = 0;
    if (const Json* dt = in.tree.find("decision_tree"))
      if (const Json* n = dt->find("nodes"); n && n->is_array()) nodes = n->size();
    Json repairs = Json::array();
    for (const auto& r : in.repairs) repairs.push_back(r);
    ctx.event("world_model_imported", Json::obj({{"source", in.source},
                                                 {"format", in.format},
                                                 {"nodes", static_cast<std::int64_t>(nodes)},
                                                 {"solutions", std::move(solutions)},
                                                 {"repairs", std::move(repairs)}}));
    ctx.snapshot_world_model();
  }

  // K-Search's --continue-from-solution, and the task's starting point: the
  // kernel is evaluated again (a round of its own), or its recorded
  // evaluation is adopted (not a round) where run_search found it was
  // measured for this task on this device. When it passes and the root
  // holds no kernel yet (an imported tree's may), it is attached to the
  // root, so that the actions under the root take it as their base kernel
  // (the generate prompt shows it). One that fails is reported and the
  // search starts from the task.
  void warm_start(SearchContext& ctx, const Solution& seed, const std::optional<RecordedEvaluation>& recorded,
                  const std::string& source) {
    const std::string prefix = source == "starting_point" ? "starting point: " : "continue-from: ";
    Solution s = seed;
    s.parent_id.clear();
    s.task.clear();  // another run's task name; the evaluation fills in this one's
    const std::string name = seed.name.empty() ? seed.id : seed.name;
    s.name = name.rfind(prefix, 0) == 0 ? name : prefix + name;
    s.finalize();  // the id is the content's: the same kernel keeps its id
    const bool adopted = recorded && recorded->adopted;
    const EvalResult r = adopted ? ctx.adopt_recorded(s, recorded->eval, recorded->source)
                                 : ctx.evaluate(s, source == "starting_point" ? "start from the task's starting point"
                                                                              : "continue from the given solution");
    WorldModel& wm = ctx.world_model();
    const Json tree = wm.to_json();
    const Json* dt = tree.find("decision_tree");
    const std::string root = dt ? dt->get_string("root_id", "root") : "root";
    const std::string held = wm.action(root).solution_id;
    const bool attach = r.passed() && held.empty();
    const std::string what = source == "starting_point" ? "the task's starting point" : "the given solution";
    Json ev = Json::obj({{"solution_id", s.id},
                         {"source", source},
                         {"evaluation", adopted ? "recorded" : "measured"}});
    if (recorded) ev["evaluation_why"] = recorded->why;
    ev["status"] = to_string(r.status);
    ev["attached_to_root"] = attach;
    ev["why"] = attach        ? what + " passed: the actions under the root build on it"
                : r.passed()  ? fmt::format("{} passed, but the imported tree's root already holds the kernel {}: it "
                                            "stays there",
                                            what, held)
                              : what + " did not pass: the search starts from the task";
    ctx.event("warm_start", std::move(ev));
    if (!r.passed()) return;
    last_code_ = kernel_text(s);
    if (!attach) return;
    SolutionRef ref;
    ref.solution_id = s.id;
    ref.solution_name = s.name;
    ref.round = ctx.rounds_used();
    ref.eval = compact_eval(r);
    wm.attach_solution(root, ref);
    ctx.snapshot_world_model();
  }

  // Gives every free slot its next piece of work, without LLM calls: a
  // proposal when the tree asks for one (one at a time: two proposals from
  // the same tree would propose the same actions), else the best action no
  // other cycle works on. False when no slot has anything left to do.
  bool start_work(SearchContext& ctx) {
    WorldModel& wm = ctx.world_model();
    for (Slot& s : slots_) {
      if (s.phase == Slot::Phase::idle) {
        if ((wm.needs_proposals() || review_due(ctx)) && !proposal_in_flight()) {
          start_propose(ctx, s);
          continue;
        }
        s.phase = Slot::Phase::selecting;
      }
      if (s.phase == Slot::Phase::selecting && !proposal_in_flight()) select_for(ctx, s);
    }
    return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) {
      return s.phase == Slot::Phase::proposing || s.phase == Slot::Phase::attempting ||
             s.phase == Slot::Phase::closing;
    });
  }

  // K-Search proposes when the frontier runs thin, which refine's
  // continuation rule keeps from happening: with loop rules 2 the frontier
  // is also reviewed after every `propose_every` closed cycles.
  bool review_due(const SearchContext& ctx) const {
    const WorldModelOptions& w = ctx.config().world_model;
    return w.loop_rules >= 2 && w.propose_every > 0 && cycles_closed_ - reviewed_at_ >= w.propose_every;
  }

  void start_propose(SearchContext& ctx, Slot& s) {
    reviewed_at_ = cycles_closed_;
    EditJob job = new_edit(ctx, PromptKind::wm_propose, base_inputs(ctx));
    job.in.kernel_code = last_code_;
    job.rules.purpose = EditRules::Purpose::propose;
    s.edit = std::move(job);
    s.phase = Slot::Phase::proposing;
  }

  void select_for(SearchContext& ctx, Slot& s) {
    WorldModel& wm = ctx.world_model();
    if (s.waited_at == wm.version()) return;  // nothing changed since it found nothing
    auto node = wm.select_action(selection_policy(ctx));
    if (!node) {
      // An empty frontier: repair deterministically once.
      wm.fallback_after_propose(ctx.rounds_used());
      ctx.snapshot_world_model();
      node = wm.select_action(selection_policy(ctx));
    }
    if (node) {
      s.waited_at.reset();
      start_cycle(ctx, s, *node);
      return;
    }
    // Nothing is free while other cycles hold the frontier: ask for more
    // actions once until another cycle closes, else wait for their edits.
    // (Alone, the slot has nothing to wait for: the search is done.)
    if (!in_progress(&s).empty() && s.proposed_after != cycles_closed_) {
      s.proposed_after = cycles_closed_;
      start_propose(ctx, s);
      return;
    }
    s.waited_at = wm.version();
  }

  void start_cycle(SearchContext& ctx, Slot& s, const std::string& node_id) {
    WorldModel& wm = ctx.world_model();
    const SearchConfig& cfg = ctx.config();
    wm.set_active(node_id);
    ctx.snapshot_world_model();
    Cycle c;
    c.number = ++cycles_;
    c.node_id = node_id;
    c.action = wm.action(node_id);
    if (!c.action.parent_solution_id.empty()) {
      c.base = ctx.find_solution(c.action.parent_solution_id);
      c.base_eval = ctx.find_eval(c.action.parent_solution_id);
    }
    const double base_score = c.base_eval && c.base_eval->passed() ? c.base_eval->score : 0;
    emit(ctx, events::CycleStarted{c.number, node_id, c.action.title, c.action.difficulty, c.action.score,
                                   c.action.parent_solution_id});
    c.tracker = CycleTracker(cfg.world_model.stagnation_window, base_score);
    s.cycle = std::move(c);
    s.phase = Slot::Phase::attempting;
  }

  // One step: a request from every busy slot, sent together; the answers
  // taken in slot order; the candidates evaluated together.
  void step(SearchContext& ctx) {
    WorldModel& wm = ctx.world_model();
    std::vector<std::size_t> who;
    std::vector<LlmRequest> reqs;
    int rounds = ctx.rounds_left();
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (s.phase == Slot::Phase::proposing) {
        reqs.push_back(edit_request(ctx, *s.edit));
      } else if (s.phase == Slot::Phase::closing) {
        wm.set_active(s.cycle->node_id);  // the tree path the edit prompt shows
        reqs.push_back(edit_request(ctx, *s.edit));
      } else if (s.phase == Slot::Phase::attempting && rounds > 0) {
        --rounds;  // the budget may end inside this step
        wm.set_active(s.cycle->node_id);  // the compact view's active path
        reqs.push_back(code_request(ctx, *s.cycle));
      } else {
        continue;
      }
      who.push_back(i);
    }
    if (reqs.empty()) return;
    std::vector<LlmResponse> resps;
    if (reqs.size() == 1) resps.push_back(ctx.llm(reqs.front()));
    else resps = ctx.llm_batch(reqs);

    std::vector<std::size_t> evaluating;
    std::vector<Solution> cands;
    std::vector<std::string> labels;
    for (std::size_t k = 0; k < who.size(); ++k) {
      Slot& s = slots_[who[k]];
      if (s.phase == Slot::Phase::proposing) {
        take_proposal(ctx, s, resps[k]);
      } else if (s.phase == Slot::Phase::closing) {
        take_closing_edit(ctx, s, resps[k]);
      } else if (auto cand = take_code_answer(ctx, *s.cycle, reqs[k], resps[k])) {
        evaluating.push_back(who[k]);
        cands.push_back(std::move(*cand));
        labels.push_back(attempt_label(*s.cycle, reqs[k]));
      } else {
        after_attempt(ctx, s);
      }
    }
    if (cands.empty()) return;
    // Named by the round each will take: the step's failed answers took theirs.
    for (std::size_t j = 0; j < cands.size(); ++j) {
      const Cycle& c = *slots_[evaluating[j]].cycle;
      cands[j].name = fmt::format("r{}-{}", ctx.rounds_used() + static_cast<int>(j) + 1,
                                  to_string(c.pending_kind));
    }
    const int first_round = ctx.rounds_used() + 1;
    std::vector<EvalResult> results;
    if (cands.size() == 1) results.push_back(ctx.evaluate(cands.front(), labels.front()));
    else results = ctx.evaluate_batch(cands, labels);
    // Every cycle takes its result before any decision is written: a stop at
    // a decision leaves each cycle's best known to finish().
    for (std::size_t j = 0; j < cands.size(); ++j)
      take_result(ctx, *slots_[evaluating[j]].cycle, cands[j], results[j], first_round + static_cast<int>(j));
    for (std::size_t j = 0; j < cands.size(); ++j) after_attempt(ctx, slots_[evaluating[j]]);
  }

  // An evaluated attempt: the last, maybe the cycle's best, one more line
  // in the cycle's list. With loop rules 2 the base kernel sent back
  // unchanged is no new kernel: it never becomes the cycle's best (the
  // action would get its parent's kernel), and counts as an attempt
  // without improvement.
  static void take_result(const SearchContext& ctx, Cycle& c, const Solution& cand, const EvalResult& r, int round) {
    c.last = cand;
    c.last_eval = r;
    const bool base_again = ctx.config().world_model.loop_rules >= 2 && c.base && cand.id == c.base->id;
    if (base_again) c.tracker.observe(false, 0);
    else if (c.tracker.observe(r.passed(), r.score)) {
      c.best = cand;
      c.best_eval = r;
    }
    AttemptBrief a;
    a.attempt = c.attempt;
    a.round = round;
    a.kind = c.pending_kind;
    a.solution_id = cand.id;
    a.status = r.status;
    a.latency_ms = r.passed() ? r.latency_ms : 0;
    if (r.passed() && r.latency_lo_ms > 0) a.noise = 0.5 * (r.latency_hi_ms - r.latency_lo_ms) / r.latency_ms;
    a.note = r.passed() ? cand.description.substr(0, cand.description.find('\n')) : r.failure_reason();
    c.attempts.push_back(std::move(a));
  }

  static std::string attempt_label(const Cycle& c, const LlmRequest& req) {
    return fmt::format("{} [{} {}]", c.action.title, to_string(req.kind), c.attempt);
  }

  // The kind of the cycle's next code request: generate first, debug while
  // nothing passed, improve after (and, with loop rules 2, after the base
  // kernel came back unchanged: it passes, but implements nothing).
  static PromptKind next_code_kind(const SearchContext& ctx, const Cycle& c) {
    if (!c.tracker.has_pass() && !c.last_eval) return PromptKind::generate;
    if (c.tracker.has_pass()) return PromptKind::improve;
    const bool base_again = ctx.config().world_model.loop_rules >= 2 && c.base && c.last && c.last->id == c.base->id;
    return base_again ? PromptKind::improve : PromptKind::debug;
  }

  // Where the search stands, for the code prompts.
  static std::string cycle_state(const SearchContext& ctx, const Cycle& c) {
    const SearchConfig& cfg = ctx.config();
    const int window = std::max(1, cfg.world_model.stagnation_window);
    std::string out = fmt::format(
        "Round {} of {}: this answer is one round; {} round(s) are left after it.\nCycle {} works on the chosen "
        "action (node {}); this is its attempt {}. The cycle ends when {} attempts in a row bring no new best kernel "
        "of the cycle ({} so far)",
        ctx.rounds_used() + 1, cfg.max_rounds, std::max(0, ctx.rounds_left() - 1), c.number, c.node_id, c.attempt,
        window, c.tracker.no_improve_streak());
    if (c.base_eval && c.base_eval->passed())
      out += fmt::format(", or when its best stays slower than the base kernel for {} attempts ({} so far)", window,
                         c.tracker.no_improve_over_base_streak());
    return out + "; the world model is then updated with what the cycle found. If the rounds run out first, the "
                 "cycle's best kernel is attached to its action as it stands.";
  }

  // The cycle's next code request: generate first (from the base kernel when
  // the action has one), debug while nothing passed, improve after: from the
  // last attempt, with the base kernel and the cycle's best beside it.
  LlmRequest code_request(SearchContext& ctx, Cycle& c) const {
    const SearchConfig& cfg = ctx.config();
    ++c.attempt;
    if (c.resend) {
      LlmRequest req = std::move(*c.resend);
      c.resend.reset();
      return req;
    }
    CodegenInputs in;
    in.task = &ctx.task();
    in.language = cfg.language;
    in.device = ctx.device_description();
    in.world_model = ctx.world_model().render_compact(cfg.world_model.max_chars);
    in.attempt = c.attempt;
    in.debug_rounds_label = cfg.debug_rounds_label;
    in.action = c.action;
    in.search_state = cycle_state(ctx, c);
    in.attempts = c.attempts;
    if (c.base) {
      in.base = {&*c.base, c.base_eval ? &*c.base_eval : nullptr, ""};
      in.base_heading = fmt::format("Base kernel (node {}'s kernel: the action starts from it)", c.action.parent_id);
    }
    const PromptKind kind = next_code_kind(ctx, c);
    if (kind == PromptKind::generate) return build_generate_request(in);
    in.last = {c.last ? &*c.last : nullptr, c.last_eval ? &*c.last_eval : nullptr, c.last_raw};
    if (kind == PromptKind::debug) return build_debug_request(in);
    if (c.best) in.cycle_best = {&*c.best, &*c.best_eval, ""};
    // With loop rules 1 the improve prompt is the one those runs recorded:
    // the cycle's best in the base's place.
    if (cfg.world_model.loop_rules < 2 && c.best) {
      in.base = {&*c.best, &*c.best_eval, ""};
      in.base_heading = "Best passing kernel of this cycle (the reference to beat)";
      in.base_name = "this cycle's best kernel";
      in.cycle_best = {};
    }
    return build_improve_request(in);
  }

  // A code answer: the candidate to evaluate, or nothing when the request
  // failed or the answer did not parse (each a failed round).
  static std::optional<Solution> take_code_answer(SearchContext& ctx, Cycle& c, const LlmRequest& req,
                                                  const LlmResponse& resp) {
    CodeAnswer answer = read_code_answer(ctx, attempt_label(c, req), resp);
    if (answer.outage()) {
      // An outage is no evidence about the action: it uses a round but does
      // not count towards the cycle's stagnation.
      c.resend = req;
      return std::nullopt;
    }
    const std::string parent = continued_from(c, req.kind);
    c.last.reset();
    c.last_eval.reset();
    c.last_raw.clear();
    if (!answer.candidate) {
      c.last_eval = std::move(answer.unreadable);
      c.last_raw = resp.text;
      c.tracker.observe(false, 0);
      AttemptBrief a;
      a.attempt = c.attempt;
      a.round = ctx.rounds_used();
      a.kind = req.kind;
      a.status = c.last_eval->status;
      a.note = c.last_eval->failure_reason();
      c.attempts.push_back(std::move(a));
      return std::nullopt;
    }
    Solution cand = std::move(*answer.candidate);
    cand.finalize();
    cand.parent_id = parent;
    // The same code sent back is not its own parent: it keeps the parent it had.
    if (cand.id == parent) {
      auto known = ctx.find_solution(parent);
      cand.parent_id = known ? known->parent_id : "";
    }
    c.pending_kind = req.kind;
    return cand;
  }

  // The kernel an answer continued from: for debug and improve the last
  // attempt (when it had code), else the cycle's best, else the base kernel.
  static std::string continued_from(const Cycle& c, PromptKind kind) {
    if (kind != PromptKind::generate && c.last && !c.last->sources.empty()) return c.last->id;
    if (kind == PromptKind::improve && c.best) return c.best->id;
    return c.base ? c.base->id : "";
  }

  // After each attempt: the state, the stagnation decision, and the cycle's
  // end when it stagnated.
  void after_attempt(SearchContext& ctx, Slot& s) {
    Cycle& c = *s.cycle;
    const bool parallel = slots_.size() > 1;
    const std::size_t slot = static_cast<std::size_t>(&s - slots_.data());
    Json state = Json::obj({{"strategy", "world_model"}, {"cycle", c.number}, {"node_id", c.node_id},
                            {"action", c.action.title}, {"attempt", c.attempt},
                            {"no_improve_streak", c.tracker.no_improve_streak()},
                            {"no_improve_over_base_streak", c.tracker.no_improve_over_base_streak()},
                            {"cycle_best", c.best ? c.best->id : ""}});
    if (parallel) state["slot"] = static_cast<std::int64_t>(slot);
    ctx.set_state(std::move(state));
    std::optional<PromptKind> resent;
    if (c.resend) resent = c.resend->kind;
    Json decision = stagnation_decision(ctx, c.number, c.tracker, resent, resent ? *resent : next_code_kind(ctx, c),
                                        c.last, c.last_eval, c.best, c.best_eval, c.base, c.base_eval);
    if (parallel) decision["slot"] = static_cast<std::int64_t>(slot);
    ctx.event("decision", std::move(decision));
    if (c.tracker.stagnant()) finish_cycle(ctx, s);
  }

  // The cycle's end: its best kernel is attached and the tree refined, or
  // (nothing passed) the action is too hard. The edit is the slot's next request.
  void finish_cycle(SearchContext& ctx, Slot& s) {
    WorldModel& wm = ctx.world_model();
    Cycle& c = *s.cycle;
    emit(ctx, events::CycleFinished{c.number, c.node_id, c.attempt, c.tracker.has_pass(), c.best ? c.best->id : ""});
    const std::string last_code = c.last ? kernel_text(*c.last) : c.last_raw;
    last_code_ = c.best ? kernel_text(*c.best) : last_code;
    // Every attempt, compactly: a losing one is evidence too.
    const std::string attempts =
        attempts_text(c.attempts, c.base ? c.base->id : "",
                      c.base_eval && c.base_eval->passed() ? c.base_eval->latency_ms : 0, wm::PromptBudgets::attempts);
    if (c.best) {
      wm.attach_solution(c.node_id, solution_ref(ctx, c));
      ctx.snapshot_world_model();
      EditJob job = new_edit(ctx, PromptKind::wm_refine, base_inputs(ctx));
      job.in.attempts = attempts;
      job.in.chosen_node_id = c.node_id;
      job.in.prediction = prediction_text(c.action, *c.best_eval, c.base_eval);
      job.in.eval_summary = eval_feedback_text(*c.best_eval, PromptBudgets{});
      job.in.kernel_code = kernel_text(*c.best);
      job.rules.purpose = EditRules::Purpose::refine;
      job.rules.solved_node_id = c.node_id;
      s.edit = std::move(job);
    } else {
      EditJob job = new_edit(ctx, PromptKind::wm_too_hard, base_inputs(ctx));
      job.in.attempts = attempts;
      job.in.chosen_node_id = c.node_id;
      job.in.debug_rounds = c.attempt;
      job.in.kernel_code = last_code;  // what failed, as the original shows it
      job.in.eval_summary = c.last_eval ? eval_feedback_text(*c.last_eval, PromptBudgets{}) : "(no evaluation)";
      job.rules.purpose = EditRules::Purpose::too_hard;
      job.rules.failed_node_id = c.node_id;
      s.edit = std::move(job);
    }
    s.phase = Slot::Phase::closing;
  }

  void take_proposal(SearchContext& ctx, Slot& s, const LlmResponse& resp) {
    WorldModel& wm = ctx.world_model();
    EditJob& job = *s.edit;
    job.rules.in_progress = in_progress(&s);
    EditProgress p = take_edit_answer(ctx, job, resp,
                                      [&](const std::string& text) { return wm.apply_edits(text, job.rules); });
    if (p == EditProgress::retry) return;
    if (p == EditProgress::spent) {
      wm.fallback_after_propose(ctx.rounds_used());
      emit(ctx, events::WorldModelFallback{"wm_propose", fallback_why(job, "a generic action was added")});
    }
    ctx.snapshot_world_model();
    s.edit.reset();
    s.phase = Slot::Phase::selecting;
  }

  void take_closing_edit(SearchContext& ctx, Slot& s, const LlmResponse& resp) {
    WorldModel& wm = ctx.world_model();
    EditJob& job = *s.edit;
    const Cycle& c = *s.cycle;
    job.rules.in_progress = in_progress(&s);
    EditProgress p = take_edit_answer(ctx, job, resp,
                                      [&](const std::string& text) { return wm.apply_edits(text, job.rules); });
    if (p == EditProgress::retry) return;
    if (job.kind == PromptKind::wm_refine) {
      if (p == EditProgress::spent) {
        wm.fallback_after_refine(c.node_id, ctx.rounds_used());
        emit(ctx, events::WorldModelFallback{"wm_refine",
                                             fallback_why(job, "a generic refinement step was added under the action")});
      }
      const EvalResult& best = *c.best_eval;
      wm.set_computed_signals(Json::obj({{"round_index", ctx.rounds_used()},
                                         {"trace", Json::obj({{"status", to_string(best.status)},
                                                              {"latency_ms", best.latency_ms},
                                                              {"reference_latency_ms", best.reference_latency_ms},
                                                              {"speedup_factor", best.speedup}})}}));
    } else if (p == EditProgress::spent) {
      wm.fallback_after_too_hard(c.node_id, ctx.rounds_used());
      emit(ctx, events::WorldModelFallback{"wm_too_hard", fallback_why(job, "the action's score was lowered")});
    }
    ctx.snapshot_world_model();
    ++cycles_closed_;
    s = Slot{};
  }

  std::vector<Slot> slots_;
  int cycles_ = 0;         // started
  int cycles_closed_ = 0;  // their edits applied
  int reviewed_at_ = 0;    // cycles_closed_ when the last proposal started
  // The last cycle's kernel (its best, else its last attempt), for the next
  // propose prompt. Rebuilt on resume, which replays the run's answers.
  std::string last_code_;
};

}  // namespace

std::unique_ptr<SearchStrategy> make_world_model_strategy() { return std::make_unique<WorldModelStrategy>(); }

// The world model's rows of the settings table (ksearch/search_settings.hpp).
std::vector<SettingSpec> world_model_setting_rows() {
  auto wm = [](SettingSpec s) {
    s.component = "world_model";
    return s;
  };
  return {
      field_setting([](SearchConfig& c) -> int& { return c.world_model.stagnation_window; },
                    wm({.key = "wm_stagnation_window", .min = 1,
                        .help = "End an action's cycle after N rounds without improvement.",
                        .flag = "wm-stagnation-window", .placeholder = "N", .replay = true})),
      field_setting([](SearchConfig& c) -> int& { return c.world_model.max_difficulty; },
                    wm({.key = "wm_max_difficulty", .min = 1, .max = 5,
                        .help = "Only actions up to this difficulty (1-5) are chosen while easier ones remain.",
                        .flag = "wm-max-difficulty", .placeholder = "N", .replay = true})),
      field_setting([](SearchConfig& c) -> int& { return c.world_model.edit_retries; },
                    wm({.key = "wm_edit_retries", .min = 1,
                        .help = "Attempts per world-model edit before the deterministic fallback.",
                        .flag = "wm-edit-retries", .placeholder = "N", .replay = true})),
      field_setting([](SearchConfig& c) -> bool& { return c.world_model.lenient_edits; },
                    wm({.key = "wm_lenient_edits",
                        .help = "Repair a world-model edit that breaks a rule where that is safe (numbers clamped, "
                                "unknown fields dropped, operations that break a rule skipped; each repair "
                                "recorded) instead of rejecting it and asking the model again "
                                "(docs/world-model.md).",
                        .flag = "wm-lenient-edits", .replay = true})),
      field_setting([](SearchConfig& c) -> std::size_t& { return c.world_model.max_chars; },
                    wm({.key = "wm_max_chars", .min = 0,
                        .help = "The world model's share of a code-generation prompt, in characters.",
                        .flag = "wm-max-chars", .placeholder = "N"})),
      // Absent in a manifest written before issue 43's loop: its rules, so its
      // journal replays (proposals only when the frontier runs thin).
      field_setting([](SearchConfig& c) -> int& { return c.world_model.loop_rules; },
                    wm({.key = "wm_loop_rules", .min = 1, .max = 2, .settable = false,
                        .when_absent = [](const SearchConfig&) { return Json(1); }})),
      field_setting([](SearchConfig& c) -> int& { return c.world_model.propose_every; },
                    wm({.key = "wm_propose_every", .min = 0,
                        .help = "Review the world model's frontier (a wm_propose call) at the start of the cycle "
                                "after every N finished cycles; 0: only when the frontier runs thin, as K-Search "
                                "(docs/world-model.md, \"The loop\").",
                        .flag = "wm-propose-every", .placeholder = "N", .replay = true,
                        .when_absent = [](const SearchConfig& c) {
                          return Json(c.world_model.loop_rules >= 2 ? WorldModelOptions{}.propose_every : 0);
                        }})),
  };
}

}  // namespace ks::core
