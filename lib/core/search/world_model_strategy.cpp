// The K-Search loop: the world model proposes actions; each action gets a
// cycle of local refinement (generate, then debug or improve) until it
// stagnates; the cycle's evidence then edits the tree (refine after a pass,
// too-hard after none). See docs/strategies.md.
#include <fmt/format.h>

#include "core/response/parse.hpp"
#include "core/run_events.hpp"
#include "core/search/cycle.hpp"
#include "core/search/prompts.hpp"
#include "core/search/strategies.hpp"
#include "ksearch/error.hpp"

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
                         std::optional<PromptKind> resend, const std::optional<Solution>& last,
                         const std::optional<EvalResult>& last_eval, const std::optional<Solution>& cycle_best,
                         const std::optional<EvalResult>& cycle_best_eval, const std::optional<Solution>& base,
                         const std::optional<EvalResult>& base_eval) {
  const int window = std::max(1, ctx.config().wm_stagnation_window);
  const int round = ctx.rounds_used();
  const bool ends = tracker.stagnant();
  const bool has_base = base && base_eval && base_eval->passed() && base_eval->score > 0;
  std::string next = ends ? (cycle_best ? "wm_refine" : "wm_too_hard")
                          : to_string(resend ? *resend : tracker.has_pass() ? PromptKind::improve : PromptKind::debug);
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
    int cycle = 0;
    while (!ctx.should_stop()) {
      propose(ctx);
      auto node = wm.select_action(selection_policy(ctx));
      if (!node) {
        // An empty frontier: repair deterministically once, else the search is done.
        wm.fallback_after_propose(ctx.rounds_used());
        ctx.snapshot_world_model();
        node = wm.select_action(selection_policy(ctx));
        if (!node) {
          emit(ctx, events::SearchExhausted{"no executable open action in the world model"});
          return;
        }
      }
      run_cycle(ctx, *node, ++cycle);
    }
  }

 private:
  static SelectionPolicy selection_policy(const SearchContext& ctx) {
    SelectionPolicy p;
    p.max_difficulty = ctx.config().wm_max_difficulty;
    return p;
  }

  static WmPromptInputs base_inputs(SearchContext& ctx) {
    WmPromptInputs in;
    const Task& task = ctx.task();
    in.task_spec = task.prompt(ctx.config().language);
    in.code_format = answer_format_text(ctx.config().language, &ctx.task().spec());
    in.targets = targets_text(task.spec());
    in.round = ctx.rounds_used();
    return in;
  }

  // One world-model edit with validation feedback: the LLM gets the reasons
  // of a rejected edit and tries again; nothing invalid is ever committed.
  template <typename Apply>
  bool edit_with_retries(SearchContext& ctx, PromptKind kind, WmPromptInputs in, Apply apply) {
    int tries = std::max(1, ctx.config().wm_edit_retries);
    for (int t = 1; t <= tries; ++t) {
      LlmRequest req;
      req.kind = kind;
      req.prompt = ctx.world_model().build_prompt(kind, in);
      LlmResponse resp = ctx.llm(req);
      if (!resp.ok) {
        emit(ctx, events::WorldModelEditFailed{std::string(to_string(kind)), t, {resp.error}});
        in.validation_errors = {"The previous request failed: " + resp.error};
        continue;
      }
      EditOutcome out = apply(resp.text);
      events::WorldModelEdit edit{std::string(to_string(kind)), t, out.applied_ops, out.new_nodes, out.errors,
                                  out.report};
      if (out.ok) emit(ctx, events::WorldModelEdited{std::move(edit)});
      else emit(ctx, events::WorldModelEditRejected{std::move(edit)});
      if (out.ok) return true;
      in.validation_errors = out.errors;
    }
    return false;
  }

  void initialize(SearchContext& ctx) {
    WorldModel& wm = ctx.world_model();
    bool ok = edit_with_retries(ctx, PromptKind::wm_init, base_inputs(ctx),
                                [&](const std::string& text) { return wm.initialize(text, ctx.rounds_used()); });
    if (!ok) {
      wm.initialize_fallback(ctx.task().prompt(ctx.config().language), ctx.rounds_used());
      emit(ctx, events::WorldModelFallback{"wm_init"});
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

  void propose(SearchContext& ctx) {
    WorldModel& wm = ctx.world_model();
    if (!wm.needs_proposals()) return;
    EditRules rules;
    rules.purpose = EditRules::Purpose::propose;
    rules.round = ctx.rounds_used();
    WmPromptInputs in = base_inputs(ctx);
    in.kernel_code = last_code_;
    bool ok = edit_with_retries(ctx, PromptKind::wm_propose, in,
                                [&](const std::string& text) { return wm.apply_edits(text, rules); });
    if (!ok) {
      wm.fallback_after_propose(ctx.rounds_used());
      emit(ctx, events::WorldModelFallback{"wm_propose"});
    }
    ctx.snapshot_world_model();
  }

  void run_cycle(SearchContext& ctx, const std::string& node_id, int cycle) {
    WorldModel& wm = ctx.world_model();
    const SearchConfig& cfg = ctx.config();
    wm.set_active(node_id);
    ctx.snapshot_world_model();
    ActionInfo action = wm.action(node_id);

    std::optional<Solution> base;
    std::optional<EvalResult> base_eval;
    if (!action.parent_solution_id.empty()) {
      base = ctx.find_solution(action.parent_solution_id);
      base_eval = ctx.find_eval(action.parent_solution_id);
    }
    double base_score = base_eval && base_eval->passed() ? base_eval->score : 0;
    emit(ctx, events::CycleStarted{cycle, node_id, action.title, action.difficulty, action.score,
                                   action.parent_solution_id});

    CycleTracker tracker(cfg.wm_stagnation_window, base_score);
    std::optional<Solution> cycle_best;
    std::optional<EvalResult> cycle_best_eval;
    std::optional<Solution> last;
    std::optional<EvalResult> last_eval;
    std::string last_raw;
    int attempt = 0;
    // A request that failed (outage, timeout) is sent again as it was: there
    // is no new evidence to debug or improve on.
    std::optional<LlmRequest> resend;
    while (!ctx.should_stop()) {
      ++attempt;
      LlmRequest req;
      if (resend) {
        req = *resend;
        resend.reset();
      } else {
        CodegenInputs in;
        in.task = &ctx.task();
        in.language = cfg.language;
        in.device = ctx.device_description();
        in.world_model = wm.render_compact(cfg.wm_max_chars);
        in.attempt = attempt;
        in.debug_rounds_label = cfg.debug_rounds_label;
        in.action = action;
        if (!tracker.has_pass() && !last_eval) {
          if (base) in.base = {&*base, base_eval ? &*base_eval : nullptr, ""};
          req = build_generate_request(in);
        } else if (!tracker.has_pass()) {
          if (base) in.base = {&*base, base_eval ? &*base_eval : nullptr, ""};
          in.last = {last ? &*last : nullptr, last_eval ? &*last_eval : nullptr, last_raw};
          req = build_debug_request(in);
        } else {
          in.base = {&*cycle_best, &*cycle_best_eval, ""};
          in.last = {last ? &*last : nullptr, last_eval ? &*last_eval : nullptr, last_raw};
          req = build_improve_request(in);
        }
      }
      std::string label = fmt::format("{} [{} {}]", action.title, to_string(req.kind), attempt);
      LlmResponse resp = ctx.llm(req);
      if (!resp.ok) {
        // An outage is no evidence about the action: it uses a round but does
        // not count towards the cycle's stagnation.
        ctx.record_failed_round(label, "the LLM request failed: " + resp.error, resp.text);
        resend = req;
      } else {
        last.reset();
        last_eval.reset();
        last_raw.clear();
        Solution cand;
        std::string parse_error;
        try {
          cand = parse_candidate(resp.text, cfg.language);
        } catch (const Error& e) {
          parse_error = e.what();
        } catch (const std::exception& e) {
          // The answer is untrusted input; whatever it trips is a failed round.
          parse_error = std::string("the answer could not be read: ") + e.what();
        }
        if (!parse_error.empty()) {
          last_eval = ctx.record_failed_round(label, parse_error, resp.text);
          last_raw = resp.text;
          tracker.observe(false, 0);
        } else {
          cand.parent_id = base ? base->id : "";
          cand.name = fmt::format("r{}-{}", ctx.rounds_used() + 1, to_string(req.kind));
          EvalResult r = ctx.evaluate(cand, label);
          last = cand;
          last_eval = r;
          if (tracker.observe(r.passed(), r.score)) {
            cycle_best = cand;
            cycle_best_eval = r;
          }
        }
      }
      ctx.set_state(Json::obj({{"strategy", "world_model"}, {"cycle", cycle}, {"node_id", node_id},
                               {"action", action.title}, {"attempt", attempt},
                               {"no_improve_streak", tracker.no_improve_streak()},
                               {"no_improve_over_base_streak", tracker.no_improve_over_base_streak()},
                               {"cycle_best", cycle_best ? cycle_best->id : ""}}));
      std::optional<PromptKind> resent;
      if (resend) resent = resend->kind;
      ctx.event("decision", stagnation_decision(ctx, cycle, tracker, resent, last, last_eval, cycle_best,
                                                cycle_best_eval, base, base_eval));
      if (tracker.stagnant()) break;
    }
    // A stop inside the cycle ends the run here: the next context call throws
    // SearchStopped, so no edit is made on partial evidence.
    emit(ctx, events::CycleFinished{cycle, node_id, attempt, tracker.has_pass(), cycle_best ? cycle_best->id : ""});
    const std::string last_code = last ? kernel_text(*last) : last_raw;
    last_code_ = cycle_best ? kernel_text(*cycle_best) : last_code;
    if (cycle_best) close_cycle(ctx, node_id, action, *cycle_best, *cycle_best_eval, base, base_eval);
    else too_hard(ctx, node_id, attempt, last_eval, last_code);
  }

  // The prediction and the observation in one unit: the factor over the
  // action's base kernel (what expected_vs_baseline_factor predicts), with
  // the factor over the task's baseline, or else the reference, beside it.
  static std::string prediction_text(const ActionInfo& action, const EvalResult& best_eval,
                                     const std::optional<EvalResult>& base_eval) {
    std::string out = fmt::format(
        "expected_vs_baseline_factor (the predicted speedup over the action's base kernel): {}; confidence: 0.5; "
        "rationale: {}\n",
        action.expected_factor ? fmt::format("{:.3f}", *action.expected_factor) : "null", action.rationale);
    if (base_eval && base_eval->passed() && base_eval->latency_ms > 0 && best_eval.latency_ms > 0)
      out += fmt::format("observed: {:.3f}x over the base kernel ({:.4f} ms -> {:.4f} ms)",
                         base_eval->latency_ms / best_eval.latency_ms, base_eval->latency_ms, best_eval.latency_ms);
    else
      out += "observed: no base kernel (the action started from the task alone), so no factor over a base";
    // A task scored against a baseline (FlashInfer's) speaks in its factor.
    if (best_eval.vs_baseline > 0) out += fmt::format("; {:.3f}x over the task's baseline", best_eval.vs_baseline);
    else if (best_eval.speedup > 0) out += fmt::format("; {:.3f}x over the reference", best_eval.speedup);
    return out;
  }

  void close_cycle(SearchContext& ctx, const std::string& node_id, const ActionInfo& action, const Solution& best,
                   const EvalResult& best_eval, const std::optional<Solution>& base,
                   const std::optional<EvalResult>& base_eval) {
    WorldModel& wm = ctx.world_model();
    SolutionRef ref;
    ref.solution_id = best.id;
    ref.solution_name = best.name;
    ref.parent_solution_id = base ? base->id : "";
    ref.round = ctx.rounds_used();
    ref.eval = compact_eval(best_eval);
    wm.attach_solution(node_id, ref);
    ctx.snapshot_world_model();
    {
      WmPromptInputs in = base_inputs(ctx);
      in.chosen_node_id = node_id;
      in.prediction = prediction_text(action, best_eval, base_eval);
      in.eval_summary = eval_feedback_text(best_eval, PromptBudgets{});
      in.kernel_code = kernel_text(best);
      EditRules rules;
      rules.purpose = EditRules::Purpose::refine;
      rules.round = ctx.rounds_used();
      rules.solved_node_id = node_id;
      bool ok = edit_with_retries(ctx, PromptKind::wm_refine, in,
                                  [&](const std::string& text) { return wm.apply_edits(text, rules); });
      if (!ok) {
        wm.fallback_after_refine(node_id, ctx.rounds_used());
        emit(ctx, events::WorldModelFallback{"wm_refine"});
      }
    }
    wm.set_computed_signals(Json::obj({{"round_index", ctx.rounds_used()},
                                       {"trace", Json::obj({{"status", to_string(best_eval.status)},
                                                            {"latency_ms", best_eval.latency_ms},
                                                            {"reference_latency_ms", best_eval.reference_latency_ms},
                                                            {"speedup_factor", best_eval.speedup}})}}));
    ctx.snapshot_world_model();
  }

  void too_hard(SearchContext& ctx, const std::string& node_id, int attempts,
                const std::optional<EvalResult>& last_eval, const std::string& last_code) {
    WorldModel& wm = ctx.world_model();
    {
      WmPromptInputs in = base_inputs(ctx);
      in.chosen_node_id = node_id;
      in.debug_rounds = attempts;
      in.kernel_code = last_code;  // what failed, as the original shows it
      in.eval_summary = last_eval ? eval_feedback_text(*last_eval, PromptBudgets{}) : "(no evaluation)";
      EditRules rules;
      rules.purpose = EditRules::Purpose::too_hard;
      rules.round = ctx.rounds_used();
      rules.failed_node_id = node_id;
      bool ok = edit_with_retries(ctx, PromptKind::wm_too_hard, in,
                                  [&](const std::string& text) { return wm.apply_edits(text, rules); });
      if (!ok) {
        wm.fallback_after_too_hard(node_id, ctx.rounds_used());
        emit(ctx, events::WorldModelFallback{"wm_too_hard"});
      }
    }
    ctx.snapshot_world_model();
  }

  // The last cycle's kernel (its best, else its last attempt), for the next
  // propose prompt. Rebuilt on resume, which replays the run's answers.
  std::string last_code_;
};

}  // namespace

std::unique_ptr<SearchStrategy> make_world_model_strategy() { return std::make_unique<WorldModelStrategy>(); }

}  // namespace ks::core
