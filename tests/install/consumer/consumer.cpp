// Uses the installed C++ API (a task file and its workloads) and the
// header-only C++ wrapper of the C ABI.
#include <cstdio>

#include "ksearch/ksearch.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/version.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  ks::TaskSpec spec = ks::load_task_file(argv[1]);
  ks_search_options o = ks::abi::search_options();
  std::printf("ksearch %s: %s has %zu workloads; %d rounds by default\n", KS_VERSION_STRING, spec.name.c_str(),
              spec.workloads.size(), o.budget.max_rounds);
  return spec.workloads.empty() ? 1 : 0;
}
