// The flashinfer suite's registration and lookup by definition name.
#include <mutex>

#include "ksearch/tasks.hpp"
#include "tasks/flashinfer/flashinfer.hpp"

namespace ks::tasks::flashinfer {

std::vector<std::string> definition_names() {
  return {std::string(kGqaDecode), std::string(kMlaDecode), std::string(kMlaPrefill), std::string(kMoe)};
}

std::optional<TaskSpec> make_spec(std::string_view definition) {
  if (definition.substr(0, kPrefix.size()) == kPrefix) definition.remove_prefix(kPrefix.size());
  if (definition == kGqaDecode) return make_gqa_decode_spec();
  if (definition == kMlaDecode) return make_mla_decode_spec();
  if (definition == kMlaPrefill) return make_mla_prefill_spec();
  if (definition == kMoe) return make_moe_spec();
  return std::nullopt;
}

void register_flashinfer_suite() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const auto& name : definition_names()) {
      // Built once on first use: the embedded plans are parsed and the spec validated.
      auto spec = std::make_shared<std::optional<TaskSpec>>();
      auto once_spec = std::make_shared<std::once_flag>();
      const std::string full = std::string(kPrefix) + name;
      register_builtin_task(full, make_spec(name)->description, [name, spec, once_spec] {
        std::call_once(*once_spec, [&] {
          TaskSpec s = *make_spec(name);
          s.validate();
          *spec = std::move(s);
        });
        return std::unique_ptr<Task>(std::make_unique<SpecTask>(**spec));
      });
    }
  });
}

}  // namespace ks::tasks::flashinfer
