#!/bin/sh
# Every symbol libksearch exports is part of the C ABI (ks_*) or the C++ API
# (namespace ks, with its type information and vtables). Nothing else leaks.
set -eu
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | c++filt |
  grep -v -E '^ks_' |
  grep -v -E '^(typeinfo for |typeinfo name for |vtable for |VTT for |non-virtual thunk to |virtual thunk to )?ks::' |
  grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' || true)
count=$(nm -D --defined-only "$lib" | wc -l)
if [ -n "$bad" ]; then
  echo "symbols outside ks_ and ks:: exported by $lib:"
  echo "$bad"
  exit 1
fi
echo "$count exported symbols, all ks_* or ks::"
