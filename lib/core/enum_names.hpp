// Name tables of closed sets: one array per enum, indexed by the value. The
// table's length is checked against the enum's last value at compile time,
// so a value added without a name (or a name without a value) does not build.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace ks::core {

// enum_names<E::last>({"first", ..., "last"})
template <auto Last, std::size_t N>
constexpr std::array<std::string_view, N> enum_names(const char* const (&names)[N]) {
  static_assert(static_cast<std::size_t>(Last) + 1 == N, "one name per enum value, in the enum's order");
  std::array<std::string_view, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = names[i];
  return out;
}

template <typename E, std::size_t N>
const char* enum_name(const std::array<std::string_view, N>& names, E value) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i].data() : "?";  // the names are literals: NUL-terminated
}

template <typename E, std::size_t N>
std::optional<E> enum_value(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace ks::core
