#include "tasks/gpumode/gpumode.hpp"

#include <mutex>

#include "ksearch/tasks.hpp"
#include "tasks/gpumode/trimul.hpp"

namespace ks::tasks::gpumode {

void register_gpumode_suite() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_builtin_task(std::string(kTrimulTaskName), std::string(kTrimulDescription),
                          [] { return make_trimul_task(); });
    register_builtin_task(std::string(kTrimulUpstreamTaskName), std::string(kTrimulUpstreamDescription),
                          [] { return make_trimul_upstream_task(); });
  });
}

}  // namespace ks::tasks::gpumode
