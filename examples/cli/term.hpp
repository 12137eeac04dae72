// Human-readable output that may quote what a candidate or a model wrote
// (code, logs, actions, world-model notes, error messages): printed as
// ks::terminal_text gives it, so an escape sequence or a carriage return in
// it cannot rewrite the screen ("crashed" painted over with "passed").
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <utility>

#include "ksearch/io.hpp"

namespace ks::cli {

template <class... T>
void say(std::FILE* out, fmt::format_string<T...> format, T&&... args) {
  const std::string text = terminal_text(fmt::format(format, std::forward<T>(args)...));
  std::fwrite(text.data(), 1, text.size(), out);
}

template <class... T>
void say(fmt::format_string<T...> format, T&&... args) {
  say(stdout, format, std::forward<T>(args)...);
}

}  // namespace ks::cli
