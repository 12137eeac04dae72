#!/bin/sh
# Every C++ symbol libksearch exports is in the versioned namespace ks::v1
# (docs/api.md): a ks:: symbol outside it would link against a library of
# another C++ ABI instead of failing. Reads `nm -D --defined-only -C LIB`.
# Usage: check_v1_symbols.sh LIB
set -eu
lib=$1
# A ks:: not preceded by part of a name and not followed by v1::.
outside() { grep -P '(?<![A-Za-z0-9_:])ks::(?!v1::)' || true; }

# The filter itself must catch what it is for, and pass what it must.
planted=$(printf '%s\n' \
  '0000000000001000 T ks::render_run_report(std::filesystem::__cxx11::path const&)' \
  '0000000000001000 V typeinfo for ks::Error' \
  '0000000000001000 T ks::v1::run_search(ks::v1::SearchOptions const&)' \
  '0000000000001000 W std::vector<ks::v1::Solution, std::allocator<ks::v1::Solution> >::~vector()' \
  '0000000000001000 T ks_search_run' | outside | wc -l)
if [ "$planted" != 2 ]; then
  echo "the filter found $planted of the 2 planted symbols outside ks::v1"; exit 1
fi

symbols=$(nm -D --defined-only -C "$lib")
inside=$(printf '%s\n' "$symbols" | grep -c 'ks::v1::' || true)
if [ "$inside" -lt 100 ]; then
  echo "$lib exports only $inside ks::v1 symbols; is it the C++ library?"; exit 1
fi
bad=$(printf '%s\n' "$symbols" | outside)
if [ -n "$bad" ]; then
  echo "$lib exports ks:: symbols outside ks::v1 (use KS_NAMESPACE_BEGIN):"
  printf '%s\n' "$bad"
  exit 1
fi
echo "all $inside exported ks:: symbols are in ks::v1"
