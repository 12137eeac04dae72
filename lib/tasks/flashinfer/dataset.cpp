#include "tasks/flashinfer/dataset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/inputs.hpp"
#include "core/rng/rng_stream.hpp"
#include "core/safetensors.hpp"
#include "ksearch/error.hpp"
#include "tasks/flashinfer/flashinfer.hpp"
#include "tasks/flashinfer/suite_common.hpp"
#include "tasks/flashinfer/traces.hpp"
#include "util/fs.hpp"

namespace ks::tasks::flashinfer {
namespace {

namespace fs = std::filesystem;

struct Definition {
  fs::path file, root;
  std::string name, op_type, description, reference;
  Json::Object axes, inputs, outputs;
};

[[noreturn]] void bad(const fs::path& file, const std::string& what) {
  throw Error(Status::invalid_argument, fmt::format("FlashInfer definition {}: {}", file.string(), what));
}

Json read_json_file(const fs::path& p) {
  std::string err;
  auto j = Json::try_parse(util::read_file(p), &err);
  if (!j) throw Error(Status::parse, fmt::format("{}: not valid JSON: {}", p.string(), err));
  return *j;
}

const Json::Object& object_field(const fs::path& file, const Json& j, const char* key) {
  const Json* v = j.find(key);
  if (!v || !v->is_object()) bad(file, fmt::format("\"{}\" must be an object", key));
  return v->as_object();
}

Definition read_definition(const fs::path& file) {
  Definition d;
  d.file = file;
  const fs::path op_dir = file.parent_path();
  if (op_dir.parent_path().filename() != "definitions")
    bad(file, "is not in a dataset's layout (DIR/definitions/<op_type>/<name>.json)");
  d.root = op_dir.parent_path().parent_path();
  const Json j = read_json_file(file);
  if (!j.is_object()) bad(file, "must hold a JSON object");
  d.name = j.get_string("name");
  if (d.name.empty()) bad(file, "\"name\" is missing");
  if (d.name.find('/') != std::string::npos || d.name.find("..") != std::string::npos)
    bad(file, fmt::format("\"name\" \"{}\" is not a plain name", d.name));
  d.op_type = j.get_string("op_type", j.get_string("type"));
  if (d.op_type.empty()) bad(file, "\"op_type\" is missing");
  if (file.stem() != d.name) bad(file, fmt::format("the file name does not match \"name\" \"{}\"", d.name));
  d.description = j.get_string("description");
  if (const Json* r = j.find("reference"); r && r->is_string()) d.reference = r->as_string();
  d.axes = object_field(file, j, "axes");
  d.inputs = object_field(file, j, "inputs");
  d.outputs = object_field(file, j, "outputs");
  for (const auto& [name, a] : d.axes) {
    const std::string type = a.is_object() ? a.get_string("type") : "";
    if (type != "const" && type != "var") bad(file, fmt::format("axes.{}: \"type\" must be \"const\" or \"var\"", name));
    if (type == "const" && (!a.find("value") || !a["value"].is_int() || a["value"].as_int() < 0))
      bad(file, fmt::format("axes.{}: a const axis needs a non-negative integer \"value\"", name));
  }
  return d;
}

// The task's tensors from the definition, in order, with FlashInfer-Bench's random rules.
std::vector<TensorSpec> definition_tensors(const Definition& d) {
  std::set<std::string> axis_names;
  for (const auto& [a, v] : d.axes) axis_names.insert(a);
  std::vector<TensorSpec> out;
  auto add = [&](const Json::Object& list, bool is_output, const char* where) {
    for (const auto& [name, t] : list) {
      if (!t.is_object()) bad(d.file, fmt::format("{}.{} must be an object", where, name));
      const std::string dt = t.get_string("dtype");
      auto dtype = dtype_from_string(dt);
      if (!dtype)
        bad(d.file, fmt::format("{}.{}: dtype \"{}\" is not supported (float32, float16, bfloat16, float8_e4m3fn, "
                                "float8_e5m2, int64, int32, int16, int8, bool)", where, name, dt));
      const Json* shape = t.find("shape");
      TensorSpec s;
      if (!shape || shape->is_null()) {
        if (is_output) bad(d.file, fmt::format("{}.{}: an output cannot be a scalar", where, name));
        s = scalar(name, *dtype, random_rule(*dtype));
      } else {
        if (!shape->is_array()) bad(d.file, fmt::format("{}.{}: \"shape\" must be a list of axis names or null", where, name));
        std::vector<std::string> dims;
        for (const auto& e : shape->as_array()) {
          if (e.is_string() && axis_names.count(e.as_string())) dims.push_back(e.as_string());
          else if (e.is_int() && e.as_int() >= 0) dims.push_back(std::to_string(e.as_int()));
          else bad(d.file, fmt::format("{}.{}: shape entry {} is not an axis of the definition", where, name, e.dump()));
        }
        s = is_output ? output(name, *dtype, dims) : input(name, *dtype, dims);
      }
      out.push_back(std::move(s));
    }
  };
  add(d.inputs, false, "inputs");
  add(d.outputs, true, "outputs");
  return out;
}

// A path from a workload: relative to the dataset root, without "..".
fs::path dataset_file(const Definition& d, const std::string& where, const std::string& rel) {
  const fs::path p(rel);
  if (rel.empty() || p.is_absolute())
    throw Error(Status::invalid_argument, fmt::format("{}: \"path\" \"{}\" must be relative to the dataset root", where, rel));
  for (const auto& part : p)
    if (part == "..")
      throw Error(Status::invalid_argument, fmt::format("{}: \"path\" \"{}\" must not leave the dataset root", where, rel));
  const fs::path full = d.root / p;
  std::error_code ec;
  const auto st = fs::status(full, ec);
  if (ec || !fs::exists(st))
    throw Error(Status::invalid_argument,
                fmt::format("{}: \"{}\" not found under the dataset root {} (git-LFS blobs must be pulled first)", where,
                            rel, d.root.string()));
  if (!fs::is_regular_file(st)) throw Error(Status::invalid_argument, fmt::format("{}: \"{}\" is not a regular file", where, rel));
  return full;
}

// The lines of a workloads file, blank ones included so that indices are line
// numbers. Unlike a run's journal (util::read_lines), where a last line
// without '\n' is a torn write, a dataset is the user's data: its last line
// counts whether or not it ends in a newline.
std::vector<std::string> workload_lines(const fs::path& file) {
  const std::string text = util::read_file(file);
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.emplace_back(text, start, end - start);
    start = end + 1;
  }
  return lines;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

std::vector<WorkloadSpec> read_workloads(const Definition& d, const std::vector<TensorSpec>& tensors) {
  const fs::path file = d.root / "workloads" / d.op_type / (d.name + ".jsonl");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw Error(Status::invalid_argument,
                fmt::format("FlashInfer definition {}: no workloads file at {}", d.file.string(), file.string()));
  std::vector<WorkloadSpec> out;
  std::set<std::string> names;
  const auto lines = workload_lines(file);
  for (std::size_t n = 0; n < lines.size(); ++n) {
    const std::string where = fmt::format("{} line {}", file.string(), n + 1);
    if (blank(lines[n])) continue;
    std::string err;
    auto line = Json::try_parse(lines[n], &err);
    if (!line || !line->is_object()) throw Error(Status::parse, fmt::format("{}: not a JSON object: {}", where, err));
    if (line->get_string("definition", d.name) != d.name)
      throw Error(Status::invalid_argument,
                  fmt::format("{}: the trace is for definition \"{}\", not \"{}\"", where, line->get_string("definition"), d.name));
    const Json* wj = line->find("workload");
    if (!wj || !wj->is_object()) throw Error(Status::invalid_argument, fmt::format("{}: \"workload\" is missing", where));
    WorkloadSpec w;
    w.name = wj->get_string("uuid", fmt::format("workload{}", n + 1));
    if (!names.insert(w.name).second)
      throw Error(Status::invalid_argument, fmt::format("{}: workload \"{}\" appears twice", where, w.name));
    w.seed = core::rng_stream_of(w.name) & 0x7fffffffffffULL;  // stable per uuid
    w.benchmark = true;
    const Json* axes = wj->find("axes");
    for (const auto& [a, spec] : d.axes) {
      if (spec.get_string("type") == "const") {
        w.dims[a] = spec["value"].as_int();
        continue;
      }
      const Json* v = axes ? axes->find(a) : nullptr;
      if (!v || !v->is_int() || v->as_int() < 0)
        throw Error(Status::invalid_argument, fmt::format("{}: workload \"{}\" gives no value for the var axis \"{}\"",
                                                          where, w.name, a));
      w.dims[a] = v->as_int();
    }
    if (const Json* in = wj->find("inputs"); in && in->is_object()) {
      for (const auto& [name, desc] : in->as_object()) {
        const TensorSpec* t = nullptr;
        for (const auto& ts : tensors)
          if (ts.name == name && !ts.is_output) t = &ts;
        const std::string at = fmt::format("{}: workload \"{}\", input \"{}\"", where, w.name, name);
        if (!t) throw Error(Status::invalid_argument, fmt::format("{}: not an input of the definition", at));
        const std::string type = desc.is_object() ? desc.get_string("type") : "";
        if (type == "random") continue;
        if (type == "scalar") {
          const Json* v = desc.find("value");
          if (!t->scalar) throw Error(Status::invalid_argument, fmt::format("{}: a scalar value for a tensor input", at));
          if (!v || !(v->is_number() || v->is_bool()))
            throw Error(Status::invalid_argument, fmt::format("{}: \"value\" must be a number or a boolean", at));
          w.dist_overrides[name] = constant(v->is_bool() ? (v->as_bool() ? "1" : "0") : v->dump());
        } else if (type == "safetensors") {
          if (t->scalar) throw Error(Status::invalid_argument, fmt::format("{}: a scalar input cannot come from a file", at));
          InputData data;
          data.file = dataset_file(d, at, desc.get_string("path")).string();
          data.key = desc.get_string("tensor_key", name);
          // The header now, so a wrong dtype or shape is reported when the task loads.
          const auto shape = core::tensor_shape(*t, util::Vars(w.dims.begin(), w.dims.end()));
          const auto f = core::SafetensorsFile::open(data.file);
          const auto& st = f.at(data.key);
          if (st.dtype != t->dtype || st.shape != shape)
            throw Error(Status::invalid_argument,
                        fmt::format("{}: tensor \"{}\" of {} is {} of {} elements, the definition needs {} of {}", at,
                                    data.key, desc.get_string("path"), st.dtype_name, st.count(), to_string(t->dtype),
                                    core::element_count(shape)));
          w.data[name] = data;
        } else {
          throw Error(Status::invalid_argument,
                      fmt::format("{}: \"type\" must be random, scalar or safetensors, found {}", at, desc.dump()));
        }
      }
    }
    out.push_back(std::move(w));
  }
  if (out.empty()) throw Error(Status::invalid_argument, fmt::format("{}: holds no workloads", file.string()));
  return out;
}

// Up to six workloads spread from the smallest to the largest (by the
// product of their var axes): the subset a search evaluates each round.
std::vector<std::string> spread_subset(const Definition& d, const std::vector<WorkloadSpec>& ws) {
  constexpr std::size_t kFeedback = 6;
  if (ws.size() <= kFeedback) return {};
  std::vector<std::pair<double, std::string>> by_size;
  for (const auto& w : ws) {
    double size = 1;
    for (const auto& [a, spec] : d.axes)
      if (spec.get_string("type") == "var") size *= static_cast<double>(std::max<std::int64_t>(w.dims.at(a), 1));
    by_size.push_back({size, w.name});
  }
  std::stable_sort(by_size.begin(), by_size.end());
  std::vector<std::string> out;
  for (std::size_t k = 0; k < kFeedback; ++k) out.push_back(by_size[k * (by_size.size() - 1) / (kFeedback - 1)].second);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// A task for a definition the library has no native task for: the tensors
// from the definition, a reference solution from DIR/ksearch/references.
TaskSpec generic_task(const Definition& d) {
  const fs::path ref_file = d.root / "ksearch" / "references" / d.op_type / (d.name + ".json");
  std::error_code ec;
  if (!fs::is_regular_file(ref_file, ec)) {
    std::string natives;
    for (const auto& n : definition_names()) natives += (natives.empty() ? "" : ", ") + n;
    throw Error(Status::not_found,
                fmt::format("FlashInfer definition \"{}\" ({}) has no native reference in libksearch (native references "
                            "exist for: {}); its reference is Python, which libksearch does not run. Write one as a "
                            "libksearch solution JSON (language cuda or cpp, its sources and a launch or call plan taking "
                            "the definition's inputs and outputs by name, in definition order) and save it as {}",
                            d.name, d.file.string(), natives, ref_file.string()));
  }
  TaskSpec spec;
  spec.name = std::string(kPrefix) + d.name;
  spec.description = d.description.empty() ? fmt::format("FlashInfer-Bench {} ({})", d.name, d.op_type)
                                           : d.description;
  for (const auto& [a, v] : d.axes) spec.dims.push_back(a);
  spec.tensors = definition_tensors(d);
  Solution ref;
  try {
    ref = Solution::from_json(read_json_file(ref_file));
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", ref_file.string(), e.what()));
  }
  ref.task = spec.name;
  if (ref.name.empty()) ref.name = "reference";
  spec.languages = {ref.language};
  spec.references[ref.language] = ref;
  const fs::path base_file = d.root / "ksearch" / "baselines" / d.op_type / (d.name + ".json");
  if (fs::is_regular_file(base_file, ec)) {
    Solution b = Solution::from_json(read_json_file(base_file));
    b.task = spec.name;
    spec.baselines[b.language] = b;
    spec.score = ScoreMode::vs_baseline;
  }
  const bool moe = d.op_type == "moe" || d.name.find("moe_fp8_block_scale") != std::string::npos;
  spec.tolerance = flashinfer_tolerance(moe ? 0.95 : 1.0);
  std::string table = "| # | name | shape | dtype | role |\n| --- | --- | --- | --- | --- |\n";
  for (std::size_t i = 0; i < spec.tensors.size(); ++i) {
    const auto& t = spec.tensors[i];
    std::string shape;
    for (const auto& s : t.shape) shape += (shape.empty() ? "" : ", ") + s;
    table += fmt::format("| {} | `{}` | {} | {} | {} |\n", i, t.name, t.scalar ? "scalar" : "[" + shape + "]",
                         to_string(t.dtype), t.is_output ? "output" : "input");
  }
  std::string axes;
  for (const auto& [a, v] : d.axes)
    axes += fmt::format("{}`{}` = {}", axes.empty() ? "" : ", ", a,
                        v.get_string("type") == "const" ? std::to_string(v["value"].as_int()) : std::string("var"));
  spec.prompts[ref.language] = fmt::format(
      "# Task: FlashInfer-Bench definition `{}` (op_type `{}`)\n\n{}\n\nAxes: {}.\n\nInputs and outputs, in this order "
      "(outputs after inputs; a scalar input is passed by value under its name):\n\n{}\nThe definition's reference "
      "(PyTorch):\n\n```python\n{}\n```\n\nCorrectness: an element fails only if |out - ref| > 0.01 and |out - ref| / "
      "(|ref| + 1e-8) > 0.01; {} of the elements must pass; any NaN or infinity fails. Time: the launch plan between "
      "CUDA events, caches flushed between repetitions.\n",
      d.name, d.op_type, d.description, axes, table, d.reference, moe ? "95%" : "all");
  add_python_languages(spec);
  return spec;
}

}  // namespace

bool is_definition_file(const fs::path& path) {
  std::error_code ec;
  if (path.extension() != ".json" || !fs::is_regular_file(path, ec)) return false;
  try {
    const Json j = read_json_file(path);
    return j.is_object() && j.contains("axes") && j.contains("inputs") && j.contains("outputs") &&
           (j.contains("op_type") || j.contains("type"));
  } catch (const Error&) {
    return false;
  }
}

TaskSpec load_definition(const fs::path& definition_json, const DatasetOptions& options) {
  const Definition d = read_definition(definition_json);
  TaskSpec spec;
  std::vector<TensorSpec> tensors = definition_tensors(d);
  if (auto native = make_spec(d.name)) {
    // The definition must be the one the native task implements.
    spec = std::move(*native);
    if (tensors.size() != spec.tensors.size())
      bad(d.file, fmt::format("has {} inputs and outputs, libksearch's native \"{}\" has {}", tensors.size(), d.name,
                              spec.tensors.size()));
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const TensorSpec &mine = spec.tensors[i], &theirs = tensors[i];
      if (mine.name != theirs.name || mine.dtype != theirs.dtype || mine.scalar != theirs.scalar ||
          mine.shape != theirs.shape || mine.is_output != theirs.is_output)
        bad(d.file, fmt::format("tensor {} (\"{}\") differs from libksearch's native definition of \"{}\" (\"{}\" {} [{}])",
                                i, theirs.name, d.name, mine.name, to_string(mine.dtype),
                                [&] {
                                  std::string s;
                                  for (const auto& x : mine.shape) s += (s.empty() ? "" : ", ") + x;
                                  return s;
                                }()));
    }
    spec.workloads = read_workloads(d, spec.tensors);
    for (const auto& w : spec.workloads)
      for (const auto& [a, v] : spec.workloads.front().dims)
        if (!w.dims.count(a)) bad(d.file, fmt::format("workload \"{}\" lacks axis \"{}\"", w.name, a));
    if (d.name == kMlaPrefill)
      for (const auto& w : spec.workloads)
        for (const char* offsets : {"qo_indptr", "kv_indptr"})
          if (!w.data.count(offsets))
            throw Error(Status::invalid_argument,
                        fmt::format("FlashInfer definition {}: workload \"{}\" leaves \"{}\" random; the offsets of a "
                                    "prefill must come from the workload (safetensors)", d.file.string(), w.name, offsets));
  } else {
    spec = generic_task(d);
    spec.workloads = read_workloads(d, spec.tensors);
  }
  spec.feedback_workloads = spread_subset(d, spec.workloads);
  apply_trace_baselines(spec, d.root, d.name, options);
  spec.base_dir = d.root;
  spec.targets = Json::obj({{"dataset", d.root.string()}, {"definition", d.name}});
  try {
    spec.validate();
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("FlashInfer definition {}: {}", d.file.string(), e.what()));
  }
  return spec;
}

fs::path find_definition(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  const fs::path defs = dir / "definitions";
  if (!fs::is_directory(defs, ec))
    throw Error(Status::not_found, fmt::format("{} is not a FlashInfer-Trace dataset: it has no definitions/ folder",
                                               dir.string()));
  if (name.empty() || name.find('/') != std::string::npos || name.find("..") != std::string::npos)
    throw Error(Status::invalid_argument, fmt::format("\"{}\" is not a definition name", name));
  std::vector<std::string> names;
  for (const auto& op : fs::directory_iterator(defs, ec)) {
    if (!op.is_directory(ec)) continue;
    const fs::path f = op.path() / (name + ".json");
    if (fs::is_regular_file(f, ec)) return f;
    for (const auto& e : fs::directory_iterator(op.path(), ec))
      if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw Error(Status::not_found, fmt::format("the dataset {} has no definition \"{}\" (its definitions: {})",
                                             dir.string(), name, known.empty() ? "none" : known));
}

std::vector<TaskInfo> list_dataset(const fs::path& dir) {
  std::vector<TaskInfo> out;
  std::error_code ec;
  const fs::path defs = dir / "definitions";
  if (!fs::is_directory(defs, ec))
    throw Error(Status::not_found, fmt::format("{} is not a FlashInfer-Trace dataset: it has no definitions/ folder",
                                               dir.string()));
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(defs, ec))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    TaskInfo info;
    info.source = f.string();
    info.name = std::string(kPrefix) + f.stem().string();
    try {
      const Definition d = read_definition(f);
      const fs::path wl = d.root / "workloads" / d.op_type / (d.name + ".jsonl");
      std::size_t count = 0;
      if (fs::is_regular_file(wl, ec)) {
        const auto lines = workload_lines(wl);
        count = static_cast<std::size_t>(std::count_if(lines.begin(), lines.end(), [](const auto& l) { return !blank(l); }));
      }
      std::string reference = "none (see ksearch run --task on it)";
      if (make_spec(d.name)) reference = "built-in";
      else if (fs::is_regular_file(d.root / "ksearch" / "references" / d.op_type / (d.name + ".json"), ec))
        reference = "solution file";
      info.description = fmt::format("{}: {} workloads; native reference: {}", d.op_type, count, reference);
      if (reference == "built-in") info.languages = {Language::cuda, Language::triton, Language::python};
    } catch (const Error& e) {
      info.description = fmt::format("(invalid definition: {})", e.what());
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace ks::tasks::flashinfer
