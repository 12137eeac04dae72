#include "eval/include_check.hpp"

#include <fmt/format.h>

#include <cctype>
#include <string_view>

namespace ks::eval {
namespace {

constexpr std::string_view kAdvice =
    "include your own files by the relative names they have in your answer, and toolkit or standard "
    "headers by name (e.g. <cuda_fp16.h>, <cstdint>)";

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The text as the preprocessor's directive scanner sees it: line splices
// removed and comments replaced by a space, string and character literals
// kept. `line_of[i]` is the 1-based source line of output character i.
struct Cleaned {
  std::string text;
  std::vector<int> line_of;
};

Cleaned clean(std::string_view in) {
  Cleaned c;
  c.text.reserve(in.size());
  c.line_of.reserve(in.size());
  int line = 1;
  enum { code, line_comment, block_comment, str, chr } state = code;
  for (std::size_t i = 0; i < in.size(); ++i) {
    char ch = in[i];
    // A backslash before a newline joins the lines, in every state.
    if (ch == '\\' && i + 1 < in.size() && (in[i + 1] == '\n' || (in[i + 1] == '\r' && i + 2 < in.size() && in[i + 2] == '\n'))) {
      i += in[i + 1] == '\r' ? 2 : 1;
      ++line;
      continue;
    }
    auto put = [&](char x) {
      c.text.push_back(x);
      c.line_of.push_back(line);
    };
    switch (state) {
      case code:
        if (ch == '/' && i + 1 < in.size() && in[i + 1] == '/') {
          state = line_comment;
          put(' ');
          ++i;
        } else if (ch == '/' && i + 1 < in.size() && in[i + 1] == '*') {
          state = block_comment;
          put(' ');
          ++i;
        } else {
          if (ch == '"') state = str;
          else if (ch == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(in[i - 1])))) state = chr;  // not a digit separator
          put(ch);
        }
        break;
      case line_comment:
        if (ch == '\n') {
          state = code;
          put('\n');
        }
        break;
      case block_comment:
        if (ch == '*' && i + 1 < in.size() && in[i + 1] == '/') {
          state = code;
          ++i;
        } else if (ch == '\n') {
          put('\n');  // keep line numbers of later directives right
        }
        break;
      case str:
      case chr:
        put(ch);
        if (ch == '\\' && i + 1 < in.size()) {
          put(in[++i]);
        } else if ((state == str && ch == '"') || (state == chr && ch == '\'') || ch == '\n') {
          state = code;
        }
        break;
    }
    if (ch == '\n') ++line;
  }
  return c;
}

// Why a literal header name may reach outside, or "" when it cannot.
std::string path_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.front() == '/' || name.front() == '\\') return "names an absolute path, which reaches outside your sources";
  if (name.front() == '~') return "names a home folder, which reaches outside your sources";
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find_first_of("/\\", start);
    if (end == std::string_view::npos) end = name.size();
    if (name.substr(start, end - start) == "..") return "climbs out of the include folders with \"..\"";
    start = end + 1;
  }
  return {};
}

std::string_view skip_space(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\f' || s.front() == '\v' || s.front() == '\r'))
    s.remove_prefix(1);
  return s;
}

// Checks the operand of a file-naming directive: "name" or <name>.
std::string check_operand(std::string_view directive, std::string_view rest) {
  rest = skip_space(rest);
  if (rest.empty() || (rest.front() != '"' && rest.front() != '<'))
    return fmt::format("{} must name its file literally (\"name\" or <name>), not through a macro", directive);
  const char close = rest.front() == '"' ? '"' : '>';
  auto end = rest.find(close, 1);
  if (end == std::string_view::npos) return fmt::format("{} has an unterminated file name", directive);
  std::string_view name = rest.substr(1, end - 1);
  std::string why = path_problem(name);
  if (why.empty()) return {};
  return fmt::format("{} {}{}{} {}", directive, rest.front(), name, close, why);
}

std::string check_file(const SourceFile& f) {
  Cleaned c = clean(f.content);
  const std::string_view t = c.text;
  auto where = [&](std::size_t pos) { return fmt::format("{}:{}", f.path, c.line_of.empty() ? 1 : c.line_of[std::min(pos, c.line_of.size() - 1)]); };

  // Directives: at the start of a line, '#' or the digraph "%:".
  std::size_t pos = 0;
  while (pos < t.size()) {
    std::size_t eol = t.find('\n', pos);
    if (eol == std::string_view::npos) eol = t.size();
    std::string_view ln = skip_space(t.substr(pos, eol - pos));
    const std::size_t hash = !ln.empty() && ln.front() == '#' ? 1 : ln.substr(0, 2) == "%:" ? 2 : 0;
    if (hash > 0) {
      std::string_view rest = skip_space(ln.substr(hash));
      std::size_t n = 0;
      while (n < rest.size() && is_ident(rest[n])) ++n;
      std::string_view name = rest.substr(0, n);
      std::string problem;
      if (name == "include" || name == "include_next" || name == "import" || name == "embed") {
        problem = check_operand(fmt::format("#{}", name), rest.substr(n));
      } else if (name == "pragma") {
        std::string_view p = skip_space(rest.substr(n));
        if (p.rfind("GCC", 0) == 0) {
          p = skip_space(p.substr(3));
          if (p.rfind("dependency", 0) == 0) problem = check_operand("#pragma GCC dependency", p.substr(10));
        }
      }
      if (!problem.empty()) return fmt::format("{}: {}", where(pos), problem);
    }
    pos = eol + 1;
  }

  // __has_include("...") anywhere, #if lines included.
  for (std::string_view key : {std::string_view("__has_include_next"), std::string_view("__has_include")}) {
    for (std::size_t p = t.find(key); p != std::string_view::npos; p = t.find(key, p + key.size())) {
      if ((p > 0 && is_ident(t[p - 1])) || (p + key.size() < t.size() && is_ident(t[p + key.size()]))) continue;
      std::string_view rest = skip_space(t.substr(p + key.size()));
      if (rest.empty() || rest.front() != '(') continue;
      std::string problem = check_operand(key, rest.substr(1));
      if (!problem.empty()) return fmt::format("{}: {}", where(p), problem);
    }
  }

  // The assembler reads files too: asm(".incbin \"/etc/passwd\"") embeds
  // one into the object. A member call such as `x.include()` is not meant.
  for (std::string_view key : {std::string_view(".incbin"), std::string_view(".include")}) {
    for (std::size_t p = t.find(key); p != std::string_view::npos; p = t.find(key, p + 1)) {
      if (p + key.size() < t.size() && is_ident(t[p + key.size()])) continue;
      if (p > 0 && (is_ident(t[p - 1]) || t[p - 1] == ')' || t[p - 1] == ']')) continue;
      return fmt::format("{}: the assembler directive {} is not allowed in a candidate (it reads a file into the "
                         "program); inline assembly may not include files",
                         where(p), key);
    }
  }
  return {};
}

}  // namespace

std::string check_includes(const std::vector<SourceFile>& files) {
  for (const auto& f : files) {
    std::string problem = check_file(f);
    if (!problem.empty()) return fmt::format("refused before compiling: {}; {}", problem, kAdvice);
  }
  return {};
}

}  // namespace ks::eval
