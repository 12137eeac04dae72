#include "tasks/task_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "ksearch/error.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/types.hpp"
#include "util/fs.hpp"

namespace ks::tasks {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(Status::invalid_argument, fmt::format("{}: {}", where, what));
}

// {"file": "x"} -> the path, checked to exist.
std::optional<fs::path> file_ref(const Json& j, const fs::path& base, const std::string& where) {
  if (!j.is_object() || !j.contains("file")) return std::nullopt;
  const Json& f = j.at("file");
  if (!f.is_string() || f.as_string().empty()) bad(where, "\"file\" must be a non-empty path string");
  for (const auto& [k, v] : j.as_object())
    if (k != "file" && k != "path")
      bad(where, fmt::format("unknown field \"{}\" next to \"file\" (allowed: file, path)", k));
  fs::path p = base / f.as_string();
  std::error_code ec;
  if (!fs::exists(p, ec))
    bad(where, fmt::format("file \"{}\" not found (looked at {})", f.as_string(), fs::absolute(p).string()));
  if (!fs::is_regular_file(p, ec))
    bad(where, fmt::format("\"{}\" is not a regular file ({})", f.as_string(), fs::absolute(p).string()));
  return p;
}

std::string read_text(const fs::path& p, const std::string& where) {
  try {
    return util::read_file(p, util::kMaxTaskFileBytes);
  } catch (const Error& e) {
    bad(where, e.what());
  }
}

Json read_json(const fs::path& p, const std::string& where) {
  std::string err;
  auto j = Json::try_parse(read_text(p, where), &err);
  if (!j) bad(where, fmt::format("{} is not valid JSON: {}", p.filename().string(), err));
  return *j;
}

// A solution object in a task file: inline, or with file references for its
// sources, plan and parameters.
Json resolve_solution(const Json& s, const fs::path& base, const std::string& where,
                      const std::string& default_language, const std::string& default_name) {
  if (!s.is_object()) bad(where, fmt::format("must be a solution object, found {}", json_type_name(s.type())));
  Json out = s;
  if (!out.contains("language")) {
    if (default_language.empty()) bad(where, "missing required field \"language\" (\"cuda\" or \"cpp\")");
    out["language"] = default_language;
  }
  if (!out.contains("name") && !default_name.empty()) out["name"] = default_name;
  const Json* sources = s.find("sources");
  if (!sources || !sources->is_array() || sources->empty())
    bad(where, "\"sources\" must be a non-empty array of {\"file\": ...} or {\"path\": ..., \"content\": ...}");
  Json resolved = Json::array();
  for (std::size_t i = 0; i < sources->size(); ++i) {
    const Json& src = (*sources)[i];
    std::string at = fmt::format("{}.sources[{}]", where, i);
    if (auto p = file_ref(src, base, at)) {
      std::string name = src.get_string("path", p->filename().string());
      resolved.push_back(Json::obj({{"path", name}, {"content", read_text(*p, at)}}));
    } else if (src.is_object() && src.contains("content")) {
      resolved.push_back(src);
    } else {
      bad(at, "must be {\"file\": \"kernel.cpp\"} or {\"path\": \"kernel.cpp\", \"content\": \"...\"}");
    }
  }
  out["sources"] = resolved;
  for (const char* field : {"launch_plan", "params"}) {
    if (const Json* v = s.find(field)) {
      std::string at = fmt::format("{}.{}", where, field);
      if (auto p = file_ref(*v, base, at)) out[field] = read_json(*p, at);
    }
  }
  // A malformed plan is a task-file error worth catching here rather than
  // at the first evaluation.
  if (const Json* plan = out.find("launch_plan"); plan && !plan->is_null()) {
    if (auto lang = language_from_string(out.get_string("language"))) {
      try {
        LaunchPlan::from_json(*plan, *lang);
      } catch (const Error& e) {
        bad(where + ".launch_plan", fmt::format("{} (docs/launch-plan.md)", e.what()));
      }
    }
  }
  return out;
}

// The task's language when it lists exactly one: what a starting point or a
// weakened reference that names none is written in.
std::string only_language_of(const Json& task) {
  if (const Json* langs = task.find("languages"); langs && langs->is_array() && langs->size() == 1 &&
                                                  (*langs)[0].is_string())
    return (*langs)[0].as_string();
  return "";
}

}  // namespace

Json resolve_task_file_json(const Json& j, const fs::path& base) {
  if (!j.is_object()) bad("task file", fmt::format("must hold a JSON object, found {}", json_type_name(j.type())));
  Json out = j;
  if (const Json* v = j.find("format_version")) {
    if (!v->is_int() || v->as_int() != 1)
      bad("format_version", fmt::format("this libksearch reads task file format 1, the file says {}", v->dump()));
    out.erase("format_version");
  }
  if (const Json* prompts = j.find("prompts")) {
    if (!prompts->is_object()) bad("prompts", "must map languages to text or {\"file\": ...}");
    Json p = Json::object();
    for (const auto& [lang, v] : prompts->as_object()) {
      std::string at = "prompts." + lang;
      if (auto f = file_ref(v, base, at)) p[lang] = read_text(*f, at);
      else if (v.is_string()) p[lang] = v;
      else bad(at, "must be the prompt text or {\"file\": \"prompt.md\"}");
    }
    out["prompts"] = p;
  }
  if (const Json* refs = j.find("references")) {
    if (!refs->is_object()) bad("references", "must map languages (\"cuda\", \"cpp\") to solutions");
    Json r = Json::object();
    for (const auto& [lang, v] : refs->as_object()) {
      if (!language_from_string(lang))
        bad("references", fmt::format("unknown language \"{}\" (expected \"cuda\" or \"cpp\")", lang));
      r[lang] = resolve_solution(v, base, "references." + lang, lang, "reference");
    }
    out["references"] = r;
  }
  if (const Json* bases = j.find("baselines")) {
    if (!bases->is_object()) bad("baselines", "must map languages (\"cuda\", \"cpp\") to solutions");
    Json r = Json::object();
    for (const auto& [lang, v] : bases->as_object()) {
      if (!language_from_string(lang))
        bad("baselines", fmt::format("unknown language \"{}\" (expected \"cuda\" or \"cpp\")", lang));
      r[lang] = resolve_solution(v, base, "baselines." + lang, lang, "baseline");
    }
    out["baselines"] = r;
  }
  // Data files of workloads are read by worker processes, whatever their
  // working directory: relative paths become absolute here.
  if (const Json* ws = j.find("workloads"); ws && ws->is_array()) {
    Json resolved = *ws;
    for (auto& w : resolved.as_array()) {
      Json* data = w.find("data");
      if (!data || !data->is_object()) continue;
      for (auto& [name, d] : data->as_object()) {
        Json* file = d.find("safetensors");
        if (file && file->is_string() && !file->as_string().empty() && fs::path(file->as_string()).is_relative())
          *file = fs::absolute(base / file->as_string()).lexically_normal().string();
      }
    }
    out["workloads"] = resolved;
  }
  if (const Json* starts = j.find("starting_points")) {
    if (!starts->is_array()) bad("starting_points", "must be an array of solutions");
    const std::string only_language = only_language_of(j);
    Json s = Json::array();
    for (std::size_t i = 0; i < starts->size(); ++i)
      s.push_back(resolve_solution((*starts)[i], base, fmt::format("starting_points[{}]", i), only_language, ""));
    out["starting_points"] = s;
  }
  // Like starting points: a language may be left out for a task written in
  // one; each needs a name, which the weak check reports it by.
  if (const Json* weakened = j.find("weakened_references")) {
    if (!weakened->is_array()) bad("weakened_references", "must be an array of solutions");
    const std::string only_language = only_language_of(j);
    Json s = Json::array();
    for (std::size_t i = 0; i < weakened->size(); ++i) {
      const std::string where = fmt::format("weakened_references[{}]", i);
      const Json& w = (*weakened)[i];
      if (w.is_object() && (!w.contains("name") || !w.at("name").is_string() || w.at("name").as_string().empty()))
        bad(where, "needs a \"name\" (the weak check reports it by name), e.g. \"no_bias\"");
      s.push_back(resolve_solution(w, base, where, only_language, ""));
    }
    out["weakened_references"] = s;
  }
  return out;
}

}  // namespace ks::tasks

KS_NAMESPACE_BEGIN

TaskSpec load_task_file(const std::filesystem::path& given) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path path = fs::is_directory(given, ec) ? given / "task.json" : given;
  if (!fs::exists(path, ec))
    throw Error(Status::not_found, fmt::format("task file not found: {}", fs::absolute(path).string()));
  const std::string where = fmt::format("task file {}", path.string());
  std::string text;
  try {
    text = util::read_file(path, util::kMaxTaskFileBytes);
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", where, e.what()));
  }
  std::string err;
  auto j = Json::try_parse(text, &err);
  if (!j) throw Error(Status::parse, fmt::format("{}: not valid JSON: {}", where, err));
  TaskSpec spec;
  try {
    spec = TaskSpec::from_json(tasks::resolve_task_file_json(*j, path.parent_path()));
    spec.base_dir = fs::absolute(path.parent_path());
    // Every task file takes Python candidates too, called by the documented
    // run(...) convention: python wherever a reference can check them, triton
    // where the CUDA one can (docs/task-format.md).
    auto accepts = [&](Language l) {
      return std::find(spec.languages.begin(), spec.languages.end(), l) != spec.languages.end();
    };
    const bool cuda_ref = spec.references.count(Language::cuda) > 0;
    if (!accepts(Language::triton) && cuda_ref) spec.languages.push_back(Language::triton);
    if (!accepts(Language::python) && (cuda_ref || spec.references.count(Language::cpp)))
      spec.languages.push_back(Language::python);
    spec.validate();
    for (std::size_t i = 0; i < spec.starting_points.size(); ++i) {
      Solution& s = spec.starting_points[i];
      if (std::find(spec.languages.begin(), spec.languages.end(), s.language) == spec.languages.end())
        throw Error(Status::invalid_argument,
                    fmt::format("starting_points[{}] is written in {}, which the task does not list in \"languages\"",
                                i, to_string(s.language)));
      if (s.task.empty()) s.task = spec.name;
    }
    for (Solution& s : spec.weakened_references)
      if (s.task.empty()) s.task = spec.name;
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("{}: {}", where, e.what()));
  }
  return spec;
}

KS_NAMESPACE_END
