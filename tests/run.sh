#!/bin/sh
# run.sh BUILD... [TEST...] - runs every unit test binary and CLI test script
# of each BUILD, JOBS at a time (default: the CPU count), then prints their
# PASS/FAIL/SKIP lines test by test in a fixed order, "BUILD: N passed, N
# failed, N skipped" per build, the CPU seconds the tests took per build
# (each test's in build/test-cpu.txt) and, last, the total "N passed, N
# failed, N skipped".  TEST names limit the run to those tests (test_train,
# test_quant: a unit test binary or a CLI script, without .sh).
#
# A test that exits non-zero without reporting a failure (a crash, a
# sanitizer report) is counted as one failure, and a test that reports
# nothing as one too, so nothing dies silently.  Each test runs in a
# directory of its own (TEST_TMP), with BIN, BUILD and ROOT set.
#
# The tests are independent, so they run side by side: the longest start
# first, by their times in the last run (build/test-times.txt; in a fresh
# checkout, as CI has, the times kept in tests/test-times.txt), so that the
# last ones finish together.  While they run, one line per finished test
# goes to standard error.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
builds="" only=""
for a in "$@"; do
    if [ -d "$a" ]; then builds="$builds $(cd "$a" && pwd)"; else only="$only ${a%.sh}"; fi
done
[ -n "$builds" ] || { echo "usage: tests/run.sh BUILD... [TEST...]" >&2; exit 2; }
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
# Small matrix products gain nothing from BLAS threads, and idle OpenBLAS
# threads spin on a shared machine: tests run BLAS single-threaded.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
# OpenBLAS picks its kernels by the CPU, and on a CPU newer than itself it
# falls back to its oldest: Debian 12's OpenBLAS runs "Prescott" (SSE3)
# kernels on the Xeons with AVX-512 FP16 of these machines (and, by its
# times, of CI), which made test_parity 2.8 times slower and the sanitizer
# build's plain bf16 kernel 15 times.  The project's machines set
# OPENBLAS_CORETYPE=Haswell; where nothing is set, the tests do the same on
# a CPU with AVX2 and FMA.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null &&
    grep -qw fma /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=Haswell
fi
TIMES="$ROOT/build/test-times.txt"
TMPROOT=$(mktemp -d "${TMPDIR:-/tmp}/tfm-tests.XXXXXX")
trap 'rm -rf "$TMPROOT"' EXIT

# The list, in the order of the report: "BUILD KIND NAME" per line.
wanted() { [ -z "$only" ] || case " $only " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for b in $builds; do
    for t in "$b"/tests/test_*; do
        [ -x "$t" ] && wanted "$(basename "$t")" && echo "$b unit $(basename "$t")"
    done
    for t in "$ROOT"/tests/cli/test_*.sh; do
        [ -f "$t" ] && wanted "$(basename "$t" .sh)" && echo "$b cli $(basename "$t" .sh)"
    done
done >"$TMPROOT/list"
[ -s "$TMPROOT/list" ] || { echo "run.sh: no test matches:$only" >&2; exit 2; }

# The order of the run: longest first by the last times (unknown ones
# first of all, since they may be long).  A test is known by its build's
# name, its kind and its name (a unit test and a script may share a name).
known=$TIMES
[ -f "$known" ] || known="$ROOT/tests/test-times.txt"
awk -v times="$known" 'BEGIN { while ((getline line < times) > 0) { split(line, f, " "); t[f[1] " " f[2] " " f[3]] = f[4] } }
     { b = $1; sub(".*/", "", b); k = b " " $2 " " $3; print ((k in t) ? t[k] : 1e9), $0 }' \
    "$TMPROOT/list" | sort -k1,1 -g -r | cut -d' ' -f2- >"$TMPROOT/order"

# The shared fixtures that the chosen scripts take (tests/fixtures.sh),
# made beside the tests with the first build that is not a sanitizer build
# (the tests that use one wait for it: tests/cli/lib.sh's fixture).
fixture_build=""
for b in $builds; do
    case "$b" in *asan*) ;; *) fixture_build=${fixture_build:-$b} ;; esac
done
set -- $builds
export FIXTURES="$TMPROOT/fixtures"
fixtures=$(awk '$2 == "cli" { print $3 }' "$TMPROOT/list" | sort -u |
    while read -r name; do sed -n 's/^ *fixture \([a-z]*\).*/\1/p' "$ROOT/tests/cli/$name.sh"; done | sort -u)
for f in $fixtures; do
    sh "$ROOT/tests/fixtures.sh" "${fixture_build:-$1}" "$FIXTURES" "$f" 2>/dev/null
done &
fixtures_pid=$!

# One test: its output, error output, status and seconds in
# TMPROOT/BUILDNAME.KIND.NAME/; its own TEST_TMP inside, removed afterwards.
ROOT="$ROOT" TMPROOT="$TMPROOT" xargs -r -P "$JOBS" -L 1 sh -c '
    b=$1 kind=$2 name=$3
    d="$TMPROOT/$(basename "$b").$kind.$name"
    mkdir -p "$d/tmp"
    export BIN="$b/bin" BUILD="$b" TEST_TMP="$d/tmp"
    start=$(date +%s.%N)
    if [ "$kind" = unit ]; then "$b/tests/$name"; else sh "$ROOT/tests/cli/$name.sh"; fi \
        >"$d/out" 2>"$d/err" </dev/null
    echo $? >"$d/rc"
    end=$(date +%s.%N)
    echo "$start $end" | awk "{ printf \"%.1f\n\", \$2 - \$1 }" >"$d/time"
    # The CPU seconds of the test and everything it started: the second line
    # of times, the shell'"'"'s children, user and system (\"0m1.23s 0m0.45s\";
    # in a pipeline times would run in a subshell, which has none).
    times >"$d/times"
    tail -n 1 "$d/times" | tr "ms" "  " | awk "{ printf \"%.1f\n\", 60 * (\$1 + \$3) + \$2 + \$4 }" >"$d/cpu"
    rm -rf "$d/tmp"
    echo "  done: $(basename "$b") $name ($(cat "$d/time") s)" >&2
' sh <"$TMPROOT/order"
wait "$fixtures_pid"

# The report, in the list's order.
total_p=0 total_f=0 total_s=0
for b in $builds; do
    bn=$(basename "$b") pass=0 fail=0 skip=0
    while read -r tb kind name; do
        [ "$tb" = "$b" ] || continue
        d="$TMPROOT/$bn.$kind.$name"
        cat "$d/out"
        rc=$(cat "$d/rc" 2>/dev/null || echo 127)
        p=$(grep -c '^PASS: ' "$d/out"); f=$(grep -c '^FAIL: ' "$d/out"); s=$(grep -c '^SKIP: ' "$d/out")
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            echo "FAIL: $name: exited with status $rc"; sed 's/^/    /' "$d/err" | tail -30
            f=1
        elif [ "$f" -ne 0 ]; then
            sed 's/^/    /' "$d/err" | tail -30
        fi
        if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
            echo "FAIL: $name: reported no result"; f=1
        fi
        pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
        echo "$bn $kind $name $(cat "$d/time" 2>/dev/null || echo 0)" >>"$TMPROOT/times"
        echo "$bn $kind $name $(cat "$d/cpu" 2>/dev/null || echo 0)" >>"$TMPROOT/cpu"
    done <"$TMPROOT/list"
    echo "$bn: $pass passed, $fail failed, $skip skipped"
    total_p=$((total_p + pass)) total_f=$((total_f + fail)) total_s=$((total_s + skip))
done

# Keep this run's times (and the others' from before) for the next order.
mkdir -p "$ROOT/build"
awk -v times="$TIMES" 'BEGIN { while ((getline line < times) > 0) { split(line, f, " "); t[f[1] " " f[2] " " f[3]] = f[4] } }
     { t[$1 " " $2 " " $3] = $4 } END { for (k in t) print k, t[k] }' "$TMPROOT/times" |
    sort >"$TIMES.new" && mv "$TIMES.new" "$TIMES"

# What the tests cost in CPU time, which the other jobs of a shared machine
# change less than the seconds (its speed from hour to hour still moves
# it): the total per build here, every test's in build/test-cpu.txt
# (dearest first).
sort -k4,4 -g -r "$TMPROOT/cpu" >"$ROOT/build/test-cpu.txt"
awk '!($1 in c) { order[n++] = $1 } { c[$1] += $4 }
     END { printf "CPU seconds of the tests:"; for (i = 0; i < n; i++) printf " %s %.0f", order[i], c[order[i]]
           print " (each test'"'"'s: build/test-cpu.txt)" }' "$TMPROOT/cpu"
echo "$total_p passed, $total_f failed, $total_s skipped"
[ "$total_f" -eq 0 ]
