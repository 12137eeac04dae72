#!/bin/sh
# The dependency rule of docs/architecture.md, checked on #include lines:
# util includes no other component; core only util; llm, eval, tasks and
# report only core and util; engine the four; export core and eval; nothing
# in lib includes engine or capi.
set -eu
cd "$(dirname "$0")/../lib"
fail=0
check() {  # component, allowed include prefixes (regex)
  bad=$(grep -rn -E '^#include "(util|core|llm|eval|tasks|report|engine|export)/' "$1" | grep -v -E "#include \"($2)/" || true)
  if [ -n "$bad" ]; then
    echo "lib/$1 includes a component it may not depend on:"
    echo "$bad"
    fail=1
  fi
}
check util 'util'
check core 'util|core'
check llm 'util|core|llm'
check eval 'util|core|eval'
check tasks 'util|core|tasks'
check report 'util|core|report'
check engine 'util|core|llm|eval|tasks|engine'
check export 'util|core|eval|export'
[ $fail = 0 ] && echo "dependency rule holds"
exit $fail
