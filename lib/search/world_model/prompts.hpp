// The prompts of the four world-model LLM calls (wm_init, wm_propose,
// wm_refine, wm_too_hard), with the original's section budgets.
#pragma once

#include <cstddef>
#include <string>

#include "search/world_model/tree.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::core::wm {

// Section budgets in characters. The first nine are the original's; the init
// call carries the full specification (up to 50000, as the original), and
// code is never cut except by a guard against runaway input.
struct PromptBudgets {
  static constexpr std::size_t definition = 1600;
  static constexpr std::size_t world_model = 2600;
  static constexpr std::size_t path = 800;
  // Over the original's 800 and 500: a real model lost the per-workload
  // rows of the evaluation and the end of its own action text to the cut
  // (docs/world-model.md, "What real models taught").
  static constexpr std::size_t eval = 1600;
  static constexpr std::size_t prediction = 800;
  static constexpr std::size_t status = 900;
  static constexpr std::size_t frontier = 1200;
  static constexpr std::size_t action = 1200;
  static constexpr std::size_t targets = 900;
  static constexpr std::size_t init_definition = 50000;
  static constexpr std::size_t code_format = 1600;
  static constexpr std::size_t rejection = 4000;  // the previous rejection's errors, all of them
  // Ours, beyond the original's sections: the device and language, the
  // workloads and score, where the search stands, the cycle's attempts.
  static constexpr std::size_t target = 1200;
  static constexpr std::size_t workloads = 4000;  // the table gets all but 1200 of it
  static constexpr std::size_t search_state = 700;
  static constexpr std::size_t attempts = 2400;
  static constexpr std::size_t code_guard = 200000;
};

// At most this many errors of a rejected answer go back to the model: all
// of them in practice (an answer is checked completely), so one retry can
// fix every problem.
inline constexpr std::size_t kMaxErrorsInPrompt = 40;

// Builds the prompt. `tree` is null before initialization (only wm_init is
// possible then). Throws ks::Error(invalid_argument) for a non-world-model
// kind or an unknown chosen node, ks::Error(state) for an edit prompt
// without a tree.
std::string build_prompt(const Tree* tree, PromptKind kind, const WmPromptInputs& in);

}  // namespace ks::core::wm
