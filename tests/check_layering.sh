#!/bin/sh
# The folder rules of lib/README.md and docs/architecture.md, checked on
# #include lines and CMake include() lines. Each failure names its rule:
#   components  a lib/ component includes only the components it may depend on
#   search      eval, tasks and export never include the search component
#   owners      a lib/ component includes only the public headers whose owner
#               (the table in docs/architecture.md) it may depend on
#   headers     a public header includes only the public headers whose owner
#               its own owner may depend on (so a component including it
#               does not see declarations it may not use)
#   relative    a relative include ("../x.hpp") stays inside its component
#   cmake       an include() in lib/'s CMake files names a file that exists,
#               by module name (cmake/) or in a component it may depend on
#   benchmarks  benchmarks/ include public headers, and internals only as
#               benchmarks/internal_includes.txt lists them
#   examples    examples/ include public headers only
#   sys         the stable headers (include/ksearch/*.hpp) do not include
#               the extension interfaces (ksearch/sys/)
#   table       every public header has one row in the owner table, and the
#               files a row names exist
#   room        a header ksearch/X.hpp owned by a lib/ component is implemented
#               in lib/<owner>/X.cpp (or lib/<owner>/.../X.cpp), and its row
#               names that file, unless the row says "header only" or "one
#               file per"; sys/ interfaces name where they are implemented
# Usage: check_layering.sh [ROOT]   (default: the checkout holding this script)
set -eu
root=${1:-"$(dirname "$0")/.."}
cd "$root"
tab=$(printf '\t')

# Component -> the components it may include (itself among them). capi sits
# on top of all of them.
rules='util:util
core:util core
search:util core search
llm:util core llm
eval:util core eval
tasks:util core tasks
report:util core report
engine:util core search llm eval tasks engine
export:util core eval export
capi:util core search llm eval tasks report engine export capi'

# The owner table: "| `ksearch/X` | owner | files |" rows of docs/architecture.md.
owners=$(sed -n -E 's/^\| `ksearch\/([^`]+)` \| ([a-z-]+) \|.*/\1 \2/p' docs/architecture.md)

out=$(mktemp)
trap 'rm -f "$out"' EXIT

# Every #include "..." of lib/ and capi/, as FILE<TAB>LINE<TAB>PATH.
includes() {
  grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' "$@" 2>/dev/null |
    sed -E "s/^([^:]+):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\".*/\1$tab\2$tab\3/" || true
}

{ includes lib capi include/ksearch; } | awk -F"$tab" -v rules="$rules" -v owners="$owners" '
  BEGIN {
    n = split(rules, rl, "\n")
    for (i = 1; i <= n; i++) {
      split(rl[i], kv, ":"); comp[kv[1]] = 1
      m = split(kv[2], ds, " "); for (j = 1; j <= m; j++) may[kv[1] SUBSEP ds[j]] = 1
    }
    n = split(owners, ol, "\n")
    for (i = 1; i <= n; i++) { split(ol[i], kv, " "); owner[kv[1]] = kv[2] }
  }
  # a/b/../c -> a/c
  function norm(p,   parts, n, i, out, k, res) {
    n = split(p, parts, "/"); k = 0
    for (i = 1; i <= n; i++) {
      if (parts[i] == "" || parts[i] == ".") continue
      if (parts[i] == "..") { if (k > 0 && out[k] != "..") k--; else out[++k] = ".."; continue }
      out[++k] = parts[i]
    }
    res = ""; for (i = 1; i <= k; i++) res = res (i > 1 ? "/" : "") out[i]
    return res
  }
  function report(rule, msg) { printf "[%s] %s:%s: %s\n", rule, $1, $2, msg }
  {
    file = $1; path = $3
    split(file, fp, "/"); from = (fp[1] == "capi") ? "capi" : fp[2]
    if (fp[1] == "include") {
      # A public header: its owner may include what that owner may depend on.
      h = substr(file, length("include/ksearch/") + 1); sub(/\.in$/, "", h)
      if (path !~ /^ksearch\// || !(h in owner)) next
      o = owner[substr(path, 9)]; from = owner[h]
      if (o == "" || o == "-" || from == "capi" || o == from) next
      if (from == "-") { report("headers", "ksearch/" h " (owner -) includes " path ", owned by " o "; a configuration header includes only others of its kind"); next }
      if (!((from SUBSEP o) in may))
        report("headers", "ksearch/" h " (owner " from ") includes " path ", owned by " o ", which " from " may not depend on")
      next
    }
    if (!(from in comp)) next
    first = path; sub(/\/.*/, "", first)
    if (path ~ /^ksearch\//) {
      h = substr(path, 9)
      if (!(h in owner)) { report("owners", "includes ksearch/" h ", which the owner table does not list"); next }
      o = owner[h]
      if (o == "-" || ((from SUBSEP o) in may)) next
      if (o == "search" && (from == "eval" || from == "tasks" || from == "export"))
        report("search", from " includes ksearch/" h " (owner: search); eval, tasks and export never include the search")
      else
        report("owners", from " includes ksearch/" h ", owned by " o ", which " from " may not depend on")
      next
    }
    if (index(path, "/") && (first in comp)) {
      to = first
    } else {
      # Relative to the including file: resolve, and see where it lands.
      dir = file; sub(/\/[^\/]*$/, "", dir)
      r = norm(dir "/" path)
      split(r, rp, "/")
      if (rp[1] == "lib" && (rp[2] in comp)) to = rp[2]
      else if (rp[1] == "capi") to = "capi"
      else if (path ~ /\.\./) { report("relative", "relative include \"" path "\" leaves lib/ (resolves to " r ")"); next }
      else next
      if (to != from) {
        report("relative", "relative include \"" path "\" reaches into " to " (" r "); include it as \"" to "/...\" if " from " may depend on it")
        next
      }
    }
    if ((from SUBSEP to) in may) next
    if (to == "search" && (from == "eval" || from == "tasks" || from == "export"))
      report("search", from " includes " path "; eval, tasks and export never include the search")
    else
      report("components", from " includes " path ", a component it may not depend on")
  }' >>"$out"

# CMake include() lines of lib/: a module of cmake/ by name, or a file in a
# component the including one may depend on. A computed path cannot be checked,
# so it is refused.
find lib -name CMakeLists.txt -o -name '*.cmake' | sort | while read -r f; do
  from=$(echo "$f" | cut -d/ -f2)
  [ "$from" = CMakeLists.txt ] && from=lib
  dir=$(dirname "$f")
  grep -nE '^[[:space:]]*include[[:space:]]*\(' "$f" | while IFS=: read -r line text; do
    arg=$(echo "$text" | sed -E 's/^[[:space:]]*include[[:space:]]*\([[:space:]]*([^ )]+).*/\1/')
    case $arg in
      *'$'*/*|*/*)
        p=$(echo "$arg" | sed -e "s#\${PROJECT_SOURCE_DIR}#.#; s#\${CMAKE_SOURCE_DIR}#.#; s#\${CMAKE_CURRENT_SOURCE_DIR}#$dir#; s#\${CMAKE_CURRENT_LIST_DIR}#$dir#")
        case $p in
          *'$'*) echo "[cmake] $f:$line: include($arg) is a computed path; name the file (a module of cmake/ or a file of a component $from may depend on)" >>"$out"; continue;;
        esac
        if [ ! -f "$p" ]; then
          echo "[cmake] $f:$line: include($arg): $p does not exist" >>"$out"; continue
        fi
        r=$(realpath -m --relative-to=. "$p")
        case $r in
          cmake/*) ;;
          lib/*)
            to=$(echo "$r" | cut -d/ -f2)
            deps=$(printf '%s\n' "$rules" | sed -n "s/^$from://p")
            case " $deps " in
              *" $to "*) ;;
              *) echo "[cmake] $f:$line: include($arg) reaches into lib/$to, which $from may not depend on; shared CMake helpers go in cmake/" >>"$out";;
            esac;;
          *) echo "[cmake] $f:$line: include($arg) reaches outside lib/ and cmake/ ($r)" >>"$out";;
        esac;;
      *'$'*) echo "[cmake] $f:$line: include($arg) is a computed path; name the file (a module of cmake/ or a file of a component $from may depend on)" >>"$out";;
      *)
        # A module: CMake's own, or one of cmake/.
        case $arg in Ks*) [ -f "cmake/$arg.cmake" ] || echo "[cmake] $f:$line: include($arg): cmake/$arg.cmake does not exist" >>"$out";; esac;;
    esac
  done
done

# benchmarks/ and examples/: public headers; internals only where listed.
internal='^(util|core|search|llm|eval|tasks|report|engine|export|capi)/'
allow=$(grep -vE '^[[:space:]]*(#|$)' benchmarks/internal_includes.txt 2>/dev/null | awk '{print $1 " " $2}' || true)
includes benchmarks | while IFS="$tab" read -r f line p; do
  if echo "$p" | grep -qE "$internal"; then
    printf '%s\n' "$allow" | grep -qxF "$f $p" ||
      echo "[benchmarks] $f:$line: includes the internal header $p, which benchmarks/internal_includes.txt does not list (use the public API, or list it with why)" >>"$out"
  elif echo "$p" | grep -qE '(^|/)\.\./.*(lib|capi)/'; then
    echo "[benchmarks] $f:$line: relative include \"$p\" reaches into the library's internals" >>"$out"
  fi
done
includes examples | while IFS="$tab" read -r f line p; do
  if echo "$p" | grep -qE "$internal" || echo "$p" | grep -qE '(^|/)\.\./.*(lib|capi)/'; then
    echo "[examples] $f:$line: includes the internal header $p; examples use the public API only" >>"$out"
  fi
done
# Every listed internal include is still there (a stale list hides nothing).
printf '%s\n' "$allow" | while read -r f p; do
  [ -n "$f" ] || continue
  grep -qE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$p\"" "$f" 2>/dev/null ||
    echo "[benchmarks] benchmarks/internal_includes.txt lists $f including $p, which it does not" >>"$out"
done

# The stable headers stay apart from the extension interfaces (0.3).
for h in include/ksearch/*.hpp; do
  grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"ksearch/sys/' "$h" | while IFS=: read -r line text; do
    echo "[sys] $h:$line: a stable header includes an extension interface: $text" >>"$out"
  done
done

# The owner table: one row per public header; the files it names exist.
for h in $(cd include/ksearch && find . -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.h.in' \) | sed 's#^\./##; s#\.in$##' | sort); do
  c=$(printf '%s\n' "$owners" | awk -v h="$h" '$1 == h' | wc -l)
  [ "$c" = 1 ] || echo "[table] ksearch/$h has $c rows in docs/architecture.md's owner table (one expected)" >>"$out"
done
printf '%s\n' "$owners" | while read -r h o; do
  [ -f "include/ksearch/$h" ] || [ -f "include/ksearch/$h.in" ] ||
    echo "[table] the owner table lists ksearch/$h, which does not exist" >>"$out"
  case " $(printf '%s\n' "$rules" | cut -d: -f1 | tr '\n' ' ') - " in
    *" $o "*) ;;
    *) echo "[table] ksearch/$h: owner \"$o\" is not a component" >>"$out";;
  esac
done
grep -E '^\| `ksearch/' docs/architecture.md | grep -oE '`(lib|capi)/[^`]+`' | tr -d '`' | sort -u | while read -r p; do
  [ -e "$p" ] || echo "[table] the owner table names $p, which does not exist" >>"$out"
done

grep -E '^\| `ksearch/[^`/]+\.hpp` \| [a-z]+ \|' docs/architecture.md | while IFS= read -r row; do
  h=$(echo "$row" | sed -E 's/^\| `ksearch\/([^`]+)\.hpp`.*/\1/')
  o=$(echo "$row" | sed -E 's/^\| `[^`]+` \| ([a-z]+) \|.*/\1/')
  [ -d "lib/$o" ] || continue
  case $row in *"header only"*|*"one file per"*) continue;; esac
  echo "$row" | grep -qE "\`lib/$o/([^\`]*/)?$h\.cpp\`" ||
    echo "[room] ksearch/$h.hpp: its row in the owner table names no lib/$o/$h.cpp, the header's room" >>"$out"
done

if [ -s "$out" ]; then
  cat "$out"
  echo "the folder rules do not hold ($(wc -l <"$out") problems; lib/README.md states them)"
  exit 1
fi
echo "the folder rules hold"
