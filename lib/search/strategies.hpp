// The built-in strategies (public factory: ks::make_strategy).
#pragma once

#include <memory>

#include "ksearch/strategy.hpp"
#include "ksearch/sys/search_strategy.hpp"

namespace ks::core {

std::unique_ptr<SearchStrategy> make_world_model_strategy();
std::unique_ptr<SearchStrategy> make_greedy_strategy();
std::unique_ptr<SearchStrategy> make_evolve_strategy();

}  // namespace ks::core
