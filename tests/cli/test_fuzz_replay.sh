#!/bin/sh
# test_fuzz_replay.sh - replays every fuzz target's corpus
# (tests/fuzz/corpus/NAME) and crash reproducers (tests/fuzz/crashes/NAME,
# where a crash that 'make fuzz' finds goes with its fix) through the target
# built without libFuzzer ($BUILD/fuzz-replay/NAME): in the asan build, under
# ASan+UBSan.  Every input must pass the target's checks.  A target that is
# not built is a failure, not a skip.
. "$ROOT/tests/cli/lib.sh"
: "${BUILD:?BUILD is not set: run through tests/run.sh}"

for src in "$ROOT"/tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    bin="$BUILD/fuzz-replay/$name"
    if [ ! -x "$bin" ]; then
        fail "$name: $bin is not built (make tests)"
        continue
    fi
    set -- "$ROOT/tests/fuzz/corpus/$name"
    [ -d "$ROOT/tests/fuzz/crashes/$name" ] && set -- "$@" "$ROOT/tests/fuzz/crashes/$name"
    if [ ! -d "$ROOT/tests/fuzz/corpus/$name" ]; then
        fail "$name: no corpus in tests/fuzz/corpus/$name"
        continue
    fi
    "$bin" "$@" >replay.out 2>replay.err
    rc=$?
    n=$(sed -n 's/^replayed \([0-9]*\) inputs$/\1/p' replay.out)
    if [ "$rc" -eq 0 ] && [ -n "$n" ] && [ "$n" -gt 0 ] &&
        ! grep -qE 'Sanitizer|runtime error' replay.err; then
        pass "$name: its $n corpus inputs replayed, every check held"
    else
        fail "$name: replay failed (exit $rc)"
        sed 's/^/    /' replay.err | head -20
    fi
done
