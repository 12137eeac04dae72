#!/bin/sh
# The dependency rule of docs/architecture.md, checked on #include lines:
# core includes no other component; llm, eval, tasks and report include only
# core; engine includes the four; export includes core and eval; nothing in lib
# includes engine or capi.
set -eu
cd "$(dirname "$0")/../lib"
fail=0
check() {  # component, allowed include prefixes (regex)
  bad=$(grep -rn -E '^#include "(core|llm|eval|tasks|report|engine|export)/' "$1" | grep -v -E "#include \"($2)/" || true)
  if [ -n "$bad" ]; then
    echo "lib/$1 includes a component it may not depend on:"
    echo "$bad"
    fail=1
  fi
}
check core 'core'
check llm 'core|llm'
check eval 'core|eval'
check tasks 'core|tasks'
check report 'core|report'
check engine 'core|llm|eval|tasks|engine'
check export 'core|eval|export'
[ $fail = 0 ] && echo "dependency rule holds"
exit $fail
