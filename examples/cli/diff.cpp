#include "diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ks::cli {

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (p < s.size()) {
    std::size_t e = s.find('\n', p);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

struct Op {
  char kind;  // ' ', '-', '+'
  std::size_t a, b;  // line index in from / to (the one that applies)
};

}  // namespace

std::string unified_diff(const std::string& from, const std::string& to, const std::string& from_name,
                         const std::string& to_name, int context) {
  if (from == to) return "";
  const auto A = lines_of(from), B = lines_of(to);
  const std::size_t n = A.size(), m = B.size();
  if (static_cast<std::uint64_t>(n + 1) * (m + 1) > 20'000'000)
    return fmt::format("--- {}\n+++ {}\n(the files differ: {} and {} lines, too long to compare here)\n", from_name,
                       to_name, n, m);
  // Longest common subsequence, from the ends, so the walk below goes forward.
  std::vector<std::uint32_t> lcs((n + 1) * (m + 1), 0);
  auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& { return lcs[i * (m + 1) + j]; };
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;)
      at(i, j) = A[i] == B[j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
  std::vector<Op> ops;
  std::size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && A[i] == B[j]) ops.push_back({' ', i++, j++});
    else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) ops.push_back({'-', i++, j});
    else ops.push_back({'+', i, j++});
  }
  std::string out = fmt::format("--- {}\n+++ {}\n", from_name, to_name);
  // Hunks: runs of changes with up to `context` equal lines around them,
  // merged when their contexts touch.
  std::size_t k = 0;
  const std::size_t ctx = static_cast<std::size_t>(std::max(0, context));
  while (k < ops.size()) {
    while (k < ops.size() && ops[k].kind == ' ') ++k;
    if (k == ops.size()) break;
    std::size_t start = k >= ctx ? k - ctx : 0, end = k;
    for (;;) {
      while (end < ops.size() && ops[end].kind != ' ') ++end;
      std::size_t eq = end;
      while (eq < ops.size() && ops[eq].kind == ' ') ++eq;
      if (eq < ops.size() && eq - end <= 2 * ctx) {
        end = eq;
        continue;
      }
      end = std::min(ops.size(), end + ctx);
      break;
    }
    std::size_t a0 = ops[start].a, b0 = ops[start].b, a_len = 0, b_len = 0;
    std::string body;
    for (std::size_t q = start; q < end; ++q) {
      const Op& o = ops[q];
      if (o.kind != '+') ++a_len;
      if (o.kind != '-') ++b_len;
      body += o.kind;
      body += o.kind == '+' ? B[o.b] : A[o.a];
      body += '\n';
    }
    out += fmt::format("@@ -{},{} +{},{} @@\n", a_len ? a0 + 1 : a0, a_len, b_len ? b0 + 1 : b0, b_len) + body;
    k = end;
  }
  return out;
}

}  // namespace ks::cli
