#!/bin/sh
# Installs the build into a scratch prefix, then builds and runs a consumer
# project against it with find_package(ksearch), and checks the pkg-config file.
set -eu
build="$1"; source="$2"; work="$3"
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/libexec/ksearch/ksearch-worker"
test -x "$work/prefix/bin/ksearch"
cmake -S "$source/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/consumer/consumer_c"
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/consumer/consumer_cpp" "$source/examples/tasks/matmul/task.json"
# The .pc file is relocatable: it must point into this prefix.
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --exists --print-errors ksearch
flags=$(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --libs --cflags ksearch)
echo "pkg-config: $flags"
case "$flags" in *"$work/prefix"*) ;; *) echo "pkg-config flags do not point into the install prefix"; exit 1 ;; esac
# A C program builds from the pkg-config flags alone.
cc -std=c99 -Wall -Werror $flags -o "$work/consumer_pc" "$source/tests/install/consumer/consumer.c" $flags
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/consumer_pc"
"$work/prefix/bin/ksearch" version
