// Uses the installed C++ API: loads a task file and lists its workloads.
#include <cstdio>

#include "ksearch/tasks.hpp"
#include "ksearch/version.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  ks::TaskSpec spec = ks::load_task_file(argv[1]);
  std::printf("ksearch %s: %s has %zu workloads\n", KS_VERSION_STRING, spec.name.c_str(), spec.workloads.size());
  return spec.workloads.empty() ? 1 : 0;
}
