// The world model: the default implementation. The interface a custom
// world model implements (WorldModel, with the edit and prompt types) is in
// ksearch/sys/world_model.hpp.
#pragma once

#include <memory>

#include "ksearch/export.h"

KS_NAMESPACE_BEGIN

class WorldModel;

// The default implementation.
KS_API std::unique_ptr<WorldModel> make_tree_world_model();

KS_NAMESPACE_END
