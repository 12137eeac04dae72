// Registers the native KernelBench level-1 tasks.
#include <mutex>

#include "ksearch/tasks.hpp"
#include "tasks/kernelbench/level1.hpp"

namespace ks::tasks::kernelbench {

void register_kernelbench_suite() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const auto& p : level1_problems()) {
      register_builtin_task(level1_task_name(p),
                            "KernelBench level 1 #" + std::to_string(p.id) + " (native, no Python): " + p.summary,
                            [&p] {
                              // Built once per problem: the spec is validated on first use.
                              static std::mutex m;
                              static std::map<std::string, TaskSpec> built;
                              std::lock_guard lock(m);
                              auto it = built.find(p.stem);
                              if (it == built.end()) {
                                TaskSpec s = make_level1_spec(p);
                                s.validate();
                                it = built.emplace(p.stem, std::move(s)).first;
                              }
                              return std::make_unique<SpecTask>(it->second);
                            });
    }
  });
}

}  // namespace ks::tasks::kernelbench
