// The GPUMode suite of built-in tasks (today: gpumode/trimul).
#pragma once

namespace ks::tasks::gpumode {

// Registers every GPUMode task with ks::register_builtin_task. Idempotent:
// the registry may call it lazily on first use, and more than once.
void register_gpumode_suite();

}  // namespace ks::tasks::gpumode
