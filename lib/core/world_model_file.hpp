// The size cap on a world-model file read from disk: a run's snapshot
// (world_model/vNNNNNN.json, read by show, report, resume and
// --continue-from-world-model) or a tree to continue from (docs/world-model.md,
// "Limits"). Twice the cap on the snapshot a model's answers may make
// (core::wm::kMaxSnapshotBytes), which leaves room for what the library
// attaches to a tree and for another program's indentation.
#pragma once

#include <cstddef>

namespace ks::core {

inline constexpr std::size_t kMaxWorldModelFileBytes = std::size_t{16} << 20;

}  // namespace ks::core
