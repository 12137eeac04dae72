// Files compiled into the library (CMakeLists.txt embeds them).
#pragma once

#include <string_view>

namespace ks::exporter::embedded {

extern const std::string_view ksearch_runtime_py;  // runtime/ksearch_runtime.py

}  // namespace ks::exporter::embedded
