#include "core/response/parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "core/response/json_extract.hpp"
#include "ksearch/error.hpp"
#include "util/text.hpp"

namespace ks::core {
namespace {

constexpr std::size_t npos = std::string_view::npos;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

std::size_t find_ci(std::string_view s, std::string_view needle, std::size_t from) {
  for (std::size_t i = from; i + needle.size() <= s.size(); ++i)
    if (starts_with_ci(s.substr(i), needle)) return i;
  return npos;
}

// A short, single-paragraph excerpt for error messages.
std::string excerpt(std::string_view s, std::size_t max = 300) {
  s = trim(s);
  if (s.size() <= max) return std::string(s);
  return std::string(s.substr(0, max)) + " ...";
}

// ---------------------------------------------------------------------------
// Fences

struct Fence {
  std::size_t start = 0;          // first character of the opening line
  std::size_t content_start = 0;  // first character after the opening line
  char ch = '`';
  std::size_t len = 0;
  std::size_t indent = 0;
  std::string_view info;
};

std::size_t line_end(std::string_view text, std::size_t pos) {
  std::size_t e = text.find('\n', pos);
  return e == npos ? text.size() : e;
}

std::size_t next_line(std::string_view text, std::size_t pos) {
  std::size_t e = text.find('\n', pos);
  return e == npos ? text.size() : e + 1;
}

// A fence opener on the line starting at `ls`, if there is one.
std::optional<Fence> fence_at(std::string_view text, std::size_t ls) {
  std::size_t le = line_end(text, ls);
  std::size_t i = ls;
  while (i < le && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i >= le || (text[i] != '`' && text[i] != '~')) return std::nullopt;
  Fence f;
  f.start = ls;
  f.indent = i - ls;
  f.ch = text[i];
  while (i < le && text[i] == f.ch) ++i, ++f.len;
  if (f.len < 3) return std::nullopt;
  f.info = trim(text.substr(i, le - i));
  // Inline code such as ```x``` on one line is not a fence (CommonMark).
  if (f.ch == '`' && f.info.find('`') != npos) return std::nullopt;
  f.content_start = le < text.size() ? le + 1 : le;
  return f;
}

std::optional<Fence> find_fence(std::string_view text, std::size_t from) {
  std::size_t ls = from;
  if (ls > 0 && ls < text.size() && text[ls - 1] != '\n') ls = next_line(text, ls);
  for (; ls < text.size(); ls = next_line(text, ls))
    if (auto f = fence_at(text, ls)) return f;
  return std::nullopt;
}

bool is_closing_fence(std::string_view line, const Fence& f) {
  line = trim(line);
  return line.size() >= f.len && std::all_of(line.begin(), line.end(), [&](char c) { return c == f.ch; });
}

// Reads the fenced block opened by `f`; returns the position after it.
std::size_t read_fence(std::string_view text, const Fence& f, CodeBlock& b) {
  b.style = CodeBlock::Style::fenced;
  b.offset = f.start;
  std::string_view info = f.info;
  std::size_t sp = 0;
  while (sp < info.size() && !is_space(info[sp])) ++sp;
  b.info = std::string(info);
  b.tag = lower(info.substr(0, sp));
  b.name = std::string(trim(info.substr(sp)));
  b.closed = false;
  std::size_t ls = f.content_start, content_end = text.size(), after = text.size();
  for (; ls < text.size(); ls = next_line(text, ls)) {
    std::size_t le = line_end(text, ls);
    if (is_closing_fence(text.substr(ls, le - ls), f)) {
      b.closed = true;
      content_end = ls;
      after = le < text.size() ? le + 1 : le;
      break;
    }
  }
  // Remove the opener's indentation from every content line (CommonMark).
  std::string out;
  for (std::size_t p = f.content_start; p < content_end;) {
    std::size_t e = std::min(next_line(text, p), content_end);
    std::size_t skip = 0;
    while (skip < f.indent && p + skip < e && text[p + skip] == ' ') ++skip;
    out.append(text.substr(p + skip, e - p - skip));
    p = e;
  }
  if (!b.closed && !out.empty() && out.back() != '\n') out.push_back('\n');
  b.content = std::move(out);
  return after;
}

// ---------------------------------------------------------------------------
// Tags

constexpr std::array<std::string_view, 10> kTags = {
    "file", "cuda_file", "header_file", "cpp_file", "source",
    "launch_plan", "call_plan", "plan", "params", "description"};

struct Tag {
  std::size_t start = 0;      // the '<'
  std::size_t body_start = 0; // after the '>'
  std::string name;
  std::string attr_name;      // name="..." (or path=, filename=)
  bool self_closing = false;
};

std::string attribute(std::string_view attrs, std::string_view key) {
  std::size_t p = 0;
  while ((p = find_ci(attrs, key, p)) != npos) {
    bool word_start = p == 0 || is_space(attrs[p - 1]);
    std::size_t q = p + key.size();
    while (q < attrs.size() && is_space(attrs[q])) ++q;
    if (!word_start || q >= attrs.size() || attrs[q] != '=') {
      p += key.size();
      continue;
    }
    ++q;
    while (q < attrs.size() && is_space(attrs[q])) ++q;
    if (q >= attrs.size()) return {};
    if (attrs[q] == '"' || attrs[q] == '\'') {
      std::size_t e = attrs.find(attrs[q], q + 1);
      return std::string(attrs.substr(q + 1, (e == npos ? attrs.size() : e) - q - 1));
    }
    std::size_t e = q;
    while (e < attrs.size() && !is_space(attrs[e]) && attrs[e] != '/' && attrs[e] != '>') ++e;
    return std::string(attrs.substr(q, e - q));
  }
  return {};
}

std::optional<Tag> find_tag(std::string_view text, std::size_t from) {
  for (std::size_t p = text.find('<', from); p != npos; p = text.find('<', p + 1)) {
    for (std::string_view name : kTags) {
      if (!starts_with_ci(text.substr(p + 1), name)) continue;
      std::size_t after_name = p + 1 + name.size();
      if (after_name >= text.size()) continue;
      char c = text[after_name];
      if (c != '>' && c != '/' && !is_space(c)) continue;
      std::size_t gt = text.find('>', after_name);
      if (gt == npos) continue;
      std::string_view attrs = text.substr(after_name, gt - after_name);
      if (attrs.find('<') != npos || attrs.find('\n') != npos) continue;  // prose, not a tag
      Tag t;
      t.start = p;
      t.body_start = gt + 1;
      t.name = std::string(name);
      t.self_closing = !attrs.empty() && attrs.back() == '/';
      for (std::string_view key : {"name", "path", "filename"}) {
        t.attr_name = attribute(attrs, key);
        if (!t.attr_name.empty()) break;
      }
      return t;
    }
  }
  return std::nullopt;
}

// Leading blank lines and trailing whitespace removed; a final newline kept
// for code, so tagged and fenced sources look alike.
std::string tidy_tagged(std::string_view s) {
  std::size_t p = 0;
  for (;;) {
    std::size_t e = next_line(s, p);
    if (e >= s.size() || !trim(s.substr(p, e - p)).empty()) break;
    p = e;
  }
  s.remove_prefix(std::min(p, s.size()));
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  std::string out(s);
  if (!out.empty()) out.push_back('\n');
  return out;
}

std::string unwrap_tagged_content(std::string_view body) {
  std::string_view t = trim(body);
  if (starts_with_ci(t, "<![CDATA[")) {
    t.remove_prefix(9);
    std::size_t e = t.rfind("]]>");
    if (e != npos) t = t.substr(0, e);
    body = t;
  }
  // A tagged block whose whole content is one fenced block: keep the inside.
  std::string_view inner = trim(body);
  if (auto f = fence_at(inner, 0)) {
    CodeBlock fb;
    std::size_t after = read_fence(inner, *f, fb);
    if (fb.closed && trim(inner.substr(after)).empty()) return tidy_tagged(fb.content);
  }
  return tidy_tagged(body);
}

}  // namespace

std::vector<CodeBlock> extract_code_blocks(std::string_view text) {
  std::vector<CodeBlock> blocks;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto f = find_fence(text, pos);
    auto t = find_tag(text, pos);
    if (!f && !t) break;
    CodeBlock b;
    if (f && (!t || f->start <= t->start)) {
      pos = read_fence(text, *f, b);
      blocks.push_back(std::move(b));
      continue;
    }
    if (t->self_closing) {
      pos = t->body_start;
      continue;
    }
    std::string close = "</" + t->name;
    std::size_t c = t->body_start;
    for (;;) {
      c = find_ci(text, close, c);
      if (c == npos) break;
      std::size_t q = c + close.size();
      while (q < text.size() && is_space(text[q])) ++q;
      if (q < text.size() && text[q] == '>') break;
      c += close.size();
    }
    b.style = CodeBlock::Style::tagged;
    b.tag = t->name;
    b.name = t->attr_name;
    b.offset = t->start;
    if (c == npos) {
      // An unclosed tag followed by fenced blocks is a mention in prose;
      // one at the end of the answer is a block that was cut off.
      if (find_fence(text, t->body_start)) {
        pos = t->body_start;
        continue;
      }
      b.closed = false;
      b.content = unwrap_tagged_content(text.substr(t->body_start));
      blocks.push_back(std::move(b));
      break;
    }
    b.content = unwrap_tagged_content(text.substr(t->body_start, c - t->body_start));
    blocks.push_back(std::move(b));
    pos = text.find('>', c) + 1;
  }
  return blocks;
}

// ---------------------------------------------------------------------------
// parse_candidate

namespace {

bool is_source_lang(std::string_view lang) {
  static constexpr std::array<std::string_view, 14> kLangs = {
      "cuda", "cu", "cuh", "c++", "cpp", "cxx", "cc", "c", "h", "hpp", "cuda-c", "cuda-c++", "cudacpp", "cplusplus"};
  return std::find(kLangs.begin(), kLangs.end(), lang) != kLangs.end();
}

bool has_source_extension(std::string_view name) {
  std::size_t dot = name.rfind('.');
  if (dot == npos || dot == 0) return false;
  std::string ext = lower(name.substr(dot + 1));
  for (std::string_view e : {"cu", "cuh", "cpp", "cc", "cxx", "c", "h", "hpp", "hxx", "inl"})
    if (ext == e) return true;
  return false;
}

bool is_json_lang(std::string_view lang) { return lang == "json" || lang == "jsonc" || lang == "json5"; }

// "launch plan", "launch-plan", "Launch_Plan" -> "launch_plan".
std::string label_of(std::string_view name) {
  std::string s = lower(trim(name));
  for (char& c : s)
    if (c == ' ' || c == '-') c = '_';
  return s;
}

// A file name from a fenced info string's tail: "kernel.cu",
// title="kernel.cu", filename=kernel.cu, {file=kernel.cu}.
std::string file_name_from_info(std::string_view rest) {
  std::size_t p = 0;
  while (p < rest.size()) {
    while (p < rest.size() && is_space(rest[p])) ++p;
    std::size_t e = p;
    while (e < rest.size() && !is_space(rest[e])) ++e;
    std::string_view tok = rest.substr(p, e - p);
    p = e;
    if (auto eq = tok.find('='); eq != npos) tok.remove_prefix(eq + 1);
    while (!tok.empty() && (tok.front() == '"' || tok.front() == '\'' || tok.front() == '{')) tok.remove_prefix(1);
    while (!tok.empty() && (tok.back() == '"' || tok.back() == '\'' || tok.back() == '}')) tok.remove_suffix(1);
    if (!tok.empty() && (tok.find('.') != npos || tok.find('/') != npos)) return std::string(tok);
  }
  return {};
}

enum class Role { source, plan, params, description, other_json, other };

struct Classified {
  const CodeBlock* block;
  Role role;
  std::string file_name;  // sources
};

Classified classify(const CodeBlock& b) {
  if (b.style == CodeBlock::Style::tagged) {
    if (b.tag == "description") return {&b, Role::description, {}};
    if (b.tag == "params") return {&b, Role::params, {}};
    if (b.tag == "launch_plan" || b.tag == "call_plan" || b.tag == "plan") return {&b, Role::plan, {}};
    return {&b, Role::source, b.name};
  }
  std::string lang = b.tag;
  std::string_view rest = b.name;
  // "cuda:kernel.cu"
  if (auto colon = lang.find(':'); colon != npos) {
    std::string tail = lang.substr(colon + 1);
    lang.resize(colon);
    if (is_source_lang(lang)) return {&b, Role::source, tail};
  }
  while (!lang.empty() && (lang.front() == '{' || lang.front() == '.')) lang.erase(0, 1);
  if (is_source_lang(lang)) return {&b, Role::source, file_name_from_info(rest)};
  if (has_source_extension(lang)) {
    std::string_view raw = b.info;
    return {&b, Role::source, std::string(raw.substr(0, std::min(raw.size(), raw.find_first_of(" \t"))))};
  }
  if (std::string label = label_of(lang); label == "launch_plan" || label == "call_plan") return {&b, Role::plan, {}};
  if (is_json_lang(lang)) {
    std::string label = label_of(rest);
    if (label == "launch_plan" || label == "call_plan" || label == "plan") return {&b, Role::plan, {}};
    if (label == "params") return {&b, Role::params, {}};
    return {&b, Role::other_json, {}};
  }
  if (lang.empty()) {
    // An unlabelled fence: JSON if it looks like an object, else maybe code.
    if (!trim(b.content).empty() && trim(b.content).front() == '{') return {&b, Role::other_json, {}};
  }
  return {&b, Role::other, {}};
}

[[noreturn]] void fail(const std::string& msg) { throw Error(Status::parse, msg); }

const char* plan_word(Language lang) { return lang == Language::cuda ? "launch plan" : "call plan"; }
const char* plan_label(Language lang) { return lang == Language::cuda ? "launch_plan" : "call_plan"; }
const char* plan_key(Language lang) { return lang == Language::cuda ? "kernels" : "calls"; }

std::string block_label(const CodeBlock& b) {
  if (b.style == CodeBlock::Style::tagged)
    return b.name.empty() ? fmt::format("<{}>", b.tag) : fmt::format("<{} name=\"{}\">", b.tag, b.name);
  if (b.tag.empty()) return "an unlabelled ``` block";
  return b.name.empty() ? fmt::format("```{}", b.tag) : fmt::format("```{} {}", b.tag, b.name);
}

Json parse_json_block(const CodeBlock& b, const std::string& what) {
  if (!b.closed)
    fail(fmt::format("The {} block ({}) is never closed: the answer looks cut off. "
                     "Write the complete block and close it.",
                     what, block_label(b)));
  if (std::string deep = json_depth_problem(b.content); !deep.empty()) fail(fmt::format("The {}: {}.", what, deep));
  std::string err;
  auto j = Json::try_parse(trim(b.content), &err);
  if (!j)
    fail(fmt::format("The {} is not valid JSON: {}. The block was:\n{}", what, err, excerpt(b.content)));
  if (!j->is_object())
    fail(fmt::format("The {} must be a JSON object, but the block holds a JSON {}.", what,
                     json_type_name(j->type())));
  return std::move(*j);
}

Json checked_params(Json params, const std::string& where) {
  // Accept {"params": {...}} for a separate block as well as the bare object.
  if (params.is_object() && params.size() == 1 && params.contains("params")) params = params.at("params");
  if (!params.is_object())
    fail(fmt::format("The tunable parameters ({}) must be a JSON object with \"space\" "
                     "(and optionally \"constraints\").",
                     where));
  // The declarations are checked now; the values when the candidate is
  // evaluated, as they always were (an answer is not refused for them).
  Json declarations = params;
  declarations.erase("values");
  declarations.erase("per_workload");
  try {
    Params::from_json(declarations);
  } catch (const Error& e) {
    fail(fmt::format("The tunable parameters ({}) are invalid: {}", where, e.what()));
  }
  return params;
}

std::string leading_paragraph(std::string_view answer, std::size_t end) {
  std::string_view head = trim(answer.substr(0, end));
  std::size_t blank = npos;
  for (std::size_t p = 0; p < head.size(); p = next_line(head, p)) {
    std::size_t e = line_end(head, p);
    if (trim(head.substr(p, e - p)).empty()) {
      blank = p;
      break;
    }
  }
  std::string_view para = trim(head.substr(0, blank == npos ? head.size() : blank));
  if (starts_with_ci(para, "description:")) para = trim(para.substr(12));
  std::string out(para.substr(0, std::min<std::size_t>(para.size(), 2000)));
  return out;
}

}  // namespace

namespace {

bool is_python_lang(std::string_view lang) { return lang == "python" || lang == "py" || lang == "python3" || lang == "triton"; }

// Python has no hexadecimal float literals (0x1.8p3): each becomes its exact
// decimal value (17 significant digits round-trip a double). K-Search mapped
// three known constants and every other one to 1.0; this keeps the value.
std::string rewrite_hex_floats(std::string_view code) {
  std::string out;
  out.reserve(code.size());
  std::size_t i = 0;
  auto hexdig = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  while (i < code.size()) {
    const bool starts = code[i] == '0' && i + 1 < code.size() && (code[i + 1] == 'x' || code[i + 1] == 'X') &&
                        (i == 0 || !(std::isalnum(static_cast<unsigned char>(code[i - 1])) || code[i - 1] == '_' ||
                                     code[i - 1] == '.'));
    if (starts) {
      std::size_t j = i + 2, digits = 0;
      while (j < code.size() && hexdig(code[j])) ++j, ++digits;
      bool dot = false;
      if (j < code.size() && code[j] == '.') {
        dot = true;
        ++j;
        while (j < code.size() && hexdig(code[j])) ++j, ++digits;
      }
      if (digits > 0 && j < code.size() && (code[j] == 'p' || code[j] == 'P')) {
        std::size_t k = j + 1;
        if (k < code.size() && (code[k] == '+' || code[k] == '-')) ++k;
        std::size_t e = k;
        while (e < code.size() && std::isdigit(static_cast<unsigned char>(code[e]))) ++e;
        if (e > k) {
          const std::string literal(code.substr(i, e - i));
          const double v = std::strtod(literal.c_str(), nullptr);
          // Always a float literal (8.0, not 8: torch.full(..., 0x1p3) stays floating).
          std::string text = fmt::format("{:.17g}", v);
          if (std::isinf(v)) text = v > 0 ? "float('inf')" : "float('-inf')";
          else if (text.find_first_of(".e") == std::string::npos) text += ".0";
          out += text;
          i = e;
          continue;
        }
      }
      (void)dot;
    }
    out.push_back(code[i++]);
  }
  return out;
}

// A Python answer: the code of the first ```python block (or of the only
// unlabelled one, or the whole answer when it has no fence and reads as
// code), plus further blocks that name a .py file.
Solution parse_python_candidate(std::string_view answer, Language language) {
  auto blocks = extract_code_blocks(answer);
  Solution s;
  s.language = language;
  std::vector<const CodeBlock*> code;
  for (const auto& b : blocks)
    if (b.style == CodeBlock::Style::fenced && is_python_lang(b.tag)) code.push_back(&b);
  if (code.empty())
    for (const auto& b : blocks)
      if (b.style == CodeBlock::Style::fenced && b.tag.empty() && !trim(b.content).empty()) {
        code.push_back(&b);
        break;
      }
  const std::string main_name = "main.py";
  if (code.empty()) {
    // No fence at all: a bare module (a submission file) when a line starts
    // a definition or an import; prose otherwise.
    const std::string_view body = trim(answer);
    bool looks_like_code = false;
    for (std::size_t p = 0; blocks.empty() && p < body.size() && !looks_like_code; p = next_line(body, p))
      for (std::string_view start : {"import ", "from ", "def ", "class ", "@"})
        looks_like_code = looks_like_code || body.substr(p, start.size()) == start;
    if (!looks_like_code)
      fail("The answer has no Python code block. Put the whole module in one fenced block: ```python ... ```.");
    s.sources.push_back({main_name, rewrite_hex_floats(body) + "\n"});
  }
  for (const CodeBlock* b : code) {
    if (!b->closed)
      fail(fmt::format("The Python block {} is never closed: the answer looks cut off. Write the complete module "
                       "and close the block.",
                       block_label(*b)));
    if (trim(b->content).empty()) fail(fmt::format("The Python block {} is empty.", block_label(*b)));
    std::string path = util::terminal_safe(std::string(trim(b->name)));
    if (path.find(' ') != npos || path.size() < 4 || path.compare(path.size() - 3, 3, ".py") != 0) path.clear();
    if (path.empty()) {
      // Unnamed blocks after the first are the model's revisions of the module.
      path = main_name;
    }
    auto same = std::find_if(s.sources.begin(), s.sources.end(), [&](const SourceFile& f) { return f.path == path; });
    if (same != s.sources.end()) same->content = rewrite_hex_floats(b->content);
    else s.sources.push_back({path, rewrite_hex_floats(b->content)});
  }
  for (const auto& b : blocks)
    if (b.style == CodeBlock::Style::tagged && b.tag == "description") s.description = std::string(trim(b.content));
  if (s.description.empty() && !blocks.empty()) s.description = leading_paragraph(answer, blocks.front().offset);
  s.finalize();
  return s;
}

}  // namespace

Solution parse_candidate(std::string_view answer, Language language) {
  if (language_is_python(language)) return parse_python_candidate(answer, language);
  auto blocks = extract_code_blocks(answer);
  std::vector<Classified> items;
  items.reserve(blocks.size());
  for (const auto& b : blocks) items.push_back(classify(b));

  Solution s;
  s.language = language;

  // Sources. Unlabelled fences count as code only when nothing is labelled.
  std::vector<const Classified*> sources;
  for (const auto& c : items)
    if (c.role == Role::source) sources.push_back(&c);
  if (sources.empty())
    for (const auto& c : items)
      if (c.role == Role::other && c.block->tag.empty() && !trim(c.block->content).empty())
        sources.push_back(&c);
  if (sources.empty()) {
    std::string found;
    for (const auto& b : blocks) found += (found.empty() ? "" : ", ") + block_label(b);
    fail(fmt::format(
        "The answer has no source code block. Put each source file in a fenced block such as "
        "```{} {} ... ``` {}.",
        language == Language::cuda ? "cuda" : "cpp", language == Language::cuda ? "kernel.cu" : "kernel.cpp",
        found.empty() ? "(the answer has no code blocks at all)" : "(found only: " + found + ")"));
  }
  const char* ext = language == Language::cuda ? "cu" : "cpp";
  int unnamed = 0;
  for (const auto* c : sources) {
    const CodeBlock& b = *c->block;
    if (!b.closed)
      fail(fmt::format("The source block {} is never closed: the answer looks cut off. "
                       "Write the complete file and close the block.",
                       block_label(b)));
    if (trim(b.content).empty()) fail(fmt::format("The source block {} is empty.", block_label(b)));
    // A plain name: valid UTF-8 (JSON stores it, and the solution id hashes
    // it: a resume must read back the same name) without control characters.
    std::string path = util::terminal_safe(c->file_name);
    if (path.empty()) path = ++unnamed == 1 ? fmt::format("kernel.{}", ext) : fmt::format("kernel_{}.{}", unnamed, ext);
    // The same file given twice: the later block is the model's revision.
    auto same = std::find_if(s.sources.begin(), s.sources.end(), [&](const SourceFile& f) { return f.path == path; });
    if (same != s.sources.end()) same->content = b.content;
    else s.sources.push_back({path, b.content});
  }

  // The plan: labelled blocks first, then unlabelled JSON that looks like one.
  const CodeBlock* plan_block = nullptr;
  for (const auto& c : items)
    if (c.role == Role::plan) plan_block = c.block;
  std::vector<const CodeBlock*> loose_json;
  for (const auto& c : items)
    if (c.role == Role::other_json) loose_json.push_back(c.block);
  const CodeBlock* params_block = nullptr;
  for (const auto& c : items)
    if (c.role == Role::params) params_block = c.block;
  for (const auto* b : loose_json)
    if (std::string deep = json_depth_problem(b->content); !deep.empty()) fail(deep + ".");
  if (!plan_block) {
    for (const auto* b : loose_json) {
      auto j = Json::try_parse(trim(b->content));
      if (j && j->is_object() && (j->contains("kernels") || j->contains("calls") || j->contains("variants")))
        plan_block = b;
      else if (j && j->is_object() && j->contains("space") && !params_block)
        params_block = b;
    }
  }
  if (!plan_block) {
    // One unlabelled JSON block that does not parse is most likely the plan.
    for (const auto* b : loose_json)
      if (!Json::try_parse(trim(b->content))) {
        plan_block = b;
        break;
      }
  }
  if (!plan_block)
    fail(fmt::format("The answer has no {0}. After the source, add a fenced block ```json {1} holding "
                     "{{\"{2}\": [...]}} as described in the answer format.",
                     plan_word(language), plan_label(language), plan_key(language)));
  Json plan = parse_json_block(*plan_block, plan_word(language));

  Json params;
  if (const Json* inner = plan.find("params")) {
    if (params_block)
      fail("Tunable parameters are declared twice: inside the plan and in a separate params block. "
           "Declare them once.");
    params = checked_params(*inner, "inside the plan");
    plan.erase("params");
  }
  if (params_block) params = checked_params(parse_json_block(*params_block, "params block"), "params block");
  // The codec's message names the field ("launch plan: kernels[0]: \"grid\"
  // is missing"): the model reads it as it is.
  try {
    s.launch_plan = LaunchPlan::from_json(plan, language);
  } catch (const Error& e) {
    fail(e.what());
  }
  s.params = Params::as_written(params);

  for (const auto& c : items)
    if (c.role == Role::description) s.description = std::string(trim(c.block->content));
  if (s.description.empty() && !blocks.empty()) s.description = leading_paragraph(answer, blocks.front().offset);

  s.finalize();
  return s;
}

// ---------------------------------------------------------------------------
// format_candidate

namespace {

// A fence longer than any backtick run that starts a line of `content`.
std::string fence_for(std::string_view content) {
  std::size_t longest = 0;
  for (std::size_t p = 0; p < content.size(); p = next_line(content, p)) {
    std::size_t i = p;
    while (i < content.size() && (content[i] == ' ' || content[i] == '\t')) ++i;
    std::size_t n = 0;
    while (i + n < content.size() && content[i + n] == '`') ++n;
    longest = std::max(longest, n);
  }
  return std::string(std::max<std::size_t>(3, longest + 1), '`');
}

void append_block(std::string& out, std::string_view info, std::string_view content) {
  std::string fence = fence_for(content);
  out += fmt::format("{}{}\n{}", fence, info, content);
  if (content.empty() || content.back() != '\n') out += '\n';
  out += fence;
  out += "\n\n";
}

}  // namespace

std::string format_candidate(const Solution& solution) {
  std::string out;
  std::string_view desc = trim(solution.description);
  if (!desc.empty()) {
    // A one-paragraph description reads naturally as prose; anything longer
    // goes in a tag so the parser gives it back whole.
    bool one_paragraph = desc.find("\n\n") == npos && desc.find("\n\r\n") == npos;
    if (one_paragraph) out += fmt::format("{}\n\n", desc);
    else out += fmt::format("<description>\n{}\n</description>\n\n", desc);
  }
  if (language_is_python(solution.language)) {
    for (const auto& f : solution.sources) append_block(out, fmt::format("python {}", f.path), f.content);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    out += '\n';
    return out;
  }
  const char* lang = solution.language == Language::cuda ? "cuda" : "cpp";
  for (const auto& f : solution.sources) append_block(out, fmt::format("{} {}", lang, f.path), f.content);
  append_block(out, fmt::format("json {}", plan_label(solution.language)), solution.launch_plan.to_json().dump(2) + "\n");
  if (const Json p = solution.params.to_json(); !p.is_null()) append_block(out, "json params", p.dump(2) + "\n");
  while (!out.empty() && out.back() == '\n') out.pop_back();
  out += '\n';
  return out;
}

std::optional<Solution> read_candidate(std::string_view answer, Language language, std::string* why) {
  try {
    return parse_candidate(answer, language);
  } catch (const Error& e) {
    *why = e.what();
  } catch (const std::exception& e) {
    *why = std::string("the answer could not be read: ") + e.what();
  }
  return std::nullopt;
}

}  // namespace ks::core
