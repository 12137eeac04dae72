// Files compiled into the library (CMakeLists.txt embeds them).
#pragma once

#include <string_view>

namespace ks::core::embedded {

extern const std::string_view fib_extension_loader_py;  // fib_extension_loader.py

}  // namespace ks::core::embedded
