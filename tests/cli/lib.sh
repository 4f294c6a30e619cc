# lib.sh - helpers for the CLI tests.  Each test script sources this file,
# runs programs from $BIN in $TEST_TMP, and reports with pass/fail/skip.
# Example:
#   . "$ROOT/tests/cli/lib.sh"
#   "$BIN/tokenize" --help >out || fail "help exits 0"; pass "help"
: "${BIN:?BIN is not set: run through tests/run.sh}"
: "${TEST_TMP:=$(mktemp -d)}"
# (paths given relative to where the test was started, as by hand)
case "$BIN" in /*) ;; *) BIN=$PWD/$BIN ;; esac
case "${BUILD:-}" in /* | "") ;; *) BUILD=$PWD/$BUILD ;; esac
case "${ROOT:-}" in /* | "") ;; *) ROOT=$PWD/$ROOT ;; esac
cd "$TEST_TMP" || exit 1
export LC_ALL=C.UTF-8

pass() { echo "PASS: $TEST_NAME: $1"; }
fail() { echo "FAIL: $TEST_NAME: $1"; }
skip() { echo "SKIP: $TEST_NAME: $1"; }
TEST_NAME=$(basename "$0" .sh)

# check NAME COMMAND...: passes when the command succeeds.
check() { name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }

# expect_status N NAME COMMAND...: runs the command (stdout to out.txt, stderr
# to err.txt) and checks its exit status.
expect_status() {
    want=$1 name=$2; shift 2
    "$@" >out.txt 2>err.txt; got=$?
    if [ "$got" -eq "$want" ]; then pass "$name"; else
        fail "$name (exit $got, expected $want)"; sed 's/^/    stderr: /' err.txt | head -5; fi
}

# expect_stderr PATTERN NAME: checks err.txt of the last expect_status.
expect_stderr() {
    if grep -qE -- "$1" err.txt; then pass "$2"; else
        fail "$2 (stderr lacks /$1/)"; sed 's/^/    stderr: /' err.txt | head -5; fi
}

# lines_of FILE: its number of lines.
lines_of() { wc -l <"$1" | tr -d ' '; }

# same_files NAME EXPECTED GOT: passes when the two files are equal byte for byte;
# otherwise shows their first differences.
same_files() {
    if cmp -s "$2" "$3"; then pass "$1"; else
        fail "$1 ($3 differs from $2)"
        diff "$2" "$3" | head -6 | sed 's/^/    /'
    fi
}

# python_any: prints the path of a python3, the system's first (a pyenv
# shim in PATH takes 0.5 s to start one, /usr/bin/python3 0.04), or nothing.
python_any() {
    for py in /usr/bin/python3 python3; do
        if command -v "$py" >/dev/null 2>&1; then echo "$py"; return; fi
    done
}

# python_numpy: prints the path of a python3 that has numpy, or nothing.
python_numpy() {
    for py in /usr/bin/python3 python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import numpy' 2>/dev/null; then
            echo "$py"; return; fi
    done
}

# ---- for the tests of train ----

# make_sequences N SEED: N lines of 5..10 random ids from 4..13.
make_sequences() {
    awk -v n="$1" -v seed="$2" 'BEGIN { srand(seed)
        for (i = 0; i < n; i++) { len = 5 + int(rand() * 6); s = ""
            for (k = 0; k < len; k++) s = s (k ? " " : "") (4 + int(rand() * 10))
            print s } }'
}
# tensors FILE: the data section of a safetensors file (after the 8-byte
# header length and the header), the same bytes whenever the tensors are.
tensors() {
    n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
    tail -c +"$((n + 9))" "$1"
}
same_tensors() { tensors "$1" >t1.bin && tensors "$2" >t2.bin && cmp -s t1.bin t2.bin; }
# to_text: make_sequences' ids 4..13 as the letters a..j.
to_text() { awk 'BEGIN { split("a b c d e f g h i j", L, " ") }
    { s = ""; for (i = 1; i <= NF; i++) s = s (i > 1 ? " " : "") L[$i - 3]; print s }'; }
# reverse: each line's words in reverse order.
reverse() { awk '{ s = ""; for (i = NF; i >= 1; i--) s = s (i < NF ? " " : "") $i; print s }'; }
# exact HYP REF: the number of lines equal in both.
exact() { paste -d '|' "$1" "$2" | awk -F'|' '$1 == $2 { n++ } END { print n + 0 }'; }
# lr_at STEP LOG: the learning rate of update STEP in a train --log file.
lr_at() { awk -F'\t' -v s="$1" '$8 == "train" && $1 == s { print $5 }' "$2"; }
# last_step LOG: the last update in a train --log file (0 before there is one).
last_step() {
    if [ -f "$1" ]; then awk -F'\t' '$8 == "train" { s = $1 } END { print s + 0 }' "$1"
    else echo 0; fi
}
# newest_checkpoint MODEL: the step of MODEL's newest whole checkpoint
# (MODEL.ckpt-STEP, not a .tmp being written); empty when there is none.
newest_checkpoint() { ls "$1".ckpt-* 2>/dev/null | grep -v tmp | sed 's/.*-//' | sort -n | tail -1; }
# unloadable_checkpoints MODEL: how many of MODEL's whole checkpoints train
# --resume cannot load (one update each, into probe.st).
unloadable_checkpoints() {
    bad=0
    for ck in "$1".ckpt-*; do
        case $ck in *tmp*) continue ;; esac
        "$BIN/train" --resume="$ck" --max-steps 1 -q -o probe.st 2>probe.err || bad=$((bad + 1))
    done
    echo "$bad"
}
# children PID: the processes whose parent is PID (read from /proc: a
# minimal Debian has no ps).
children() {
    cat /proc/[0-9]*/stat 2>/dev/null |
        awk -v parent="$1" '{ pid = $1; sub(/.*\) /, ""); split($0, f, " ") } f[2] == parent { print pid }'
}

# ---- shared fixtures ----

# fixture NAME: copies the files of test fixture NAME (tests/fixtures.sh: a
# model several tests use) into the current directory.  Under tests/run.sh
# it is made once for the whole run ($FIXTURES) and waited for here (up to
# ten minutes); a test run alone makes it itself.  Fails when it could not
# be made, showing why.
fixture() {
    if [ -z "${FIXTURES:-}" ]; then
        FIXTURES=$TEST_TMP/.fixtures
        [ -d "$FIXTURES/$1" ] || sh "$ROOT/tests/fixtures.sh" "$BUILD" "$FIXTURES" "$1"
    fi
    tries=0
    while [ ! -d "$FIXTURES/$1" ]; do
        if [ -f "$FIXTURES/$1.failed" ] || [ "$tries" -ge 6000 ]; then
            echo "    fixture $1 was not made:"
            tail -5 "$FIXTURES/$1.failed" 2>/dev/null | sed 's/^/    /'
            return 1
        fi
        sleep 0.1
        tries=$((tries + 1))
    done
    cp "$FIXTURES/$1"/* .
}
