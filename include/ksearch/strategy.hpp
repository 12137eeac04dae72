// Search configuration, progress reports, and the built-in strategies by
// name. The interfaces a custom strategy implements and the context it runs
// in (SearchStrategy, SearchContext) are in ksearch/sys/search_strategy.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ksearch/evaluator.hpp"
#include "ksearch/export.h"
#include "ksearch/llm.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"
#include "ksearch/vocabulary.hpp"
#include "ksearch/world_model.hpp"

KS_NAMESPACE_BEGIN

// An evaluation recorded by another run, offered instead of a new
// measurement (docs/world-model.md, "Warm start"). Where it came from is
// kept beside it; run_search decides once, when the run starts, whether it
// is adopted (the same task and device, a passing result of that very
// kernel), and the decision stays in the manifest for resume and replay.
struct KS_API RecordedEvaluation {
  EvalResult eval;               // as recorded
  std::string source;            // where it was read: "RUN/attempts/0003-5ba86dee" or "RUN/best.json"
  std::string task_fingerprint;  // the recording run's task, as its manifest names it ("" when unknown)
  DeviceInfo device;             // the device its manifest names (empty when unknown)
  bool adopted = false;          // set by run_search: used instead of measuring again
  std::string why;               // the decision in words, for the warm_start event

  Json to_json() const;
  // Throws ks::Error(invalid_argument) naming the field that is wrong.
  static RecordedEvaluation from_json(const Json& j);
};

// A kernel attached in an imported world model, with its code (where it
// was found) and the evaluation its run recorded.
struct KS_API ImportedSolution {
  Solution solution;                        // its id is this library's content id
  std::string original_id;                  // the id the imported tree used (K-Search's hash); "" when the same
  std::optional<RecordedEvaluation> recorded;  // a libksearch run's record; none from K-Search
};

// --continue-from-world-model: another run's tree, normalised and with
// the ids of the kernels found remapped to this library's, and those
// kernels. Kept in the manifest, so resume and replay start from it even
// when the source is gone.
struct KS_API WorldModelImport {
  std::string source;                       // the file or run folder, absolute
  std::string format;                       // "ksearch-run", "ksearch-snapshot" or "k-search"
  Json tree;                                // loads with WorldModel::load_json
  std::vector<ImportedSolution> solutions;  // the attached kernels whose code was found
  std::vector<std::string> repairs;         // what normalising the tree changed, one sentence each

  Json to_json() const;
  // Checks what it reads (the tree loads, every solution parses): a
  // manifest is untrusted input. Throws ks::Error(invalid_argument).
  static WorldModelImport from_json(const Json& j);
};

// The world_model strategy's knobs (SearchConfig::world_model). The
// manifest and ReplayOptions::config_changes name them wm_<field>
// ("wm_stagnation_window"), as the CLI's flags do.
struct KS_API WorldModelOptions {
  int stagnation_window = 5;             // cycle ends after this many rounds without improvement
  int max_difficulty = 4;                // difficulty gate for action selection (1..5)
  int edit_retries = 3;                  // attempts per world-model edit before the deterministic fallback
  // Lenient world-model edits: an answer that breaks a rule is repaired where
  // that is safe (numbers clamped, unknown fields dropped, ops that break a
  // rule skipped), each repair recorded, instead of rejected whole (the
  // default). docs/world-model.md, "Lenient edits".
  bool lenient_edits = false;
  std::size_t max_chars = 50000;         // compact world-model budget in code-generation prompts
  // The rules of the loop (docs/world-model.md, "The loop"): 2, this
  // version's; 1, the rules before it (proposals only when the frontier
  // runs thin; a resubmitted base kernel counts as a new cycle best). A
  // manifest without the field reads as 1, so a run folder made before
  // resumes and replays as it was made.
  int loop_rules = 2;
  // With loop_rules 2: after this many closed cycles the next cycle starts
  // with a wm_propose review of the frontier, even when it is not thin
  // (K-Search's only trigger, which refine's continuation rule keeps from
  // firing); 0: only K-Search's trigger.
  int propose_every = 1;
};

// The tune strategy's knobs (SearchConfig::tune); JSON: tune_<field>.
struct KS_API TuneOptions {
  int rounds = 0;                        // tune phase after an LLM search (0 = none)
  // Configurations the tune strategy evaluates together (compiled at once,
  // measured one after another; each is a round): 0 = automatic, `parallel`
  // when above 1, else 4; 1 = one at a time. A manifest without the field
  // (a run made before batches) reads as 1. docs/tuning.md, "Batches".
  int batch = 0;
};

// The evolve strategy's knobs (SearchConfig::evolve; docs/search.md,
// "Evolve"); JSON: evolve_<field>. Islands of passing kernels, each up to
// island_size; every migration_interval generations each island sends
// copies of its best migration_size kernels to the next island (a ring); an
// elite archive of up to archive_size kernels, the best of each feature cell
// (approach, code size); prompts show the parent and up to inspirations
// other kernels; a parent is the island's best with probability
// exploit_ratio, else a random member of the island.
struct KS_API EvolveOptions {
  int islands = 3;
  int island_size = 8;
  int migration_interval = 4;
  int migration_size = 1;
  int archive_size = 12;
  int inspirations = 2;
  double exploit_ratio = 0.7;
};

// The greedy strategy's knobs (SearchConfig::greedy); JSON: greedy_<field>.
struct KS_API GreedyOptions {
  // Candidates each step asks for and evaluates together; 0: `parallel`.
  int parallel = 0;
};

// Configuration of one search run. Names follow the original's CLI flags.
struct KS_API SearchConfig {
  StrategyKind strategy = StrategyKind::world_model;
  // A host's own strategy (SearchOptions::custom_strategy): its name, which
  // the manifest's "strategy" records instead of a built-in one's; empty
  // for the built-in strategies. run_search sets it.
  std::string custom_strategy_name;
  Language language = Language::cuda;
  int max_rounds = 20;                   // a round is one evaluated candidate
  // The world_model strategy's knobs (ks_world_model_options).
  WorldModelOptions world_model;
  // The tune strategy's, and the tune phase after an LLM search (ks_tune_options).
  TuneOptions tune;
  // The evolve strategy's.
  EvolveOptions evolve;
  // The greedy strategy's.
  GreedyOptions greedy;
  // Read and written for manifests; prompts no longer show it (the world
  // model's prompts state the cycle's stagnation window instead).
  int debug_rounds_label = 5;
  int parallel = 1;                      // candidates at once (greedy); cycles at once (world_model)
  std::uint64_t seed = 0;
  double max_cost_usd = 0;               // 0 = unlimited
  double max_wall_s = 0;                 // 0 = unlimited; checked between rounds only
  // A longer answer is a failed generation, recorded without its text: a
  // model (or a hostile provider) cannot fill the disk or the next prompt.
  std::size_t max_answer_bytes = std::size_t{4} << 20;
  std::string model;                     // for the manifest: what answered the prompts
  // K-Search's --continue-from-solution (world_model): a kernel the search
  // starts from. Its recorded evaluation (below) is adopted, or it is
  // evaluated again in the run's first round; it is attached to the world
  // model's root when it passes, so the first cycle builds on it, and it is
  // the best so far from then on.
  std::optional<Solution> continue_from_solution;
  // Its evaluation as the run it came from recorded it (load_recorded_evaluation):
  // adopted instead of round 1's measurement when that run's task and device
  // are this run's (run_search decides, and records why).
  std::optional<RecordedEvaluation> continue_from_solution_eval;
  // K-Search's --continue-from-world-model (world_model): the tree the
  // search starts from instead of wm_init, with its kernels. run_search
  // fills it from SearchOptions::continue_from_world_model.
  std::optional<WorldModelImport> continue_from_world_model;
  // Without either of the above, the world-model search starts from the
  // task's first starting point in the run's language: round 1 evaluates
  // it and, when it passes, it is attached to the root. run_search turns
  // this off where it does not apply (another strategy, no starting point,
  // a budget under two rounds), so the manifest says whether it was used;
  // a manifest without the field (a run made before it existed) reads as off.
  bool start_from_starting_point = true;
  // Adopt no recorded evaluation, even one of the same task and device (a
  // folder not trusted): continue_from_solution is measured again in round
  // 1, and continue_from_world_model's kernels are known by their code only.
  bool remeasure = false;

  // custom_strategy_name when set, else to_string(strategy).
  std::string strategy_name() const;
  // Throws ks::Error(Status::invalid_argument) naming the first bad field.
  void validate() const;
  Json to_json() const;
  static SearchConfig from_json(const Json& j);
};

// One line of progress, sent after every round.
struct KS_API RoundReport {
  int round = 0;
  int max_rounds = 0;
  std::string strategy;
  std::string action;            // what this round tried (node title, "improve", "tune: BLOCK=64")
  std::string solution_id;
  EvalStatus status = EvalStatus::passed;
  std::string reason;            // why it failed, one line (EvalResult::failure_reason); "" when passed
  double latency_ms = 0;         // this candidate, 0 unless passed
  double best_latency_ms = 0;    // best so far, 0 when nothing passed yet
  double best_speedup = 0;
  double best_vs_baseline = 0;   // best so far against the task's baseline, 0 when not scored so
  bool improved = false;
  bool replayed = false;         // answered from the journal during resume
  bool recorded = false;         // its evaluation came from the recording a replay follows
  double elapsed_s = 0;
  LlmUsage llm_usage;            // totals so far
};

// Return false to stop the run after this round.
using ProgressCallback = std::function<bool(const RoundReport&)>;

// The extension interface a strategy implements: ksearch/sys/search_strategy.hpp.
class SearchStrategy;

// A built-in strategy.
KS_API std::unique_ptr<SearchStrategy> make_strategy(StrategyKind kind);
// Built-in strategies by name: "world_model", "greedy", "evolve", "tune". Throws
// ks::Error(Status::not_found) listing the known names.
KS_API std::unique_ptr<SearchStrategy> make_strategy(const std::string& name);
KS_API std::vector<std::string> strategy_names();

KS_NAMESPACE_END
