#!/bin/sh
# test_cli_common.sh - the command-line contract every program in $BIN keeps,
# as coreutils programs do: --help on stdout with exit 0, and the same long
# options as its man page (man/PROG.1) in both directions; --version; an
# unknown option is a usage error (exit 2, usage on stderr); a missing input
# file is "PROG: FILE: No such file or directory" with exit 1; a model that
# never ends (/dev/zero) is an error naming it, at once; and a reader that
# closes the pipe early ends the program without a word on stderr (train:
# its --log sent to such a reader is given up, the run goes on).
. "$ROOT/tests/cli/lib.sh"

TMO=${CLI_TEST_TIMEOUT:-30}

# missing_args PROG: arguments after which PROG reads text from the FILEs
# named next (the missing-file check); pipe_args PROG: arguments with which
# PROG reads big.txt on stdin and writes a line per line (the closed-pipe
# check).  Every program must be listed: one this test cannot feed is a
# failure, so that a new program cannot slip past the contract.
missing_args() {
    case $1 in
        tokenize) echo normalize ;;
        score) echo "bleu -r $ROOT/tests/data/corpus-small.txt" ;;
        train) echo "--vocab-size 20 --preset tiny -o cc-train.st --tgt nothere-9f3a.txt --src" ;;
        encode|decode|inspect-attn)
            # Both need a model: a tiny untrained one, made here once, with
            # id lines (cc-big.ids) and their encoder states (cc-big.npy).
            # 500 lines of ~120 ids: what encode, decode and inspect-attn
            # write of them is more than a pipe holds (64 KB: 16 MB, 94 KB at
            # --max-length 60, 566 KB), and encoding them takes a quarter of
            # the time of the 2,000 lines before (13 s in the sanitizer
            # build).
            if [ ! -f cc-big.npy ] && [ -x "$BUILD/tools/mkmodel" ] && [ -x "$BIN/encode" ]; then
                "$BIN/tokenize" learn -q --vocab-size 500 --soft-vocab-limit -o cc.vocab \
                    "$ROOT/tests/data/corpus-small.txt" &&
                    "$BUILD/tools/mkmodel" --preset tiny --vocab cc.vocab -o cc-model.st &&
                    head -500 "$ROOT/tests/data/corpus-small.txt" |
                    "$BIN/tokenize" -m cc.vocab >cc-big.ids &&
                    "$BIN/encode" -m cc-model.st cc-big.ids >cc-big.npy
            fi
            if [ -f cc-big.npy ]; then echo "-m cc-model.st"; else echo ""; fi ;;
        *) echo "" ;;
    esac
}
# encode and decode read id lines and a tensor stream, not text: they read
# a file made by missing_args (named last, so stdin is not read).
pipe_args() {
    case $1 in
        tokenize) echo normalize ;;
        score) echo "bleu --sentence -r big.txt" ;;
        encode) [ -n "$(missing_args encode)" ] && echo "-m cc-model.st cc-big.ids" ;;
        decode) [ -n "$(missing_args decode)" ] && echo "-m cc-model.st --greedy --max-length 60 cc-big.npy" ;;
        inspect-attn) [ -n "$(missing_args inspect-attn)" ] && echo "-m cc-model.st -f align cc-big.ids" ;;
        # train writes nothing to stdout but a --log sent there: a reader of
        # the log that goes away must not end the run (checked below).
        train) [ -n "$(missing_args encode)" ] &&
            echo "--vocab-size 500 --preset tiny --threads 1 --src cc-big.ids --tgt cc-big.ids --batch-tokens 1024 --max-steps 10 -q --log /dev/stdout -o cc-pipe.st" ;;
        *) echo "" ;;
    esac
}

# long_options: the long options (--name) mentioned in roff or plain text on
# stdin, one per line, sorted and unique.
long_options() {
    sed -e 's/\\-/-/g' -e 's/\\(hy/-/g' -e 's/\\f\[[^]]*\]//g' -e 's/\\f([A-Za-z][A-Za-z]//g' \
        -e 's/\\f[A-Za-z]//g' -e 's/\\[&^|%:]//g' |
        grep -oE -- '--[A-Za-z][A-Za-z0-9-]*' | sed 's/-*$//' | LC_ALL=C sort -u
}

# documented_options MANPAGE: the long options its sections document; the
# sections that quote other programs (EXAMPLES, SEE ALSO) do not count.
documented_options() {
    awk '/^\.SH/ { s = toupper($0); skip = (s ~ /EXAMPLE|SEE ALSO|NAME|AUTHOR|BUGS|COPYRIGHT|HISTORY/) }
         !skip' "$1" | long_options
}

# A file big enough that a reader closing after one line leaves the writer
# blocked: plain sentences, no empty lines (which some programs warn about).
big_input() {
    if [ ! -f big.txt ]; then
        i=0; while [ $i -lt 5 ]; do cat "$ROOT/tests/data/corpus-small.txt"; i=$((i + 1)); done >big.txt
    fi
}

n_programs=0
for prog_path in "$BIN"/*; do
    [ -f "$prog_path" ] && [ -x "$prog_path" ] || continue
    p=$(basename "$prog_path")
    n_programs=$((n_programs + 1))

    # --help
    timeout "$TMO" "$prog_path" --help >help.out 2>help.err; rc=$?
    if [ "$rc" -eq 0 ] && [ -s help.out ] && [ ! -s help.err ]; then pass "$p --help: stdout, exit 0"
    else fail "$p --help: exit $rc, $(wc -c <help.out) bytes on stdout, $(wc -c <help.err) on stderr"; fi
    long_options <help.out >help.opts

    # --help and the man page name the same long options.
    man="$ROOT/man/$p.1"
    if [ -f "$man" ]; then
        documented_options "$man" >man.opts
        long_options <"$man" >manall.opts
        missing=$(LC_ALL=C comm -23 man.opts help.opts | tr '\n' ' ')
        if [ -z "$missing" ]; then pass "$p --help mentions every option man/$p.1 documents"
        else fail "$p --help lacks options documented in man/$p.1: $missing"; fi
        missing=$(LC_ALL=C comm -23 help.opts manall.opts | tr '\n' ' ')
        if [ -z "$missing" ]; then pass "man/$p.1 documents every option of $p --help"
        else fail "man/$p.1 lacks options that $p --help shows: $missing"; fi
    else
        skip "$p: no man/$p.1 yet to compare with --help"
    fi

    # --version
    timeout "$TMO" "$prog_path" --version >version.out 2>version.err; rc=$?
    if [ "$rc" -eq 0 ] && grep -qE '[0-9]+\.[0-9]+' version.out; then pass "$p --version: exit 0, a version number"
    else fail "$p --version: exit $rc, stdout '$(head -c 100 version.out)'"; fi

    # An unknown option: usage error.
    timeout "$TMO" "$prog_path" --no-such-option-xyz </dev/null >unknown.out 2>unknown.err; rc=$?
    if [ "$rc" -eq 2 ] && grep -qiE 'usage|--help' unknown.err && [ ! -s unknown.out ]; then
        pass "$p --no-such-option-xyz: exit 2, usage on stderr"
    else
        fail "$p --no-such-option-xyz: exit $rc (expected 2), stderr '$(head -c 200 unknown.err)'"
    fi
    check "$p: messages start with '$p: '" grep -q "^$p: " unknown.err

    # A missing input file.
    args=$(missing_args "$p")
    # shellcheck disable=SC2086 # args is a list of words
    timeout "$TMO" "$prog_path" $args nothere-9f3a.txt </dev/null >missing.out 2>missing.err; rc=$?
    if [ -z "$args" ]; then
        fail "$p nothere-9f3a.txt: this test does not know how to make $p read a file"
    elif [ "$rc" -eq 1 ] && grep -q "^$p: nothere-9f3a\.txt: No such file or directory\$" missing.err; then
        pass "$p: a missing input file: exit 1, '$p: nothere-9f3a.txt: No such file or directory'"
    else
        fail "$p: a missing input file: exit $rc (expected 1), stderr '$(head -c 200 missing.err)'"
    fi

    # A model (or vocabulary, or checkpoint) that never ends, /dev/zero: a
    # clear error naming it, at once, rather than a read without end.
    case $p in
        score) zargs="-m /dev/zero --src big.txt --tgt big.txt" ;;
        train) zargs="--resume=/dev/zero -o cc-zero.st" ;;
        *) zargs="-m /dev/zero" ;;
    esac
    big_input
    # shellcheck disable=SC2086
    timeout 20 "$prog_path" $zargs </dev/null >zero.out 2>zero.err; rc=$?
    if [ "$rc" -eq 1 ] && grep -q "^$p: /dev/zero: " zero.err; then
        pass "$p $zargs: exit 1 at once, naming /dev/zero"
    else
        fail "$p $zargs: exit $rc (expected 1, 124 is a timeout), stderr '$(head -c 200 zero.err)'"
    fi

    # A reader that goes away: no message.
    args=$(pipe_args "$p")
    if [ -n "$args" ]; then
        big_input
        # shellcheck disable=SC2086
        { timeout "$TMO" "$prog_path" $args <big.txt 2>pipe.err; echo $? >pipe.rc; } | head -n 1 >/dev/null
        if [ ! -s pipe.err ] && [ "$(cat pipe.rc)" -ne 124 ]; then pass "$p $args | head -1: ends quietly"
        else fail "$p $args | head -1: exit $(cat pipe.rc), stderr '$(head -c 200 pipe.err)'"; fi
        if [ "$p" = train ]; then
            check "train --log /dev/stdout | head -1: the run goes on to the end (exit 0, the model written)" \
                sh -c '[ "$(cat pipe.rc)" -eq 0 ] && [ -s cc-pipe.st ] && [ -s cc-pipe.st.ckpt-10 ]'
        fi
    else
        fail "$p | head -1: this test does not know how to feed $p"
    fi
done

if [ "$n_programs" -eq 0 ]; then fail "no programs in $BIN"; fi

# OpenBLAS's idle threads block rather than spin (DESIGN.md): a program
# that waits for its input, with two BLAS threads, uses next to no CPU.
# Left alone, each idle thread spins about 0.1 s (2^28 cycles) after it
# starts and after every product; the programs set a short timeout.  Read
# from /proc/PID/stat (user and system time, in clock ticks) while the
# program waits; not under the sanitizers, whose start is itself slow.
idle_cpu_ms() { # PROG ARGS...: CPU ms PROG used in its first 0.7 s, waiting
    sleep 1.2 | env -u OPENBLAS_THREAD_TIMEOUT OPENBLAS_NUM_THREADS=2 "$@" >/dev/null 2>&1 &
    sleep 0.7
    awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$!/stat" 2>/dev/null
    wait
}
case "$BUILD" in
    *asan*) skip "idle OpenBLAS threads: not under the sanitizers" ;;
    *)
        if [ -f cc-model.st ]; then
            for p in encode decode; do
                ms=$(idle_cpu_ms "$BIN/$p" -m cc-model.st)
                check "$p waiting for input with 2 OpenBLAS threads: ${ms:-?} ms of CPU (under 50)" \
                    test "${ms:-999}" -lt 50
            done
        else
            fail "idle OpenBLAS threads: no model (cc-model.st) was made"
        fi ;;
esac
