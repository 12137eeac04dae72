// The export formats: each is the Python runtime (embedded verbatim), the
// manifest, and a few lines of glue in the harness's own calling convention.
// docs/export.md describes each harness's ABI and why it is met this way.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <map>
#include <set>

#include "core/fib_solution.hpp"
#include "export/bundle.hpp"
#include "export/embedded.hpp"
#include "ksearch/error.hpp"
#include "ksearch/solution_export.hpp"
#include "ksearch/version.h"
#include "util/fs.hpp"
#include "util/json_fields.hpp"

KS_NAMESPACE_BEGIN
namespace {

using exporter::json_for_python;

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

std::string py_string(const std::string& s) {
  // A Python string literal; JSON's escapes are valid Python escapes.
  return Json(s).dump();
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

bool is_python_keyword(const std::string& s) {
  static const std::set<std::string> kw = {
      "False", "None",   "True",  "and",      "as",    "assert", "async",  "await", "break",
      "class", "continue", "def", "del",      "elif",  "else",   "except", "finally", "for",
      "from",  "global", "if",    "import",   "in",    "is",     "lambda", "nonlocal", "not",
      "or",    "pass",   "raise", "return",   "try",   "while",  "with",   "yield"};
  return kw.count(s) > 0;
}

std::string header(const char* what, const TaskSpec& task, const Json& bundle) {
  const Json& sol = bundle["solution"];
  const Json& nv = bundle["nvrtc"];
  std::string out = fmt::format(
      "# {}, written by `ksearch export` (libksearch {}).\n"
      "# Task {}; solution \"{}\" (id {}).\n"
      "# It runs the cubin(s) libksearch's NVRTC build produced for {} (NVRTC {}) - the binaries the\n"
      "# evaluator timed - loaded through the CUDA driver by the runtime below (docs/export.md). A GPU of\n"
      "# another architecture gets an NVRTC rebuild with the recorded options, announced on stderr.\n",
      what, KS_VERSION_STRING, task.name, one_line(sol.get_string("name")), sol.get_string("id"),
      bundle.get_string("arch"), nv.get_string("version"));
  for (const auto& b : bundle["builds"].as_array())
    out += fmt::format("#   cubin sha256 {} ({} bytes, {})\n", b.get_string("cubin_sha256"), b.get_int("cubin_bytes"),
                       b.get_string("origin"));
  return out + "\n";
}

std::string runtime_block() {
  return "# ---- ksearch_runtime (lib/export/runtime/ksearch_runtime.py) -------------------------------------\n" +
         std::string(exporter::embedded::ksearch_runtime_py) +
         "\n# ---- generated for this solution ----------------------------------------------------------------\n\n";
}

std::vector<const TensorSpec*> inputs_of(const TaskSpec& t) {
  std::vector<const TensorSpec*> out;
  for (const auto& x : t.tensors)
    if (!x.is_output) out.push_back(&x);
  return out;
}

std::vector<const TensorSpec*> outputs_of(const TaskSpec& t) {
  std::vector<const TensorSpec*> out;
  for (const auto& x : t.tensors)
    if (x.is_output) out.push_back(&x);
  return out;
}

// ---- GPUMode: submission.py with custom_kernel(data), data = (input, mask, weights, config).

std::string gpumode_file(const TaskSpec& task, const Json& bundle) {
  if (task.name != "gpumode/trimul")
    throw Error(Status::invalid_argument,
                fmt::format("--format gpumode writes submissions for gpumode/trimul (GPUMode's bioml/trimul); task "
                            "\"{}\" is not a GPUMode problem libksearch knows",
                            task.name));
  // reference.py's names for the task's parameter tensors (nn.Linear weights
  // are [out, in], the task's [H, C] and [C, H] layouts, row-major).
  static const std::map<std::string, std::string> weight_key = {
      {"norm_weight", "norm.weight"},
      {"norm_bias", "norm.bias"},
      {"left_proj", "left_proj.weight"},
      {"right_proj", "right_proj.weight"},
      {"left_gate", "left_gate.weight"},
      {"right_gate", "right_gate.weight"},
      {"out_gate", "out_gate.weight"},
      {"to_out_norm_weight", "to_out_norm.weight"},
      {"to_out_norm_bias", "to_out_norm.bias"},
      {"to_out", "to_out.weight"}};
  auto ins = inputs_of(task);
  auto outs = outputs_of(task);
  if (ins.size() < 2 || ins[0]->name != "x" || ins[1]->name != "mask" || outs.size() != 1)
    throw Error(Status::invalid_argument, "gpumode/trimul's tensors are not x, mask, the weights and one output");
  std::string weights;
  for (std::size_t i = 2; i < ins.size(); ++i) {
    auto it = weight_key.find(ins[i]->name);
    if (it == weight_key.end())
      throw Error(Status::invalid_argument,
                  fmt::format("task tensor \"{}\" has no counterpart among reference.py's weights", ins[i]->name));
    weights += fmt::format("    {},  # {}\n", py_string(it->second), ins[i]->name);
  }
  std::string out = header("GPUMode submission (bioml/trimul)", task, bundle) + runtime_block();
  out += "import torch\n\n";
  out += "MANIFEST = load_json(" + json_for_python(bundle) + ")\n\n";
  out += "_RUNNER = Runner(MANIFEST)\n";
  out += "_F32 = torch.float32\n";
  out += "# reference.py's weight names, in the order of the task's tensors after x and mask.\n";
  out += "_WEIGHTS = (\n" + weights + ")\n\n\n";
  out += R"PY(def custom_kernel(data):
    """GPUMode's entry point: data = (input [B, N, N, C] float32, mask [B, N, N], weights by reference.py's
    names, config {"dim", "hidden_dim"}); returns the output [B, N, N, C] float32."""
    x, mask, weights, config = data
    # generate_input gives an int64 0/1 mask when masked and float32 ones when not; the kernels read float32.
    if mask.dtype != _F32:
        mask = mask.to(_F32)
    inputs = [x, mask]
    try:
        for key in _WEIGHTS:
            inputs.append(weights[key])
    except KeyError as e:
        raise KsRuntimeError("weights has no %s (reference.py's names: %s)" % (e, ", ".join(_WEIGHTS)))
    return _RUNNER.run(inputs)[0]
)PY";
  return out;
}

// ---- KernelBench: a module defining ModelNew, exec'd by eval_kernel_against_ref.

std::string kernelbench_file(const TaskSpec& task, const Json& bundle, const std::string& problem_source) {
  auto outs = outputs_of(task);
  if (outs.empty()) throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no output", task.name));
  std::string out = header("KernelBench ModelNew", task, bundle) + runtime_block();
  out += "import torch\nimport torch.nn as nn\n\n";
  out += "MANIFEST = load_json(" + json_for_python(bundle) + ")\n\n";
  out += "_RUNNER = Runner(MANIFEST)\n";
  if (problem_source.empty()) {
    out += "# No problem file was given at export: the parameters come from the Model of the namespace ModelNew\n"
           "# runs in (eval_kernel_against_ref executes the reference and ModelNew in one).\n"
           "_PROBLEM_SOURCE = None\n";
  } else {
    Json src = problem_source;
    out += "# The problem file this export was made for; its Model builds the module's parameters.\n";
    out += "_PROBLEM_SOURCE = load_json(" + json_for_python(src) + ")\n";
  }
  out += R"PY(

def _problem_model_class():
    if _PROBLEM_SOURCE is not None:
        namespace = {"__name__": "ksearch_kernelbench_problem"}
        exec(compile(_PROBLEM_SOURCE, "<KernelBench problem>", "exec"), namespace)
        return namespace.get("Model")
    return globals().get("Model")


class ModelNew(nn.Module):
    """The problem's computation by the embedded kernels. Inputs are forward()'s arguments, then the
    problem module's state_dict() entries in order (the task's tensor order, docs/tasks/kernelbench.md)."""

    def __init__(self, *init_inputs):
        super().__init__()
        model_class = _problem_model_class()
        # Built right after KernelBench's set_seed(42), as the reference is: the same parameter values.
        self.problem = model_class(*init_inputs) if model_class is not None else None

    def forward(self, *args):
        spec = _RUNNER.solution.inputs
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        inputs = []
        for i, a in enumerate(args):
            if i >= len(spec):
                raise KsRuntimeError("ModelNew takes %d inputs, got %d" % (len(spec), len(args)))
            if spec[i].scalar:  # a scalar input of the task: passed by value
                inputs.append(a)
                continue
            dtype = spec[i].torch_type(torch)
            if isinstance(a, torch.Tensor):
                inputs.append(a.to(dtype=dtype).contiguous())
            else:  # a Python scalar is a one-element tensor of the task
                inputs.append(torch.full((1,) * len(spec[i].shape), float(a), dtype=dtype, device=device))
        if len(inputs) < len(spec):
            if self.problem is None:
                raise KsRuntimeError("the task takes %d inputs (%s) and forward() passed %d; the rest are the "
                                     "problem module's parameters, but no problem Model is known (export with "
                                     "--problem-file)" % (len(spec), ", ".join(t.name for t in spec), len(inputs)))
            for t in self.problem.state_dict().values():
                dtype = spec[len(inputs)].torch_type(torch) if len(inputs) < len(spec) else t.dtype
                inputs.append(t.detach().to(device=device, dtype=dtype).contiguous())
        if len(inputs) != len(spec):
            raise KsRuntimeError("the task takes %d inputs (%s); forward() and the module's parameters gave %d"
                                 % (len(spec), ", ".join(t.name for t in spec), len(inputs)))
        outputs = _RUNNER.run(inputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
)PY";
  return out;
}

// ---- FlashInfer-Bench: a python-language Solution, destination-passing style.

std::string definition_of(const TaskSpec& task) {
  const std::string prefix = "flashinfer/";
  return starts_with(task.name, prefix) ? task.name.substr(prefix.size()) : task.name;
}

std::string hardware_for(const std::string& arch) {
  if (starts_with(arch, "sm_90")) return "NVIDIA_H100";
  if (starts_with(arch, "sm_100")) return "NVIDIA_B200";
  if (starts_with(arch, "sm_80")) return "NVIDIA_A100";
  return "NVIDIA_" + arch;
}

std::string flashinfer_entry(const TaskSpec& task, const Json& bundle) {
  auto ins = inputs_of(task);
  auto outs = outputs_of(task);
  if (outs.empty()) throw Error(Status::invalid_argument, fmt::format("task \"{}\" has no output", task.name));
  auto param = [](const std::string& n) { return is_python_keyword(n) ? n + "_" : n; };
  std::string args, in_list, out_list;
  for (const auto* t : ins) {
    args += (args.empty() ? "" : ", ") + param(t->name);
    in_list += (in_list.empty() ? "" : ", ") + param(t->name);
  }
  for (const auto* t : outs) {
    args += (args.empty() ? "" : ", ") + param(t->name);
    out_list += (out_list.empty() ? "" : ", ") + param(t->name);
  }
  std::string out = header("FlashInfer-Bench Solution entry point", task, bundle) + runtime_block();
  out += "MANIFEST = load_json(" + json_for_python(bundle) + ")\n\n";
  out += "_RUNNER = Runner(MANIFEST)\n\n\n";
  out += fmt::format(R"PY(def run({}):
    """Destination-passing style: the definition's inputs in order (scalar inputs as Python numbers), then
    its outputs, which are filled."""
    _RUNNER.run([{}], [{}])
)PY",
                     args, in_list, out_list);
  return out;
}

std::string flashinfer_file(const TaskSpec& task, const Solution& solution, const Json& bundle,
                            const ExportOptions& o) {
  const std::string def = definition_of(task);
  std::string name = o.name;
  if (name.empty()) name = fmt::format("{}_ksearch_{}", def, bundle["solution"].get_string("id").substr(0, 12));
  Json hardware = Json::array();
  if (o.target_hardware.empty()) hardware.push_back(hardware_for(o.arch));
  for (const auto& h : o.target_hardware) hardware.push_back(h);
  Json sources = Json::array();
  sources.push_back(Json::obj({{"path", "main.py"}, {"content", flashinfer_entry(task, bundle)}}));
  // The device code, for readers: main.py runs the cubin built from it.
  for (const auto& f : solution.sources)
    if (!f.content.empty())
      sources.push_back(Json::obj({{"path", "kernel/" + std::filesystem::path(f.path).filename().string()},
                                   {"content", f.content}}));
  std::string description = solution.description;
  description += std::string(description.empty() ? "" : " ") +
                 fmt::format("(libksearch export: main.py launches the embedded {} cubin libksearch built with "
                             "NVRTC {} and evaluated; kernel/ holds its source.)",
                             o.arch, bundle["nvrtc"].get_string("version"));
  Json sol = Json::obj({{"name", name},
                        {"definition", def},
                        {"author", o.author.empty() ? "libksearch" : o.author},
                        {"description", description},
                        {"spec", Json::obj({{"language", "python"},
                                            {"target_hardware", hardware},
                                            {"entry_point", "main.py::run"},
                                            {"dependencies", Json::array()},
                                            {"destination_passing_style", true}})},
                        {"sources", sources}});
  return sol.dump(2) + "\n";
}

}  // namespace

std::vector<std::string> export_formats() {
  std::vector<std::string> names;
  for (auto f : {ExportFormat::gpumode, ExportFormat::kernelbench, ExportFormat::flashinfer, ExportFormat::bundle})
    names.push_back(to_string(f));
  return names;
}

std::string export_runtime_source() { return std::string(exporter::embedded::ksearch_runtime_py); }

namespace {

// The parameters a Python function takes, counted as FlashInfer-Bench counts
// them (every one but *args and **kwargs), read from its `def` at the start
// of a line; nullopt when there is no such def or it takes *args. A reading,
// not a parser: strings, brackets and comments inside the list are skipped.
std::optional<int> python_parameter_count(const std::string& source, const std::string& function) {
  const std::string head = "def " + function + "(";
  std::size_t at = 0;
  for (;; at += head.size()) {
    at = source.find(head, at);
    if (at == std::string::npos) return std::nullopt;
    if (at == 0 || source[at - 1] == '\n') break;
  }
  int depth = 0, count = 0, stars = 0;
  bool any = false, marker = false, variadic = false;
  auto end_param = [&] {
    if (any && stars == 0 && !marker) ++count;
    if (any && stars == 1) variadic = true;  // *args; **kwargs does not count either way
    any = marker = false;
    stars = 0;
  };
  for (std::size_t i = at + head.size(); i < source.size(); ++i) {
    const char c = source[i];
    if (c == '#') {
      i = source.find('\n', i);
      if (i == std::string::npos) return std::nullopt;
    } else if (c == '"' || c == '\'') {
      for (++i; i < source.size() && source[i] != c; ++i)
        if (source[i] == '\\') ++i;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) {
        end_param();
        return variadic ? std::nullopt : std::optional<int>(count);
      }
      --depth;
    } else if (depth == 0 && c == ',') {
      end_param();
    } else if (depth == 0 && c == '*' && !any) {
      ++stars;  // *args, **kwargs, or the bare * before keyword-only parameters
    } else if (depth == 0 && c == '/' && !any) {
      marker = true;  // the positional-only marker is no parameter
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      any = true;
    }
  }
  return std::nullopt;
}

ExportResult python_result(const Solution& solution, const TaskSpec& task, const ExportOptions& o, ExportFormat format,
                           std::string content, std::string file) {
  ExportResult r;
  r.content = std::move(content);
  r.default_file_name = std::move(file);
  r.manifest = Json::obj({{"format", to_string(format)},
                          {"language", to_string(solution.language)},
                          {"solution_id", solution.id.empty() ? Solution(solution).finalize().id : solution.id},
                          {"task", task.name}});
  if (!o.evaluated.is_null()) r.manifest["evaluated"] = o.evaluated;
  return r;
}

// A Python solution (triton, python) is its own submission: the module
// libksearch evaluated, byte for byte, in the suite whose convention the task
// calls it by (GPUMode's custom_kernel, KernelBench's ModelNew, FlashInfer-
// Bench's run).
ExportResult export_python(const TaskSpec& task, const Solution& solution, const ExportOptions& o) {
  const Json& c = task.python;
  const std::string function = c.is_object() ? c.get_string("function", "") : "";
  const std::string cls = c.is_object() ? c.get_string("class", "") : "";
  const char* lang = to_string(solution.language);
  const bool one_file = solution.sources.size() == 1;
  if (o.format == ExportFormat::gpumode && function == "custom_kernel") {
    if (!one_file)
      throw Error(Status::invalid_argument,
                  fmt::format("a GPUMode submission is one file, and this solution has {}", solution.sources.size()));
    ExportResult r = python_result(solution, task, o, ExportFormat::gpumode, solution.sources.front().content, "submission.py");
    r.notes.push_back(fmt::format("the {} module libksearch evaluated, unchanged (custom_kernel(data))", lang));
    return r;
  }
  if (o.format == ExportFormat::kernelbench && cls == "ModelNew") {
    if (!one_file)
      throw Error(Status::invalid_argument, fmt::format("a KernelBench ModelNew is one file, and this solution has {}",
                                                        solution.sources.size()));
    ExportResult r = python_result(solution, task, o, ExportFormat::kernelbench, solution.sources.front().content, "model_new.py");
    r.notes.push_back(fmt::format("the {} module libksearch evaluated, unchanged: KernelBench's eval_kernel_against_ref "
                                  "takes it with backend=\"{}\"",
                                  lang, solution.language == Language::triton ? "triton" : "cuda"));
    return r;
  }
  if (o.format == ExportFormat::flashinfer && task.name.rfind("flashinfer/", 0) == 0 && !c.contains("adapter") && cls.empty()) {
    // An imported cpp or cuda Solution goes back as the Solution it was:
    // its sources unchanged, spec.binding and destination_passing_style
    // written out (an old-schema one is built by today's FlashInfer-Bench as
    // it was then). The options given replace its name, author and hardware.
    if (auto fib = core::extension_solution_of(solution)) {
      if (!o.name.empty()) (*fib)["name"] = o.name;
      if (!o.author.empty() && o.author != ExportOptions{}.author) (*fib)["author"] = o.author;
      if (!o.target_hardware.empty()) (*fib->find("spec"))["target_hardware"] = util::string_array(o.target_hardware);
      const Json& spec = fib->at("spec");
      ExportResult r = python_result(solution, task, o, ExportFormat::flashinfer, fib->dump(2) + "\n",
                                     fib->get_string("name", "solution") + ".json");
      r.manifest["language"] = spec.at("language");
      r.notes.push_back(fmt::format("the imported {} Solution, sources unchanged; entry point {}, binding {}, {} style",
                                    spec.get_string("language"), spec.get_string("entry_point"),
                                    spec.get_string("binding"),
                                    spec.get_bool("destination_passing_style") ? "destination-passing"
                                                                               : "value-returning"));
      return r;
    }
    std::string entry = solution.entry_point;
    if (entry.empty()) entry = solution.sources.front().path + "::" + (function.empty() ? "run" : function);
    const auto sep = entry.find("::");
    const std::string file = entry.substr(0, sep), fn = entry.substr(sep + 2);
    std::optional<bool> dps = solution.destination_passing;
    if (!dps) {
      // libksearch called it in the style its parameters say; FlashInfer-Bench is told which.
      int n_in = 0, n_out = 0;
      for (const auto& t : task.tensors) ++(t.is_output ? n_out : n_in);
      const auto& source = std::find_if(solution.sources.begin(), solution.sources.end(),
                                        [&](const SourceFile& f) { return f.path == file; })->content;
      const auto n = python_parameter_count(source, fn);
      if (n && *n == n_in + n_out) dps = true;
      else if (n && *n == n_in) dps = false;
      else
        throw Error(Status::invalid_argument,
                    fmt::format("cannot tell whether {}'s `{}` fills its outputs or returns them: it should take {} "
                                "parameters (inputs then outputs) or {} (inputs){}",
                                file, fn, n_in + n_out, n_in, n ? fmt::format(", and takes {}", *n) : std::string()));
    }
    const std::string def = definition_of(task);
    std::string name = o.name;
    if (name.empty())
      name = fmt::format("{}_ksearch_{}", def, (solution.id.empty() ? Solution(solution).finalize().id : solution.id).substr(0, 12));
    Json hardware = Json::array();
    if (o.target_hardware.empty()) hardware.push_back(hardware_for(o.arch));
    for (const auto& h : o.target_hardware) hardware.push_back(h);
    Json sources = Json::array();
    for (const auto& f : solution.sources) sources.push_back(Json::obj({{"path", f.path}, {"content", f.content}}));
    Json sol = Json::obj({{"name", name},
                          {"definition", def},
                          {"author", o.author.empty() ? "libksearch" : o.author},
                          {"description", solution.description},
                          {"spec", Json::obj({{"language", lang},
                                              {"target_hardware", hardware},
                                              {"entry_point", entry},
                                              {"dependencies", Json::array()},
                                              {"destination_passing_style", *dps}})},
                          {"sources", sources}});
    ExportResult r = python_result(solution, task, o, ExportFormat::flashinfer, sol.dump(2) + "\n", name + ".json");
    r.notes.push_back(fmt::format("the {} sources libksearch evaluated, unchanged; entry point {}, {} style", lang,
                                  entry, *dps ? "destination-passing" : "value-returning"));
    return r;
  }
  const char* native = cls == "ModelNew"                   ? "--format kernelbench"
                       : function == "custom_kernel"       ? "--format gpumode"
                       : task.name.rfind("flashinfer/", 0) == 0 ? "--format flashinfer"
                                                                : nullptr;
  throw Error(Status::invalid_argument,
              native ? fmt::format("task {} calls {} solutions in its suite's convention, which exports as {}; "
                                   "--format {} takes CUDA solutions or that suite's own tasks",
                                   task.name, lang, native, to_string(o.format))
                     : fmt::format("a {} solution of task {} (called by run(...)) has no suite file to become; "
                                   "--format {} takes CUDA solutions, or Python ones of GPUMode, KernelBench and "
                                   "FlashInfer tasks",
                                   lang, task.name, to_string(o.format)));
}

}  // namespace

ExportResult export_solution(const Task& task_in, const Solution& solution, const ExportOptions& o) {
  if (!export_format_from_string(to_string(o.format)))
    throw Error(Status::invalid_argument,
                fmt::format("export format {} is not one of gpumode, kernelbench, flashinfer, bundle",
                            static_cast<int>(o.format)));
  // What the solution is written in decides first: a host (cpp) solution
  // has no cubin to export, whatever the architecture its run recorded.
  if (solution.language == Language::cpp)
    throw Error(Status::invalid_argument,
                fmt::format("only CUDA solutions (their NVRTC cubins) and Python ones (triton, python) can be "
                            "exported; solution \"{}\" of task {} is host C++ (language cpp)",
                            solution.name.empty() ? solution.id : solution.name, task_in.spec().name));
  if (o.arch.rfind("sm_", 0) != 0)
    throw Error(Status::invalid_argument, fmt::format("--arch \"{}\" is not an NVRTC target such as sm_90a", o.arch));
  const TaskSpec& task = task_in.spec();
  ExportResult r;
  if (language_is_python(solution.language)) return export_python(task, solution, o);
  exporter::BundleOptions bo;
  bo.arch = o.arch;
  bo.cache_root = o.cache_dir.string();
  bo.flags = o.extra_compile_flags;
  bo.compile_timeout_s = o.compile_timeout_s;
  Json bundle = exporter::make_bundle(task, solution, bo, &r.notes);
  if (!o.evaluated.is_null()) bundle["evaluated"] = o.evaluated;
  r.manifest = exporter::bundle_summary(bundle);
  if (o.format == ExportFormat::gpumode) {
    r.content = gpumode_file(task, bundle);
    r.default_file_name = "submission.py";
  } else if (o.format == ExportFormat::kernelbench) {
    std::string problem = o.problem_source;
    if (problem.empty() && task.oracle.is_object() && !task.oracle.get_string("problem").empty()) {
      problem = util::read_file(task.oracle.get_string("problem"));
      r.notes.push_back("ModelNew builds its parameters with the Model of " + task.oracle.get_string("problem"));
    }
    if (problem.empty())
      r.notes.push_back("no problem file given: module parameters, if the task has any, come from the Model of the "
                        "namespace ModelNew runs in (KernelBench's eval has one there); --problem-file embeds one");
    r.content = kernelbench_file(task, bundle, problem);
    r.default_file_name = "model_new.py";
  } else if (o.format == ExportFormat::flashinfer) {
    r.content = flashinfer_file(task, solution, bundle, o);
    r.default_file_name = Json::parse(r.content).get_string("name") + ".json";
  } else {
    r.content = bundle.dump(1) + "\n";
    r.default_file_name = "bundle.json";
  }
  return r;
}

KS_NAMESPACE_END
