// Weak-check detection: whether a task's correctness check can tell a kernel
// that computes nothing from the reference. When almost every reference
// output is the same value (a ReLU after a large negative shift gives
// 99.997 % zeros), a kernel that writes zeros, or one that drops a term,
// passes the check, and a search rewards it. The check evaluates a few such
// candidates (zeros, ones, an input echoed, the task's weakened references)
// through the task's own evaluator and reference, correctness only, and says
// which pass where, what the reference's outputs look like, and, where it
// finds one by trying, a change of the task that makes the check strong.
// docs/evaluation.md, "Weak checks".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ksearch/evaluator.hpp"
#include "ksearch/export.h"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"

KS_NAMESPACE_BEGIN

struct KS_API WeakCheckOptions {
  // The workloads checked; empty: the task's feedback workloads (all of
  // them when it names none), which are what a search checks every round.
  std::vector<std::string> workloads;
  // Evaluate every candidate on every workload, also after one has told it
  // apart, to find workloads that check little on their own (the verdict
  // "weak_workloads"). Off, a candidate stops at the first workload that
  // fails it: all a search needs to know is whether one passes everywhere,
  // and a normal task then costs one evaluation. ksearch run turns it off,
  // ksearch tasks --check leaves it on.
  bool every_workload = true;
  // When the check is weak, try other input distributions for a fix (a
  // few evaluations more, each on one workload).
  bool suggest_fixes = true;
  int max_fix_trials = 16;
};

// One candidate the check evaluated.
struct KS_API WeakCandidate {
  std::string name;         // "zeros", "ones", "echo", or a weakened reference's name
  std::string kind;         // "trivial" or "weakened_reference"
  std::string description;  // what it computes
  std::vector<std::string> passed;  // workloads whose check it passes
  std::vector<std::string> failed;  // workloads whose check tells it apart (without
                                    // every_workload: the first only)
  std::string error;        // why it could not be evaluated (e.g. a compile error); "" when it was

  bool passes_all(const std::vector<std::string>& workloads) const;
  Json to_json() const;
  static WeakCandidate from_json(const Json& j);
};

// What the reference's outputs look like on one workload, measured by
// comparing candidates with them exactly; each figure is the smallest over
// the outputs and the checked input seeds (-1: not measured).
struct KS_API WeakOutputStats {
  std::string workload;
  double zero_fraction = -1;         // elements exactly 0 (-0 included)
  double most_common_fraction = -1;  // elements equal to the output's most common value
  double max_abs = -1;               // the largest |element| (the largest over outputs and seeds)

  Json to_json() const;
  static WeakOutputStats from_json(const Json& j);
};

// A change of the task, found by trying it, after which the check tells
// apart every candidate that passed everywhere.
struct KS_API WeakCheckFix {
  std::string workload;     // the workload it was tried on
  std::string tensor;       // the input drawn from another distribution
  std::string change;       // "centred at 0", "mirrored", "10x wider", ...
  Distribution from, to;
  WorkloadSpec extra_workload;  // the workload to add instead: `workload` with the new distribution
  WeakOutputStats stats;    // the reference's outputs on extra_workload

  Json to_json() const;
  static WeakCheckFix from_json(const Json& j);
};

struct KS_API WeakCheckReport {
  // "ok": every candidate fails on every checked workload;
  // "weak": a candidate passes on every checked workload, so a search would
  //   accept it as a correct kernel;
  // "weak_workloads": candidates pass on some workloads, and others tell
  //   them apart (those workloads alone check little);
  // "skipped": not run (`reason` says why).
  std::string status = "skipped";
  std::string reason;
  std::string task;
  Language language = Language::cpp;
  std::vector<std::string> workloads;        // the workloads checked
  int outputs = 0;                           // the task's output tensors
  std::vector<WeakCandidate> candidates;
  std::vector<WeakOutputStats> stats;        // one per workload where a candidate passed
  std::optional<WeakCheckFix> fix;
  std::vector<std::string> suggestions;      // what to change, in words (the fix first)
  int evaluations = 0;                       // evaluator calls made
  double wall_s = 0;

  bool weak() const { return status == "weak"; }
  // Whether anything passed (weak or weak_workloads).
  bool flagged() const { return status == "weak" || status == "weak_workloads"; }
  // The workloads on which some candidate passes, in checked order.
  std::vector<std::string> flagged_workloads() const;
  const WeakOutputStats* stats_for(const std::string& workload) const;

  // For people: a first line with the verdict, then one line per passing
  // candidate, per flagged workload's outputs and per suggestion, each
  // indented by two spaces. ("ok" and "skipped" are one line.)
  std::string text() const;
  Json to_json() const;  // the manifest's "weak_check" record
  static WeakCheckReport from_json(const Json& j);
};

// Runs the check for `language` through `evaluator`, whose options are
// changed for its evaluations and restored before it returns (also when it
// throws). Throws what the evaluator throws (e.g. a task whose reference
// fails); a candidate that fails to compile is reported, not thrown.
KS_API WeakCheckReport check_weak(const Task& task, Language language, Evaluator& evaluator,
                                  const WeakCheckOptions& options = {});

// The report of a check that was not run, and why.
KS_API WeakCheckReport weak_check_skipped(const Task& task, Language language, std::string reason);

KS_NAMESPACE_END
