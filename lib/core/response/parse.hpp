// Turning an LLM answer into a candidate Solution, and a Solution back into
// the answer format (docs/candidate-format.md). Errors are phrased for the
// model, because the search loop feeds them back as "fix your answer" prompts.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/types.hpp"

namespace ks::core {

// One block of code found in an answer.
struct CodeBlock {
  enum class Style { fenced, tagged };
  Style style = Style::fenced;
  // fenced: the info string's first word, lower-cased ("cuda", "json", "python");
  // tagged: the tag name ("file", "launch_plan", "description").
  std::string tag;
  // fenced: the rest of the info string ("kernel.cu", "launch_plan", "params");
  // tagged: the name="..." attribute. Empty when absent.
  std::string name;
  std::string info;  // fenced: the whole info string as written; tagged: empty
  std::string content;
  // False when the answer ended inside the block (no closing fence or tag):
  // the answer was cut off, or the model forgot to close it.
  bool closed = true;
  std::size_t offset = 0;  // where the block starts in the answer
};

// Every fenced (``` or ~~~, any length >= 3) and tagged (<file name="...">,
// <launch_plan>, <call_plan>, <params>, <description>, and the original
// K-Search tags <cuda_file>, <header_file>, <cpp_file>) block, in order. A
// fence inside a tagged block (or a tag inside a fence) belongs to the outer
// block; a tagged block whose content is one fenced block is unwrapped, and
// CDATA sections are stripped.
std::vector<CodeBlock> extract_code_blocks(std::string_view answer);

// Parses a code-generation answer into a Solution of `language`: source files
// in order, the launch plan (CUDA, "kernels") or call plan (host, "calls"),
// optional tunable parameters and a description. The result is finalized
// (id set); name, task and parent are left to the caller. Throws
// ks::Error(Status::parse) with a message addressed to the model: no source
// block, a block never closed, no plan, plan JSON invalid (with the parser's
// message and the offending text), a plan for the other language, or invalid
// parameter declarations.
Solution parse_candidate(std::string_view answer, Language language);

// parse_candidate for a search round: the answer is untrusted input, so
// whatever it trips (not only a ks::Error) fails the round. Returns the
// solution, or nullopt with the reason in *why.
std::optional<Solution> read_candidate(std::string_view answer, Language language, std::string* why);

// Writes `solution` in exactly the format parse_candidate reads (fenced
// blocks, plan labelled launch_plan or call_plan, params in their own block),
// so prompts can show base kernels the way the model must answer.
// parse_candidate(format_candidate(s), s.language) gives back s's sources
// (each ending in a newline), plan, params and description.
std::string format_candidate(const Solution& solution);

}  // namespace ks::core
