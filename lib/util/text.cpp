#include "util/text.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ks::util {

std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n <= 1 || i + n > s.size()) return n == 1 ? 1 : 0;
  std::uint32_t cp = c & (0xFF >> (n + 1));
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static const std::uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_length[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::size_t append_utf8_or_replacement(std::string& out, std::string_view s, std::size_t i) {
  const std::size_t n = utf8_sequence(s, i);
  if (n == 0) {
    out += "\xEF\xBF\xBD";
    return 1;
  }
  out.append(s.substr(i, n));
  return n;
}

namespace {

// The C1 control U+0080..U+009F encoded in UTF-8 (C2 80..C2 9F), as its code.
int c1_at(std::string_view s, std::size_t i) {
  if (i + 1 < s.size() && static_cast<unsigned char>(s[i]) == 0xC2) {
    unsigned char c = static_cast<unsigned char>(s[i + 1]);
    if (c >= 0x80 && c <= 0x9F) return c;
  }
  return -1;
}

// The ESC form of a C1 control that opens a sequence (CSI, OSC, DCS, SOS,
// PM, APC), or 0 for one that stands alone.
char c1_kind(int c1) {
  switch (c1) {
    case 0x9B: return '[';
    case 0x9D: return ']';
    case 0x90: return 'P';
    case 0x98: return 'X';
    case 0x9E: return '^';
    case 0x9F: return '_';
    default: return 0;
  }
}

// Where the escape sequence introduced at s[i] (ESC, or the C1 form of CSI,
// OSC, DCS, SOS, PM, APC taking `intro` bytes) ends.
std::size_t skip_escape(std::string_view s, std::size_t i, char kind, std::size_t intro) {
  std::size_t p = i + intro;
  if (kind == '[') {  // CSI: parameter and intermediate bytes, then one final byte
    while (p < s.size() && static_cast<unsigned char>(s[p]) >= 0x20 && static_cast<unsigned char>(s[p]) <= 0x3F) ++p;
    while (p < s.size() && static_cast<unsigned char>(s[p]) >= 0x20 && static_cast<unsigned char>(s[p]) <= 0x2F) ++p;
    return p < s.size() && static_cast<unsigned char>(s[p]) >= 0x40 && static_cast<unsigned char>(s[p]) <= 0x7E ? p + 1
                                                                                                            : p;
  }
  if (kind == ']' || kind == 'P' || kind == 'X' || kind == '^' || kind == '_') {
    // A string ended by BEL or ST (ESC \ or its C1 form); unended, it runs to the end.
    for (; p < s.size(); ++p) {
      if (s[p] == '\a') return p + 1;
      if (s[p] == '\x1b' && p + 1 < s.size() && s[p + 1] == '\\') return p + 2;
      if (c1_at(s, p) == 0x9C) return p + 2;
    }
    return p;
  }
  // Other ESC forms (only ESC introduces them): intermediate bytes, then one final byte.
  p = i + 1;
  while (p < s.size() && static_cast<unsigned char>(s[p]) >= 0x20 && static_cast<unsigned char>(s[p]) <= 0x2F) ++p;
  return p < s.size() && static_cast<unsigned char>(s[p]) >= 0x30 && static_cast<unsigned char>(s[p]) <= 0x7E ? p + 1
                                                                                                          : p;
}

}  // namespace

std::string terminal_safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0x1B) {
      i = i + 1 < s.size() ? skip_escape(s, i, s[i + 1], 2) : i + 1;
      continue;
    }
    if (int c1 = c1_at(s, i); c1 >= 0) {
      const char kind = c1_kind(c1);
      i = kind ? skip_escape(s, i, kind, 2) : i + 2;
      continue;
    }
    if (c < 0x20 || c == 0x7F) {
      if (c == '\n' || c == '\t') out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    i += append_utf8_or_replacement(out, s, i);
  }
  return out;
}

namespace {
constexpr std::string_view kBase64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < in.size(); i += 3) {
    std::uint32_t v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<unsigned char>(in[i + 2]);
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kBase64[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kBase64[v & 63] : '=';
  }
  return out;
}

bool base64_decode(std::string_view text, std::string& out) {
  out.clear();
  if (text.size() % 4 != 0) return false;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t v = 0;
    int pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      std::size_t d = kBase64.find(c);
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
        d = 0;
      } else if (d == std::string_view::npos || pad > 0) {
        return false;
      }
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out += static_cast<char>((v >> 16) & 0xFF);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(v & 0xFF);
  }
  return true;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> closest_names(std::string_view typed, const std::vector<std::string>& known,
                                       std::size_t max) {
  if (typed.empty() || max == 0) return {};
  // A few edits: a third of the typed name, at least 1 and at most 3.
  const std::size_t allowed = std::clamp<std::size_t>(typed.size() / 3, 1, 3);
  const bool has_slash = typed.find('/') != std::string_view::npos;
  std::vector<std::pair<std::size_t, std::string>> scored;  // (distance, name); a part match counts as `allowed`
  for (const auto& name : known) {
    std::string_view n = name;
    std::size_t d = edit_distance(typed, n);
    if (!has_slash) {
      const auto slash = n.rfind('/');
      if (slash != std::string_view::npos) d = std::min(d, edit_distance(typed, n.substr(slash + 1)));
    }
    if (d > allowed && typed.size() >= 3 && n.find(typed) != std::string_view::npos) d = allowed;
    if (d <= allowed) scored.emplace_back(d, name);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [d, name] : scored) {
    if (out.size() == max) break;
    out.push_back(std::move(name));
  }
  return out;
}

}  // namespace ks::util
