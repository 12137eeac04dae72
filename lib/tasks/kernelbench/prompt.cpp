// The prompt of a KernelBench task (native or oracle): the PyTorch problem,
// the tensors in kernel-argument order, the shapes, KernelBench's check and
// scoring, and the launch-plan contract (prompt/kernelbench_contract.md).
#include <fmt/format.h>

#include "tasks/kernelbench/level1.hpp"
#include "tasks/kernelbench/level1_embedded.hpp"

namespace ks::tasks::kernelbench {

std::string kernelbench_prompt(const TaskSpec& spec, std::string_view pytorch_source, bool source_is_file,
                               std::string_view inputs_note) {
  std::string out = fmt::format("# Task: {} (KernelBench), CUDA\n\n", spec.name);
  out += "Write a fast CUDA implementation of the PyTorch module below: a kernel (or a short sequence of kernels) "
         "that computes exactly what its forward() returns, in float32.\n\n";
  out += source_is_file ? "## The KernelBench problem file\n\n" : "## The PyTorch problem (KernelBench, abridged)\n\n";
  out += fmt::format("```python\n{}\n```\n\n", pytorch_source);

  out += "## Tensors, in kernel-argument order\n\nEvery tensor is float32, contiguous, row-major (the last index "
         "varies fastest). Inputs are forward()'s arguments (a Python scalar becomes a one-element tensor), then the "
         "module's parameters and buffers named after its state_dict (dots become underscores), then the output.\n\n"
         "| name | shape | role |\n| --- | --- | --- |\n";
  for (const auto& t : spec.tensors) {
    std::string shape;
    for (const auto& s : t.shape) shape += (shape.empty() ? "" : ", ") + s;
    out += fmt::format("| `{}` | [{}] | {} |\n", t.name, shape, t.is_output ? "output" : "input (read-only)");
  }
  out += "\n## Dimensions\n\n";
  for (const auto& w : spec.workloads) {
    std::string dims;
    for (const auto& [k, v] : w.dims) dims += fmt::format("{}{} = {}", dims.empty() ? "" : ", ", k, v);
    out += fmt::format("- `{}`{}: {}\n", w.name, w.benchmark ? " (timed; KernelBench's shape)" : " (correctness only)",
                       dims.empty() ? "no named dimensions" : dims);
  }
  out += "\nIn a launch plan, refer to a tensor by its name and to a dimension by its name. Your kernel must handle "
         "every workload listed, not only the timed one.\n";
  if (!inputs_note.empty()) out += fmt::format("\n{}\n", inputs_note);

  out += fmt::format(
      "\n## Correctness (KernelBench's check)\n\nEvery output element must satisfy `|out - ref| <= {:g} + {:g} * |out|` "
      "(torch.allclose(ref, out, atol={:g}, rtol={:g}): the relative term uses your output), on every checked input "
      "seed: all trials must pass. A NaN or infinity fails unless the reference has the same value there. Keep the "
      "arithmetic in float32 (or more precise): fp16/bf16/TF32 shortcuts rarely stay within this tolerance.\n",
      spec.tolerance.atol, spec.tolerance.rtol, spec.tolerance.atol, spec.tolerance.rtol);

  out += "\n## What is timed and how you are scored\n\nOne call is the whole launch plan, bracketed by CUDA events; "
         "the L2 cache is flushed before every timed call. The score is the speedup over PyTorch eager (the module "
         "run by PyTorch on the same GPU); KernelBench's fast_p counts problems that are correct and faster than p "
         "times PyTorch.";
  if (const Json* e = spec.targets.find("eager_ms"); e && e->is_number())
    out += fmt::format(" For scale, on an H100 PyTorch eager takes {:.3g} ms and torch.compile {:.3g} ms per call.",
                       e->as_number(), spec.targets.get_number("torch_compile_ms"));
  out += "\n\n";
  out += std::string(embedded::kb_contract_md);
  return out;
}

Json kernelbench_python_convention(const std::string& init_inputs, int forward_inputs, bool parameters_loaded) {
  return Json::obj({{"class", "ModelNew"},
                    {"module", "model_new.py"},
                    {"init_inputs", init_inputs},
                    {"inputs", forward_inputs},
                    {"seed", 42},
                    {"parameters", parameters_loaded ? "loaded" : "seeded"},
                    {"signature", "class ModelNew(nn.Module), built as ModelNew(*get_init_inputs()) and called as "
                                  "forward(*get_inputs()), like the problem's Model"}});
}

std::string kernelbench_python_prompt(const TaskSpec& spec, std::string_view pytorch_source, bool source_is_file,
                                      std::string_view inputs_note, Language language) {
  const bool triton = language == Language::triton;
  std::string out = fmt::format("# Task: {} (KernelBench), {}\n\n", spec.name, triton ? "Triton" : "PyTorch");
  out += fmt::format("Write `class ModelNew(nn.Module)`, a faster replacement for the PyTorch module below{}: the "
                     "same constructor arguments and the same forward() arguments and result, in float32.\n\n",
                     triton ? " whose hot loops are Triton kernels" : "");
  out += source_is_file ? "## The KernelBench problem file\n\n" : "## The PyTorch problem (KernelBench, abridged)\n\n";
  out += fmt::format("```python\n{}\n```\n\n", pytorch_source);
  const Json& c = spec.python;
  out += fmt::format(
      "## How ModelNew is built and called (KernelBench's eval_kernel_against_ref)\n\n"
      "- `set_seed(42)`, then `ModelNew(*{})` under `torch.no_grad()` (get_init_inputs() of the problem), then "
      "`.to(device, torch.float32)`. Create the same parameters and submodules as Model, in the same order (for "
      "example `self.conv2d = nn.Conv2d(...)` and use `self.conv2d.weight` in your kernel): ",
      c.get_string("init_inputs", "[]"));
  out += c.get_string("parameters") == "loaded"
             ? "the task's parameter values are copied into your module's state_dict in that order, so its entries "
               "must have the same shapes.\n"
             : "built right after the same seed, they then hold the same values as Model's.\n";
  out += "- `forward(*get_inputs())` on float32 tensors already on the device, under `torch.no_grad()`; return the "
         "output tensor (float32, Model's shape).\n";
  if (!inputs_note.empty()) out += fmt::format("- {}\n", inputs_note);
  out += fmt::format("\n## Correctness and timing\n\nEvery output element must satisfy `|out - ref| <= {:g} + {:g} * "
                     "|out|` on every checked input seed. One forward() call is timed between CUDA events, the L2 "
                     "cache flushed before each call; the score is the speedup over PyTorch eager.",
                     spec.tolerance.atol, spec.tolerance.rtol);
  if (const Json* e = spec.targets.find("eager_ms"); e && e->is_number())
    out += fmt::format(" On an H100 PyTorch eager takes {:.3g} ms and torch.compile {:.3g} ms per call.",
                       e->as_number(), spec.targets.get_number("torch_compile_ms"));
  out += "\n";
  return out;
}

}  // namespace ks::tasks::kernelbench
