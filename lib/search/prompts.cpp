#include "search/prompts.hpp"

#include "core/response/parse.hpp"
#include "ksearch/sys/world_model.hpp"

#include <fmt/format.h>

#include <algorithm>
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

std::string language_text(Language lang) {
  switch (lang) {
    case Language::cuda:
      return "cuda: CUDA C++ device code compiled by NVRTC for the target GPU; the evaluator launches your kernels "
             "from a launch plan (no host code)";
    case Language::cpp:
      return "cpp: C++20 for the host CPU, compiled with -O3 -march=native -pthread into a shared object; the "
             "evaluator calls your functions from a call plan (SIMD intrinsics and std::thread allowed)";
    case Language::triton:
      return "triton: one Python module whose hot loops are Triton kernels, PyTorch for the glue";
    case Language::python:
      return "python: one Python module of PyTorch operations";
  }
  return to_string(lang);
}

std::string world_model_system_message(PromptKind kind, Language lang, const std::string& backend) {
  const std::string device = backend == "cuda" ? "GPU" : backend == "host" ? "CPU" : "target-device";
  const std::string what = lang == Language::cuda     ? "CUDA kernels"
                           : lang == Language::cpp    ? "C++ kernels"
                           : lang == Language::triton ? "Triton kernels"
                                                      : "PyTorch code";
  std::string out = fmt::format(
      "You are an expert {} performance engineer who plans the search for fast {}. You keep the search's world "
      "model: a decision tree of design hypotheses whose open actions, ranked by their priority score, decide "
      "which kernel is written next, revised as measurements arrive. ",
      device, what);
  if (kind == PromptKind::wm_init)
    out += "Now you build it from the task: analyse the task in depth and put the analysis into the JSON.";
  else if (kind == PromptKind::wm_propose)
    out += "Now you review its frontier of open actions against the evidence and make sure it holds good next steps.";
  else if (kind == PromptKind::wm_refine)
    out += "Now you update it with the evidence of a finished cycle: what the kernels did and what that teaches.";
  else
    out += "Now you update it after a cycle that produced no passing kernel.";
  out += " You answer with one JSON object and nothing else: no prose, no markdown fences.";
  return out;
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
block tagged `json call_plan`. No main(): the evaluator calls your functions from the plan.

```cpp kernel.cpp
#include <cstdint>
void my_kernel(const float* x, float* y, int64_t n) { ... }
```

```json call_plan
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

namespace {

// "+-2.1%": half the 95% interval over the value; "" when unknown.
std::string plus_minus(double lo, double hi, double value) {
  if (!(lo > 0 && hi > lo && value > 0)) return {};
  return fmt::format(" +-{:.1f}%", 50.0 * (hi - lo) / value);
}

}  // namespace

std::string eval_feedback_text(const EvalResult& r, const PromptBudgets& budgets) {
  std::string out = fmt::format("Status: {}\n", to_string(r.status));
  if (r.passed() && r.latency_ms > 0) {
    out += fmt::format("Geometric-mean latency over benchmark workloads: {:.4f} ms{}", r.latency_ms,
                       plus_minus(r.latency_lo_ms, r.latency_hi_ms, r.latency_ms));
    bool paired = !r.workloads.empty();
    for (const auto& w : r.workloads) paired = paired && (!w.benchmark || w.paired);
    if (r.speedup > 0)
      out += fmt::format(" ({:.3f}x the reference's {:.4f} ms{})", r.speedup, r.reference_latency_ms,
                         paired ? ", timed beside yours" : "");
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
    std::string statistic;
    for (const auto& w : r.workloads)
      if (w.timing.count && statistic.empty()) statistic = to_string(w.timing.statistic);
    if (!statistic.empty())
      out += fmt::format("Per workload: latency = the {} of the n timed calls, +- its 95% interval.\n", statistic);
    std::string table =
        baseline ? "| workload | kind | status | latency ms | n | mean ms | min ms | reference ms | speedup | baseline ms | "
                   "vs baseline | max abs err | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
                 : "| workload | kind | status | latency ms | n | mean ms | min ms | reference ms | speedup | max abs err | "
                   "note |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& w : r.workloads) {
      const double l = w.timing.latency();
      double sp = w.speedup();
      double vb = (l > 0 && w.baseline_ms > 0) ? w.baseline_ms / l : 0;
      std::string note = w.message;
      if (note.size() > 200) note = note.substr(0, 197) + "...";
      for (char& c : note)
        if (c == '\n' || c == '|') c = ' ';
      std::string base = baseline ? fmt::format(" {} | {} |", fmt_ms(w.baseline_ms), vb > 0 ? fmt::format("{:.3f}x", vb) : "-")
                                  : "";
      table += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |{} {:.3g} | {} |\n", w.name,
                           w.benchmark ? "bench" : "test", to_string(w.status),
                           w.timing.count ? fmt_ms(l) + plus_minus(w.timing.ci_lo_ms, w.timing.ci_hi_ms, l) : "-",
                           w.timing.count ? std::to_string(w.timing.count) : "-",
                           w.timing.count ? fmt_ms(w.timing.mean_ms) : "-",
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

std::string tolerance_text(const Tolerance& t) {
  std::string rule = t.rule == Tolerance::Rule::out_relative ? "|out - ref| <= atol + rtol * |out|"
                     : t.rule == Tolerance::Rule::abs_or_rel  ? "|out - ref| <= atol, or |out - ref| / |ref| <= rtol"
                                                              : "|out - ref| <= atol + rtol * |ref|";
  std::string out = fmt::format("Check: every output element must satisfy {} with atol {:g} and rtol {:g}", rule,
                                t.atol, t.rtol);
  if (t.min_matched_ratio < 1) out += fmt::format(" ({:g} of the elements must)", t.min_matched_ratio);
  return out + ", on several input seeds per workload.\n";
}

// What "latency" means, for every prompt that shows one (docs/evaluation.md).
constexpr std::string_view kLatencyText =
    "A workload's latency is a robust statistic of its timed calls (on a CPU the median of the calls no other "
    "process interrupted, or the 10th percentile where too few were or that cannot be told, as for Python modules "
    "timed in batches; on a GPU the median), shown with its 95% interval; on a CPU, separate evaluations of one "
    "kernel still differ by up to about 10%. Where the task's reference runs here it is timed in the same "
    "evaluation, its calls alternating with yours, so a speedup is taken under one load. A lead over the best "
    "within the noise (on a CPU, any lead under 10%) is measured again before it counts.";

std::string score_text(const TaskSpec& spec) {
  if (spec.score == ScoreMode::vs_baseline)
    return "Score: the mean over the timed workloads of (baseline latency / your latency), higher is better (1.0 is "
           "the baseline's speed). The latency reported beside it is the geometric mean over the timed workloads of "
           "your latency per workload. " + std::string(kLatencyText) + "\n";
  return "Score: the geometric mean over the timed workloads of your latency per workload; lower is better, and "
         "the speedup shown is the reference's geometric mean divided by yours. Correctness-only workloads are "
         "checked but not timed. " + std::string(kLatencyText) + "\n";
}

}  // namespace

std::string workloads_text(const TaskSpec& spec, std::size_t budget) {
  const bool subset = spec.has_feedback_subset();
  std::vector<const WorkloadSpec*> shown;
  for (const auto& w : spec.workloads)
    if (!subset || std::find(spec.feedback_workloads.begin(), spec.feedback_workloads.end(), w.name) !=
                       spec.feedback_workloads.end())
      shown.push_back(&w);
  std::string out = subset ? fmt::format("Each round evaluates your kernel on these {} of the task's {} workloads "
                                         "(the best kernel is evaluated on all of them at the end); every one must "
                                         "pass the check.\n",
                                         shown.size(), spec.workloads.size())
                           : "Each round evaluates your kernel on every workload below; every one must pass the "
                             "check.\n";
  // Dimensions in the task's order; a workload's own extra ones after.
  std::string head = "| workload | timed |", rule = "|---|---|";
  for (const auto& d : spec.dims) {
    head += " " + d + " |";
    rule += "---|";
  }
  std::string table = head + "\n" + rule + "\n";
  for (const WorkloadSpec* w : shown) {
    std::string row = fmt::format("| {} | {} |", w->name, w->benchmark ? "yes" : "no: correctness only");
    for (const auto& d : spec.dims) {
      auto it = w->dims.find(d);
      row += it == w->dims.end() ? " - |" : fmt::format(" {} |", it->second);
    }
    table += row + "\n";
  }
  out += clip(table, budget > 1200 ? budget - 1200 : budget / 2);
  if (!spec.flops.empty() || !spec.bytes.empty()) {
    out += "Work per call:";
    if (!spec.flops.empty()) out += fmt::format(" {} floating-point operations", spec.flops);
    if (!spec.flops.empty() && !spec.bytes.empty()) out += ",";
    if (!spec.bytes.empty()) out += fmt::format(" at least {} bytes of inputs and outputs", spec.bytes);
    out += ".\n";
  }
  out += tolerance_text(spec.tolerance);
  out += score_text(spec);
  return clip(out, budget);
}

std::string versus_base(double latency_ms, double base_latency_ms, double noise) {
  if (!(latency_ms > 0) || !(base_latency_ms > 0)) return "";
  const double r = base_latency_ms / latency_ms;
  if (std::abs(r - 1) < 0.005) return "as fast as the base (1.00x)";
  if (std::abs(r - 1) < noise)
    return fmt::format("{:.2f}x the base's speed, within the measurement's noise (+-{:.1f}%): no clear change", r,
                       100 * noise);
  if (r > 1) return fmt::format("{:.2f}x faster than the base", r);
  return fmt::format("{:.2f}x the base's speed: a regression ({:.2f}x slower than the base)", r, 1 / r);
}

std::string attempts_text(const std::vector<AttemptBrief>& attempts, const std::string& base_id,
                          double base_latency_ms, std::size_t budget) {
  if (attempts.empty()) return "";
  std::string out = "| # | round | request | kernel | status | latency ms | against the base | note |\n"
                    "|---|---|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    const AttemptBrief& a = attempts[i];
    const bool passed = a.status == EvalStatus::passed;
    std::string against = !a.solution_id.empty() && a.solution_id == base_id
                              ? "the base kernel itself, resubmitted unchanged"
                          : passed ? versus_base(a.latency_ms, base_latency_ms, a.noise)
                                   : "";
    std::string note = a.note;
    for (std::size_t j = 0; j < i; ++j)
      if (!a.solution_id.empty() && attempts[j].solution_id == a.solution_id) {
        note = fmt::format("the same code as attempt {}", attempts[j].attempt);
        break;
      }
    if (note.size() > 160) note = note.substr(0, 157) + "...";
    for (char& c : note)
      if (c == '\n' || c == '|') c = ' ';
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", a.attempt, a.round, to_string(a.kind),
                       a.solution_id.empty() ? "(none)" : a.solution_id.substr(0, 8), to_string(a.status),
                       passed && a.latency_ms > 0 ? fmt::format("{:.4f}", a.latency_ms) : "-",
                       against.empty() ? "-" : against, note.empty() ? "-" : note);
  }
  return clip(out, budget);
}

namespace {

// Implement only the action, as the original's codegen prompt says: a
// cycle's result then tells what the action is worth.
constexpr std::string_view kScopeRule =
    "Implement ONLY the chosen action: change what it calls for, keep every other change minimal, and keep the "
    "kernel correct. The result then shows what this action is worth.\n";

std::string action_block(const ActionInfo& a, std::size_t budget) {
  std::string out = fmt::format("## Chosen action (node {}, from node {})\nTitle: {}\nDifficulty: {}/5\n",
                                a.node_id, a.parent_id, a.title, a.difficulty);
  if (!a.description.empty()) out += "Description: " + a.description + "\n";
  if (a.expected_factor) out += fmt::format("Expected speedup vs the base: {:.2f}x\n", *a.expected_factor);
  if (!a.rationale.empty()) out += "Rationale: " + a.rationale + "\n";
  return clip(out, budget) + std::string(kScopeRule);
}

std::string header(const CodegenInputs& in) {
  const TaskSpec& spec = in.task->spec();
  std::string out = fmt::format(
      "# Task: {}\n\n## Target device\n{}\nWrite for this device; a device the specification names is where its "
      "published numbers were measured.\n\n## Specification\n{}\n\n## Workloads and score\n{}\n",
      in.task->name(), in.device, in.task->prompt(in.language), workloads_text(spec));
  if (!in.search_state.empty()) out += "## Search state\n" + in.search_state + "\n\n";
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

bool has_code(const KernelEvidence& e) { return e.solution && !e.solution->sources.empty(); }

double passing_latency(const KernelEvidence& e) {
  return e.eval && e.eval->passed() && e.eval->latency_ms > 0 ? e.eval->latency_ms : 0;
}

std::string evidence_block(const std::string& title, const KernelEvidence& e, const PromptBudgets& b,
                           double base_latency_ms = 0) {
  std::string out = fmt::format("## {}\n", title);
  if (has_code(e)) out += kernel_text(*e.solution);
  else if (!e.raw_answer.empty()) out += "(the answer held no usable candidate)\n" + clip(e.raw_answer, b.log) + "\n";
  else out += "(none: start from the specification)\n";
  if (e.eval) out += "\nResult of that kernel:\n" + eval_feedback_text(*e.eval, b);
  if (std::string vs = versus_base(passing_latency(e), base_latency_ms); !vs.empty())
    out += "Against the base kernel: " + vs + ".\n";
  return out + "\n";
}

// The cycle's attempts, when there are any, as one table.
std::string attempts_block(const CodegenInputs& in) {
  if (in.attempts.empty()) return "";
  return "## Attempts of this cycle (oldest first; latency against the base kernel)\n" +
         attempts_text(in.attempts, in.base.solution ? in.base.solution->id : "", passing_latency(in.base),
                       in.budgets.workloads) +
         "\n";
}

int attempt_of(const CodegenInputs& in, const std::string& id) {
  for (const auto& a : in.attempts)
    if (a.solution_id == id) return a.attempt;
  return 0;
}

}  // namespace

LlmRequest build_generate_request(const CodegenInputs& in) {
  LlmRequest r;
  r.kind = PromptKind::generate;
  r.system = codegen_system_message(in.language);
  std::string p = header(in);
  if (in.action) p += action_block(*in.action, in.budgets.action) + "\n";
  if (has_code(in.base)) {
    p += evidence_block(in.base_heading + " (known to pass; start from it)", in.base, in.budgets);
    p += in.action ? "Apply the chosen action to the base kernel: keep what already works and change only what the "
                     "action calls for.\n"
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
  p += "## Debug\nThe last attempt did not pass. Find the cause in its result below, fix it, and return the "
       "complete corrected kernel.\n\n";
  if (in.action) p += action_block(*in.action, in.budgets.action) + "\n";
  const double base_ms = passing_latency(in.base);
  p += evidence_block(in.base_heading + (has_code(in.base) ? " (known to pass)" : ""), in.base, in.budgets);
  p += attempts_block(in);
  p += evidence_block("Last attempt (failing)", in.last, in.budgets, base_ms);
  p += footer(in);
  r.prompt = std::move(p);
  return r;
}

namespace {

// What an improve must beat, in words: the faster of the base kernel and
// the cycle's best, with its latency.
std::string improve_target(const CodegenInputs& in) {
  const double base_ms = passing_latency(in.base), best_ms = passing_latency(in.cycle_best);
  if (best_ms > 0 && (base_ms <= 0 || best_ms < base_ms))
    return fmt::format("this cycle's best kernel (attempt {}, {:.4f} ms)", attempt_of(in, in.cycle_best.solution->id),
                       best_ms);
  if (base_ms > 0) return fmt::format("{} ({:.4f} ms)", in.base_name, base_ms);
  return "the fastest kernel so far";
}

}  // namespace

LlmRequest build_improve_request(const CodegenInputs& in) {
  LlmRequest r;
  r.kind = PromptKind::improve;
  r.system = codegen_system_message(in.language);
  std::string p = header(in);
  const bool last_code = has_code(in.last);
  const bool last_is_base = last_code && in.base.solution && in.last.solution->id == in.base.solution->id;
  const bool has_last = (last_code && !last_is_base) || (!last_code && !in.last.raw_answer.empty());
  const double base_ms = passing_latency(in.base), last_ms = passing_latency(in.last);
  p += "## Improve\n";
  if (has_last) {
    // As the original: the work continues from the last attempt.
    p += fmt::format("Continue from your last attempt (the last kernel below): keep what works in it, fix what "
                     "failed or made it slow, and make it faster than {}. Study the per-workload latencies, find the "
                     "bottleneck, and return the complete kernel.\n",
                     improve_target(in));
    if (last_ms > 0 && base_ms > 0 && last_ms > base_ms * 1.005)
      p += fmt::format("Your last attempt passes but is slower than {}: {}. Do not keep what made it slower.\n",
                       in.base_name, versus_base(last_ms, base_ms));
  } else {
    p += fmt::format("Make the kernel below faster on the timed workloads than {} while keeping it correct: study "
                     "the per-workload latencies, find the bottleneck, and return the complete improved kernel.\n",
                     improve_target(in));
    // (Where the base is the cycle's own best, as greedy's is, the last attempt made it.)
    if (last_is_base && !in.attempts.empty())
      p += "Your last attempt returned this kernel unchanged, which implements nothing new.\n";
  }
  p += "\n";
  if (in.action) p += action_block(*in.action, in.budgets.action) + "\n";
  if (has_code(in.base)) p += evidence_block(in.base_heading, in.base, in.budgets);
  const bool best_shown = has_code(in.cycle_best) && (!in.base.solution || in.cycle_best.solution->id != in.base.solution->id) &&
                          (!last_code || in.cycle_best.solution->id != in.last.solution->id);
  if (best_shown)
    p += evidence_block(fmt::format("Best kernel of this cycle so far (attempt {})",
                                    attempt_of(in, in.cycle_best.solution->id)),
                        in.cycle_best, in.budgets, base_ms);
  p += attempts_block(in);
  if (has_last) p += evidence_block("Last attempt (continue from this one)", in.last, in.budgets, base_ms);
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
