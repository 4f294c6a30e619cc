#!/bin/sh
# run.sh BUILD - runs every unit test binary and CLI test script against one
# build and prints their PASS/FAIL/SKIP lines, then "BUILD: N passed, N failed".
# A test that exits non-zero without reporting a failure (a crash, a
# sanitizer report) is counted as one failure, so nothing dies silently.
BUILD=${1:?usage: tests/run.sh BUILD}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
export BIN="$BUILD/bin" ROOT BUILD
# Small matrix products gain nothing from BLAS threads, and idle OpenBLAS
# threads spin on a shared machine: tests run BLAS single-threaded.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
TMPROOT=$(mktemp -d "${TMPDIR:-/tmp}/tfm-tests.XXXXXX")
trap 'rm -rf "$TMPROOT"' EXIT
out="$TMPROOT/out"
pass=0 fail=0 skip=0

run_one() { # name, command...
    name=$1; shift
    TEST_TMP="$TMPROOT/$name"; mkdir -p "$TEST_TMP"; export TEST_TMP
    "$@" >"$out" 2>"$out.err" </dev/null
    rc=$?
    cat "$out"
    p=$(grep -c '^PASS: ' "$out"); f=$(grep -c '^FAIL: ' "$out"); s=$(grep -c '^SKIP: ' "$out")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL: $name: exited with status $rc"; sed 's/^/    /' "$out.err" | tail -30
        f=1
    elif [ "$f" -ne 0 ]; then
        sed 's/^/    /' "$out.err" | tail -30
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
        echo "FAIL: $name: reported no result"; f=1
    fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for t in "$ROOT"/tests/cli/test_*.sh; do
    [ -f "$t" ] || continue
    run_one "$(basename "$t" .sh)" sh "$t"
done
echo "$(basename "$BUILD"): $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
