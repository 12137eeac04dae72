#include "search/prompts.hpp"

#include "core/response/parse.hpp"
#include "ksearch/sys/world_model.hpp"

#include <fmt/format.h>

#include <cmath>

namespace ks::core {

namespace {

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string clip(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  static const std::string mark = "\n[... cut ...]\n";
  // Cut points move off UTF-8 continuation bytes so no character is split.
  if (max_chars <= mark.size()) {
    std::size_t end = max_chars;
    while (end > 0 && continuation_byte(text[end])) --end;
    return text.substr(0, end);
  }
  // Keep the head and the tail: compiler errors and tracebacks matter at both ends.
  std::size_t keep = max_chars - mark.size();
  std::size_t head = keep * 2 / 3;
  while (head > 0 && continuation_byte(text[head])) --head;
  std::size_t tail = text.size() - (keep - keep * 2 / 3);
  while (tail < text.size() && continuation_byte(text[tail])) ++tail;
  return text.substr(0, head) + mark + text.substr(tail);
}

std::string codegen_system_message(Language lang) {
  if (lang == Language::triton)
    return "You are an expert GPU kernel engineer who writes Triton. You write correct, fast Triton kernels "
           "(with PyTorch glue where it helps) for the target GPU and answer with one complete Python module: no "
           "placeholders, no omitted parts.";
  if (lang == Language::python)
    return "You are an expert PyTorch performance engineer. You write correct, fast PyTorch code for the target "
           "device and answer with one complete Python module: no placeholders, no omitted parts.";
  if (lang == Language::cuda)
    return "You are an expert CUDA kernel engineer. You write correct, fast kernels for the target GPU "
           "and answer with complete code in the required format: no placeholders, no omitted parts.";
  return "You are an expert performance engineer for CPU kernels in C++. You write correct, fast code "
         "for the target machine and answer with complete code in the required format: no placeholders, "
         "no omitted parts.";
}

namespace {

// The Python answer format: the original's Triton rules (the Triton
// version, the entry point, device handling, no hex float literals, code
// only) with the task's own entry point.
std::string python_answer_format(Language lang, const TaskSpec* spec) {
  const bool triton = lang == Language::triton;
  std::string entry = "run(...)", module = "main.py";
  if (spec && spec->python.is_object()) {
    entry = spec->python.get_string("signature", spec->python.get_string("function", "run") + "(...)");
    module = spec->python.get_string("module", module);
  } else if (spec) {
    std::string in, out;
    for (const auto& t : spec->tensors) {
      std::string& list = t.is_output ? out : in;
      list += (list.empty() ? "" : ", ") + t.name;
    }
    entry = fmt::format("run({}) returning ({}), or run({}, {}) writing into the given outputs", in, out, in, out);
  }
  std::string text = "## Answer format\n";
  text += fmt::format("Reply with one complete Python module in a single fenced block tagged `python`; it is "
                      "saved as {} and imported once.\n\n",
                      module);
  text += fmt::format("- Entry point: `{}`. Nothing else of the module is called.\n", entry);
  if (triton)
    text += "- Write the hot loops as Triton kernels (`@triton.jit`, `import triton`, `import triton.language as "
            "tl`); PyTorch may do the glue (allocation, reshapes, a `torch.matmul` where it wins). "
            "`@triton.autotune` is allowed: compilation and autotuning run in an untimed warm-up.\n";
  else
    text += "- Use PyTorch operations (`import torch`); no extension builds, no subprocesses.\n";
  text += "- Device handling: the inputs are already on the evaluation device (CUDA on a GPU, the CPU on the "
          "host backend); allocate outputs on the inputs' device (e.g. `torch.empty_like(x)`), never move data "
          "to another device, and do not call `torch.cuda.set_device`.\n";
  text += "- No hexadecimal float literals (`0x1.8p3` is not Python): write decimal constants such as "
          "`1.4426950408889634` for log2(e).\n";
  text += "- Code only: no tests, no `if __name__ == \"__main__\"` harness, no printing, no files, no network.\n";
  return text;
}

}  // namespace

std::string answer_format_text(Language lang, const TaskSpec* spec) {
  if (language_is_python(lang)) return python_answer_format(lang, spec);
  if (lang == Language::cuda)
    return R"TXT(## Answer format
Write the device code in a fenced block tagged `cuda` with a file name, and the launch plan in a
fenced block tagged `json launch_plan`. No host code: the evaluator launches your kernels from the plan.

```cuda kernel.cu
extern "C" __global__ void my_kernel(const float* x, float* y, int n) { ... }
```

```json launch_plan
{"kernels": [{"name": "my_kernel", "grid": ["cdiv(n_elems, 256)"], "block": [256],
              "shared_bytes": "0", "args": ["x", "y", "n_elems"]}]}
```

Launch plan rules: `kernels` run in order on one stream; `grid`/`block`/`cluster` take 1-3 integer
expressions over the task's dimension names (operators + - * / %, min, max, cdiv); `shared_bytes` is
dynamic shared memory (above 48 KB is allowed; the evaluator raises the limit); `args` follow the kernel's
parameter order: tensor names give device pointers, other strings are integer expressions (32- or 64-bit
as the parameter), `{"f32": "expr"}` passes a float. Optional `scratch`: [{"name", "dtype", "shape"}]
device buffers (uninitialised), and `variants`: [{"when": "expr", "kernels": [...], "scratch": [...]}]
for per-shape plans. Kernels must be `extern "C" __global__` or named by a template expression.
Any step may have `"when": "expr"`: it runs only where the expression is non-zero.
Vendor GEMMs: a step may be a cuBLASLt matmul instead of a kernel, between your kernels:
{"gemm": {"a": "x", "b": "w", "d": "y", "m": "M", "n": "N", "k": "K", "trans_b": true, "batch": "B",
"algo": "ALGO"}} computes, row-major, D[i] = alpha * op(A[i]) @ op(B[i]) + beta * C[i] with op(A) m x k,
op(B) k x n (trans_a: A stored k x m; trans_b: B stored n x k); optional lda/ldb/ldc/ldd (row strides),
stride_a..stride_d (batch strides, elements), alpha, beta, c, and "epilogue": relu, gelu, bias, relu_bias
or gelu_bias (with "bias": n values). a and b are f16, bf16 or f32 buffers of one dtype (scratch needs a
dtype), d the same or f32; "compute": "tf32" for f32. "algo" picks the i-th of cuBLASLt's ranked
algorithms for that problem (default 0), worth tuning. Vendor GEMMs are usually faster than hand-written
ones; write kernels for what they cannot do (fusions, layouts, reductions).
Tunable parameters (optional): a `json params` block {"space": {"BLOCK": {"values": [64, 128]}},
"constraints": ["BLOCK % 32 == 0"], "values": {"BLOCK": 128}}; each parameter is a macro in the
device code and a name in plan expressions, so the library can tune it; one only the plan reads (a
GEMM's algo, a step's when) is declared with "plan_only": true, and trying it compiles nothing.)TXT";
  return R"TXT(## Answer format
Write the C++ code in a fenced block tagged `cpp` with a file name, and the call plan in a fenced
block tagged `json launch_plan`. No main(): the evaluator calls your functions from the plan.

```cpp kernel.cpp
#include <cstdint>
void my_kernel(const float* x, float* y, int64_t n) { ... }
```

```json launch_plan
{"calls": [{"fn": "my_kernel", "args": ["x", "y", "n_elems"]}]}
```

Call plan rules: `calls` run in order; `args` follow the function's parameters: input tensor names give
`const T*`, outputs give `T*`, other strings are integer expressions over the task's dimension names
passed as int64_t. Optional `scratch` buffers and per-shape `variants` as for CUDA launch plans.
Tunable parameters (optional): a `json params` block {"space": {"BLOCK": {"values": [32, 64]}},
"values": {"BLOCK": 64}}; each parameter is a macro in the code and a name in plan expressions.)TXT";
}

std::string targets_text(const TaskSpec& spec) {
  if (!spec.targets.is_object() || spec.targets.empty()) return "";
  return "## Performance targets (lower latency is better)\n" + clip(spec.targets.dump(2), 900) + "\n";
}

namespace {

std::string fmt_ms(double ms) { return ms > 0 ? fmt::format("{:.4f}", ms) : "-"; }

}  // namespace

std::string eval_feedback_text(const EvalResult& r, const PromptBudgets& budgets) {
  std::string out = fmt::format("Status: {}\n", to_string(r.status));
  if (r.passed() && r.latency_ms > 0) {
    out += fmt::format("Geometric-mean latency over benchmark workloads: {:.4f} ms", r.latency_ms);
    if (r.speedup > 0) out += fmt::format(" ({:.3f}x the reference's {:.4f} ms)", r.speedup, r.reference_latency_ms);
    out += "\n";
    if (r.vs_baseline > 0)
      out += fmt::format("Mean over benchmark workloads of baseline latency / your latency: {:.3f} (higher is "
                         "better; this is the score)\n",
                         r.vs_baseline);
  }
  if (!r.workloads.empty()) {
    // Baseline columns only where a baseline is known, so other tasks'
    // prompts stay as they were.
    bool baseline = false;
    for (const auto& w : r.workloads) baseline = baseline || w.baseline_ms > 0;
    std::string table =
        baseline ? "| workload | kind | status | mean ms | median ms | min ms | reference ms | speedup | baseline ms | "
                   "vs baseline | max abs err | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
                 : "| workload | kind | status | mean ms | median ms | min ms | reference ms | speedup | max abs err | note |\n"
                   "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& w : r.workloads) {
      double sp = (w.timing.mean_ms > 0 && w.reference_ms > 0) ? w.reference_ms / w.timing.mean_ms : 0;
      double vb = (w.timing.mean_ms > 0 && w.baseline_ms > 0) ? w.baseline_ms / w.timing.mean_ms : 0;
      std::string note = w.message;
      if (note.size() > 200) note = note.substr(0, 197) + "...";
      for (char& c : note)
        if (c == '\n' || c == '|') c = ' ';
      std::string base = baseline ? fmt::format(" {} | {} |", fmt_ms(w.baseline_ms), vb > 0 ? fmt::format("{:.3f}x", vb) : "-")
                                  : "";
      table += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |{} {:.3g} | {} |\n", w.name,
                           w.benchmark ? "bench" : "test", to_string(w.status),
                           w.timing.count ? fmt_ms(w.timing.mean_ms) : "-",
                           w.timing.count ? fmt_ms(w.timing.median_ms) : "-",
                           w.timing.count ? fmt_ms(w.timing.min_ms) : "-", fmt_ms(w.reference_ms),
                           sp > 0 ? fmt::format("{:.3f}x", sp) : "-", base, w.max_abs_error, note);
    }
    out += clip(table, budgets.workloads);
  }
  if (!r.log.empty()) out += "\nLog:\n```\n" + clip(r.log, budgets.log) + "\n```\n";
  return out;
}

std::string kernel_text(const Solution& s) { return format_candidate(s); }

namespace {

std::string action_block(const ActionInfo& a, std::size_t budget) {
  std::string out = fmt::format("## Chosen action (node {}, from node {})\nTitle: {}\nDifficulty: {}/5\n",
                                a.node_id, a.parent_id, a.title, a.difficulty);
  if (!a.description.empty()) out += "Description: " + a.description + "\n";
  if (a.expected_factor) out += fmt::format("Expected speedup vs the base: {:.2f}x\n", *a.expected_factor);
  if (!a.rationale.empty()) out += "Rationale: " + a.rationale + "\n";
  return clip(out, budget);
}

std::string header(const CodegenInputs& in) {
  std::string out = fmt::format("# Task: {}\nTarget device: {}\n\n## Specification\n{}\n\n", in.task->name(),
                                in.device, in.task->prompt(in.language));
  return out;
}

std::string footer(const CodegenInputs& in) {
  std::string out;
  std::string targets = targets_text(in.task->spec());
  if (!targets.empty()) out += "\n" + targets;
  if (!in.world_model.empty())
    out += "\n## World model (persistent across rounds; use it to guide kernel design)\n" +
           clip(in.world_model, in.budgets.world_model) + "\n";
  out += "\n" + answer_format_text(in.language, &in.task->spec()) + "\n";
  if (!in.variant_hint.empty()) out += "\n" + in.variant_hint + "\n";
  return out;
}

std::string evidence_block(const char* title, const KernelEvidence& e, const PromptBudgets& b) {
  std::string out = fmt::format("## {}\n", title);
  if (e.solution && !e.solution->sources.empty()) out += kernel_text(*e.solution);
  else if (!e.raw_answer.empty()) out += "(the answer held no usable candidate)\n" + clip(e.raw_answer, b.log) + "\n";
  else out += "(none)\n";
  if (e.eval) out += "\nResult of that kernel:\n" + eval_feedback_text(*e.eval, b);
  return out + "\n";
}

}  // namespace

LlmRequest build_generate_request(const CodegenInputs& in) {
  LlmRequest r;
  r.kind = PromptKind::generate;
  r.system = codegen_system_message(in.language);
  std::string p = header(in);
  if (in.action) p += action_block(*in.action, in.budgets.action) + "\n";
  if (in.base.solution && !in.base.solution->sources.empty()) {
    p += evidence_block("Known-good base kernel (start from it)", in.base, in.budgets);
    p += in.action ? "Apply the chosen action to the base kernel. Keep what already works; change what the "
                     "action calls for, and keep the result correct.\n"
                   : "Improve on the base kernel while keeping it correct.\n";
  } else {
    p += in.action ? "Write a complete, correct kernel for the specification that implements the chosen action.\n"
                   : "Write a complete, correct and fast kernel for the specification.\n";
  }
  p += footer(in);
  r.prompt = std::move(p);
  return r;
}

LlmRequest build_debug_request(const CodegenInputs& in) {
  LlmRequest r;
  r.kind = PromptKind::debug;
  r.system = codegen_system_message(in.language);
  std::string p = header(in);
  p += fmt::format("## Debug-and-improve round {}/{}\nThe last attempt did not pass. Find the cause in its "
                   "result below, fix it, and return the complete corrected kernel.\n\n",
                   std::min(in.attempt - 1, in.debug_rounds_label), in.debug_rounds_label);
  if (in.action) p += action_block(*in.action, in.budgets.action) + "\n";
  p += evidence_block("Base kernel (known to pass)", in.base, in.budgets);
  p += evidence_block("Last attempt (failing)", in.last, in.budgets);
  p += footer(in);
  r.prompt = std::move(p);
  return r;
}

LlmRequest build_improve_request(const CodegenInputs& in) {
  LlmRequest r;
  r.kind = PromptKind::improve;
  r.system = codegen_system_message(in.language);
  std::string p = header(in);
  // As the original: the work continues from the last attempt, with the
  // cycle's best passing kernel as the reference to beat.
  const bool last_is_base = in.last.solution && in.base.solution && in.last.solution->id == in.base.solution->id;
  const bool has_last = (in.last.solution && !last_is_base) || !in.last.raw_answer.empty();
  if (has_last) {
    p += "## Improve\nContinue from your last attempt (the second kernel below): keep what works in it, fix what "
         "failed, and make it faster than the best passing kernel of this cycle (the first), which is the "
         "reference to beat. Study the per-workload latencies, find the bottleneck, and return the complete "
         "kernel.\n\n";
    p += evidence_block("Best passing kernel of this cycle (the reference to beat)", in.base, in.budgets);
    p += evidence_block("Last attempt (continue from this one)", in.last, in.budgets);
  } else {
    p += "## Improve\nYour last attempt, below, passes and is the best of this cycle. Continue from it: make it "
         "faster on the benchmark workloads while keeping it correct: study the per-workload latencies, find "
         "the bottleneck, and return the complete improved kernel.\n\n";
    p += evidence_block("Last attempt, the best passing so far (continue from this one)", in.base, in.budgets);
  }
  p += footer(in);
  r.prompt = std::move(p);
  return r;
}

namespace {

// An inspiration: its code (bounded) and how it scored, without its log.
std::string inspiration_block(std::size_t n, const KernelEvidence& e, const PromptBudgets& b) {
  std::string out = fmt::format("### Inspiration {}", n);
  if (e.solution) out += fmt::format(" ({})", e.solution->id.substr(0, 8));
  out += "\n";
  if (e.eval) {
    PromptBudgets small = b;
    small.log = 0;
    small.workloads = std::min<std::size_t>(b.workloads, 1500);
    EvalResult r = *e.eval;
    r.log.clear();
    out += eval_feedback_text(r, small);
  }
  if (e.solution && !e.solution->sources.empty()) out += "\n" + clip(kernel_text(*e.solution), b.inspiration);
  return out + "\n";
}

}  // namespace

LlmRequest build_evolve_request(const EvolvePromptInputs& in) {
  const CodegenInputs& c = in.codegen;
  const bool has_parent = c.base.solution && !c.base.solution->sources.empty();
  const bool has_failure = !has_parent && (c.last.eval || !c.last.raw_answer.empty());
  LlmRequest r;
  r.kind = has_parent ? PromptKind::improve : has_failure ? PromptKind::debug : PromptKind::generate;
  r.system = codegen_system_message(c.language);
  std::string p = header(c);
  p += fmt::format("## Evolution\nThis is generation {} of an evolutionary search with {} island(s); this kernel "
                   "is for island {}.",
                   in.generation, in.islands, in.island + 1);
  if (has_parent) {
    p += in.mode == "exploit" ? " Its parent is the island's best kernel.\n\n"
                              : " Its parent was drawn at random from the island's kernels, to explore.\n\n";
    p += "Improve on the parent below: keep it correct and make it faster on the benchmark workloads. Study its "
         "per-workload latencies, find the bottleneck, and return the complete kernel. The inspirations after it "
         "are other kernels of the population with their scores: borrow what makes them fast, or take a "
         "different approach from all of them.\n\n";
    p += evidence_block("Parent kernel", c.base, c.budgets);
  } else if (has_failure) {
    p += " The island has no passing kernel yet, and its last attempt failed: find the cause in its result "
         "below, fix it, and return the complete corrected kernel.\n\n";
    p += evidence_block("Last attempt on this island (failing)", c.last, c.budgets);
  } else {
    p += " The island has no kernel yet: write a complete, correct and fast kernel for the specification.\n\n";
  }
  if (!in.inspirations.empty()) {
    p += "## Inspirations (other kernels of the population, for ideas)\n";
    for (std::size_t i = 0; i < in.inspirations.size(); ++i)
      p += inspiration_block(i + 1, in.inspirations[i], c.budgets);
  }
  p += footer(c);
  r.prompt = std::move(p);
  return r;
}

}  // namespace ks::core
