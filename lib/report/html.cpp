#include "report/html.hpp"

#include "report/assets.hpp"

#include <fmt/format.h>

namespace ks::report {

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_json(const Json& j) {
  std::string s = j.dump();
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (c == '\xE2' && i + 2 < s.size() && s[i + 1] == '\x80' && (s[i + 2] == '\xA8' || s[i + 2] == '\xA9')) {
      out += s[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else out += c;
  }
  return out;
}

std::string fill(const std::string& page, const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t open = page.find("{{", pos);
    if (open == std::string::npos) break;
    std::size_t close = page.find("}}", open + 2);
    if (close == std::string::npos) break;
    std::string key = page.substr(open + 2, close - open - 2);
    const std::string* value = nullptr;
    for (const auto& [k, v] : values)
      if (k == key) value = &v;
    out.append(page, pos, open - pos);
    if (value) out += *value;
    else out.append(page, open, close + 2 - open);
    pos = close + 2;
  }
  out.append(page, pos, std::string::npos);
  return out;
}

std::string html_page(std::string_view title, const std::string& body) {
  return fill(std::string(assets::page_shell),
              {{"TITLE", esc(title)}, {"CSS", std::string(assets::report_css)}, {"BODY", body}});
}

std::string ms(double v) { return v > 0 ? fmt::format("{:.4g} ms", v) : "-"; }

}  // namespace ks::report
