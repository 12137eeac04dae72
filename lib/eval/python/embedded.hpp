// Files compiled into the library (CMakeLists.txt embeds them).
#pragma once

#include <string_view>

namespace ks::eval::python::embedded {

extern const std::string_view candidate_runner_py;  // candidate_runner.py

}  // namespace ks::eval::python::embedded
