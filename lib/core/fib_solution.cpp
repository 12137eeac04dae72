#include "core/fib_solution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <string_view>

#include "core/embedded.hpp"
#include "core/entry_point.hpp"
#include "ksearch/error.hpp"
#include "util/json_fields.hpp"

namespace ks::core {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

constexpr std::string_view kPlaceholder = "@SOLUTION@";
constexpr std::string_view kSolutionLine = "SOLUTION = _json.loads(";

// The generated module for the (normalized) Solution `fib`: the template with
// the Solution's JSON as a Python string literal (a JSON string literal is
// one: its escapes are Python's, and it holds no raw newline).
std::string loader_module(const Json& fib) {
  std::string text(embedded::fib_extension_loader_py);
  const auto at = text.find(kPlaceholder);
  text.replace(at, kPlaceholder.size(), Json(fib.dump()).dump());
  return text;
}


// FlashInfer-Bench's rules for a cpp or cuda Solution's entry point: exactly
// one "::", a C, C++ or CUDA file among the sources, then the function name.
std::string extension_symbol(const std::string& entry, const std::vector<SourceFile>& sources) {
  const auto parts = split_entry_point(entry);
  if (!parts)
    bad(fmt::format("FlashInfer-Bench solution: spec.entry_point \"{}\" must be FILE::FUNCTION with exactly one "
                    "\"::\", e.g. main.cpp::run",
                    entry));
  const std::string& file = parts->file;
  const std::string& symbol = parts->function;
  static constexpr std::array<std::string_view, 5> kCompiled = {".cu", ".cpp", ".cc", ".cxx", ".c"};
  const std::string ext = std::filesystem::path(file).extension().string();
  if (std::find(kCompiled.begin(), kCompiled.end(), ext) == kCompiled.end())
    bad(fmt::format("FlashInfer-Bench solution: spec.entry_point \"{}\" names {}, and the entry file of a cpp or "
                    "cuda Solution is a .cu, .cpp, .cc, .cxx or .c file",
                    entry, file));
  if (std::none_of(sources.begin(), sources.end(), [&](const SourceFile& f) { return f.path == file; }))
    bad(fmt::format("FlashInfer-Bench solution: spec.entry_point \"{}\" names {}, which is not among its "
                    "sources[].path",
                    entry, file));
  if (!is_identifier(symbol))
    bad(fmt::format("FlashInfer-Bench solution: spec.entry_point \"{}\" does not end in a function name", entry));
  return symbol;
}

// A cpp or cuda Solution: a python solution whose module builds it. The
// Solution carried in it says binding and destination_passing_style outright,
// so that an export is built the same way by today's FlashInfer-Bench.
Solution extension_solution(const Json& j, std::vector<SourceFile> sources) {
  const Json& spec = j["spec"];
  const std::string& entry = spec.at("entry_point").as_string();
  const std::string symbol = extension_symbol(entry, sources);
  const Json* binding = spec.find("binding");
  const Json* dps = spec.find("destination_passing_style");
  if (binding && !(binding->is_string() && (binding->as_string() == "torch" || binding->as_string() == "tvm-ffi")))
    bad(fmt::format("FlashInfer-Bench solution: spec.binding {} is not one FlashInfer-Bench has: \"torch\" "
                    "(torch.utils.cpp_extension) or \"tvm-ffi\" (the default)",
                    binding->dump()));
  std::string how = binding ? binding->as_string() : "tvm-ffi";
  bool returns = dps && !dps->as_bool();
  // K-Search's published kernels use the schema before binding and
  // destination_passing_style: built as PyTorch extensions (a
  // PYBIND11_MODULE) whose function returns the outputs.
  const bool pybind = std::any_of(sources.begin(), sources.end(), [](const SourceFile& f) {
    return f.content.find("PYBIND11_MODULE") != std::string::npos;
  });
  if (!binding && !dps && pybind) {
    how = "torch";
    returns = true;
  }
  Json fib = j;
  Json& fspec = *fib.find("spec");
  fspec["binding"] = how;
  fspec["destination_passing_style"] = !returns;
  Solution s;
  s.name = j.get_string("name");
  s.description = j.get_string("description");
  s.language = Language::python;
  s.sources = {{kExtensionLoaderFile, loader_module(fib)}};
  s.entry_point = std::string(kExtensionLoaderFile) + "::" + symbol;
  s.destination_passing = !returns;
  return s;
}

}  // namespace

Solution import_flashinfer_solution(const Json& j, const TaskSpec& task) {
  util::FieldReader r(j, "FlashInfer-Bench solution");
  const Json& spec = j["spec"];
  if (!spec.is_object()) bad("FlashInfer-Bench solution: \"spec\" is not an object");
  util::FieldReader sr(spec, "FlashInfer-Bench solution spec");
  const std::string lang = sr.required_string("language");
  if (lang == "tilelang")
    bad(fmt::format("FlashInfer-Bench solution \"{}\": spec.language \"tilelang\" is not one libksearch runs "
                    "(TileLang kernels need the tilelang package and FlashInfer-Bench's TileLang builder); it runs "
                    "python, triton, cpp and cuda Solutions",
                    j.get_string("name")));
  const auto l = language_from_string(lang);
  if (!l)
    bad(fmt::format("FlashInfer-Bench solution \"{}\": spec.language \"{}\" is not one FlashInfer-Bench has "
                    "(python, triton, cpp, cuda, tilelang)",
                    j.get_string("name"), lang));
  const std::string definition = r.required_string("definition");
  const std::string own = task.name.rfind("flashinfer/", 0) == 0 ? task.name.substr(11) : task.name;
  if (definition != own)
    bad(fmt::format("this FlashInfer-Bench solution (its \"definition\") is for definition \"{}\", and "
                    "the task is {} (definition \"{}\")",
                    definition, task.name, own));
  std::vector<SourceFile> sources;
  for (const auto& f : r.required_array("sources")) {
    util::FieldReader fr(f, "FlashInfer-Bench solution source");
    const std::string& path = fr.required_string("path");
    // FlashInfer-Bench's rule: relative paths without "..", each once.
    const std::filesystem::path p(path);
    const bool climbs = std::any_of(p.begin(), p.end(), [](const std::filesystem::path& c) { return c == ".."; });
    if (path.empty() || p.is_absolute() || climbs)
      bad(fmt::format("FlashInfer-Bench solution: sources[{}].path \"{}\" must be a relative path without \"..\"",
                      sources.size(), path));
    for (const auto& earlier : sources)
      if (earlier.path == path)
        bad(fmt::format("FlashInfer-Bench solution: sources[{}].path \"{}\" appears twice", sources.size(), path));
    sources.push_back({path, fr.required_string("content")});
  }
  if (sources.empty()) bad("FlashInfer-Bench solution: \"sources\" is empty");
  sr.required_string("entry_point");
  if (const Json* d = spec.find("destination_passing_style"); d && !d->is_bool())
    bad("FlashInfer-Bench solution: spec.destination_passing_style must be true or false");
  // target_hardware is not used in verification; dependencies FlashInfer-Bench's
  // builders do not read either (its torch builder finds cuBLAS by #include).
  sr.allow({"language", "target_hardware", "entry_point", "dependencies", "destination_passing_style", "binding"});
  r.allow({"name", "definition", "author", "description", "spec", "sources"});
  Solution s;
  if (language_is_python(*l)) {
    s.name = j.get_string("name");
    s.description = j.get_string("description");
    s.language = *l;
    s.sources = std::move(sources);
    s.entry_point = spec.at("entry_point").as_string();
    // FlashInfer-Bench's default: the harness allocates the outputs and passes them after the inputs.
    const Json* d = spec.find("destination_passing_style");
    s.destination_passing = d ? d->as_bool() : true;
  } else {
    s = extension_solution(j, std::move(sources));
  }
  s.task = task.name;
  // The entry point is checked as any solution's (one "::", a file it has).
  return Solution::from_json(s.to_json());
}

std::optional<Json> extension_solution_of(const Solution& s) {
  if (s.language != Language::python || s.sources.size() != 1 || s.sources[0].path != kExtensionLoaderFile)
    return std::nullopt;
  const std::string& text = s.sources[0].content;
  const auto at = text.find(kSolutionLine);
  if (at == std::string::npos) return std::nullopt;
  const auto begin = at + kSolutionLine.size();
  const auto end = text.find(")\n", begin);
  if (end == std::string::npos) return std::nullopt;
  try {
    Json fib = Json::parse(Json::parse(std::string_view(text).substr(begin, end - begin)).as_string());
    // Exactly what import_flashinfer_solution writes: an edited module is an
    // ordinary Python solution.
    if (loader_module(fib) != text) return std::nullopt;
    return fib;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace ks::core
