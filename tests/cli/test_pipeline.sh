#!/bin/sh
# test_pipeline.sh - the main job end to end, as `make demo` runs it, on a
# tiny version of its sample task (tests/data/demo: dates in several forms
# translated to DD/MM/YYYY): a vocabulary learnt, a tiny model trained for a
# few hundred updates (the shared fixture 'dates'), held-out dates translated through
# tokenize | encode | decode | tokenize -d, scored, and their attention drawn.
# It checks that the translation keeps the lines aligned (as many lines out
# as in, an empty line gives an empty line and shifts nothing), that it is
# deterministic (the same bytes twice), that the model learnt the task (BLEU
# 95 or more against the references), and that
# examples/Makefile translates a folder incrementally (only new or changed
# files again) and scores it.  It also checks the committed sample data:
# the generator still makes those files, and no held-out date is trained on.
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_pipeline.sh
. "$ROOT/tests/cli/lib.sh"

DEMO="$ROOT/tests/data/demo"
for p in tokenize train encode decode score inspect-attn; do
    if [ ! -x "$BIN/$p" ]; then fail "no $BIN/$p"; exit 0; fi
done
export PATH="$BIN:$PATH"
# The model is the shared fixture 'dates' (tests/fixtures.sh: 300 updates,
# trained once per run by the optimised build, which trains bit for bit as
# the sanitizer build does): it reaches a BLEU of 95 or more on these 100
# test dates (99.4 measured); copying the source scores about 1.
least=95

# lines FILE: its number of lines, a last one without a newline counted.
lines() { awk 'END { print NR }' "$1"; }

# ---- the committed sample data ---------------------------------------------------

mkdir -p gen
awk -f "$DEMO/dates.awk" -v out=gen
same=yes
for f in train.src train.tgt dev.src dev.tgt test.src test.tgt; do
    cmp -s "gen/$f" "$DEMO/$f" || { same=no; echo "    $f differs from what dates.awk makes"; }
done
check "tests/data/demo holds what dates.awk makes" test "$same" = yes
# Each date has one target line, so a held-out date trained on would show as
# a line of test.tgt or dev.tgt in train.tgt.
check "no held-out date is in the training data" \
    sh -c "! grep -qFx -f '$DEMO/test.tgt' '$DEMO/train.tgt' && ! grep -qFx -f '$DEMO/dev.tgt' '$DEMO/train.tgt'"
check "the test dates are distinct" test "$(sort -u "$DEMO/test.tgt" | wc -l)" -eq "$(lines "$DEMO/test.tgt")"
check "the training data holds all nine forms" test "$(grep -c '^der ' "$DEMO/train.src")" -gt 1000

# ---- a tiny task: three forms, a tiny model ----------------------------------------

# English and French dates with the month in words, and ISO dates, and the
# model (the fixture's 200 test dates: the first 100 here).
fixture dates || { fail "the fixture 'dates': a model"; exit 0; }
head -n 100 test.src >t.src && mv t.src test.src
head -n 100 test.tgt >t.tgt && mv t.tgt test.tgt
check "the fixture 'dates': a vocabulary and a model" test -s dates.vocab -a -s dates.st

# translate IN OUT: the pipeline of the README and of make demo.
translate() {
    tokenize -m dates.st <"$1" | encode -m dates.st | decode -m dates.st --beam 4 |
        tokenize -d -m dates.st >"$2"
}

translate test.src test.out
check "as many lines out as in ($(lines test.out) for $(lines test.src))" \
    test "$(lines test.out)" -eq "$(lines test.src)"
translate test.src test.again
check "the same translation twice, byte for byte" cmp -s test.out test.again

# Empty lines among the sources: each gives an empty line (never a sentence
# made up from no source), and the lines after it stay beside their sources.
awk 'NR == 1 || NR == 40 { print "" } { print } END { print "" }' test.src >gaps.src
translate gaps.src gaps.out
check "empty lines: as many lines out as in ($(lines gaps.out) for $(lines gaps.src))" \
    test "$(lines gaps.out)" -eq "$(lines gaps.src)"
check "empty lines: each gives an empty line" \
    awk '(NR == 1 || NR == 41 || NR == 103) && $0 != "" { exit 1 }' gaps.out
awk 'NR != 1 && NR != 41 && NR != 103' gaps.out >gaps.kept
n=$(paste -d '\t' gaps.kept test.out | awk -F'\t' '$1 == $2 { n++ } END { print n + 0 }')
check "empty lines: the other lines translate as without them ($n of $(lines test.out))" \
    test "$n" -eq "$(lines test.out)"

bleu=$(score bleu -b -r test.tgt test.out)
copy=$(score bleu -b -r test.tgt test.src)
chrf=$(score chrf -b -r test.tgt test.out)
if awk -v b="$bleu" -v c="$copy" -v l="$least" 'BEGIN { exit !(b >= l && b > c) }'; then
    pass "300 updates learn the task: BLEU $bleu (at least $least), $copy for copying the source (chrF $chrf)"
else
    fail "BLEU $bleu after 300 updates: below $least (copying the source: $copy)"
    paste test.src test.out test.tgt | head -5 | sed 's/^/    /'
fi

# The attention picture of make demo: a well-formed SVG document.
head -n 1 test.src | inspect-attn -m dates.st --text --format svg -o attn.svg 2>attn.err
check "inspect-attn: an SVG heatmap" grep -q '<svg' attn.svg
if command -v xmllint >/dev/null 2>&1; then
    check "inspect-attn: the SVG is well-formed XML" xmllint --noout attn.svg
fi

# ---- examples/Makefile: a folder, incrementally, in parallel ------------------------

MK="make -s -f $ROOT/examples/Makefile MODEL=dates.st BIN=$BIN"
mkdir -p in ref
head -n 30 test.src >in/a.txt; head -n 30 test.tgt >ref/a.txt
sed -n 31,60p test.src >in/b.txt; sed -n 31,60p test.tgt >ref/b.txt
sed -n 61,100p test.src >in/c.txt                   # no reference: not scored
$MK -j2 >make.out 2>make.err
check "examples/Makefile: a translation per file" test -s out/a.txt -a -s out/b.txt -a -s out/c.txt
cat out/a.txt out/b.txt out/c.txt >joined.out
check "examples/Makefile: the files translate as the whole does" cmp -s joined.out test.out
check "examples/Makefile: a report of the files with references" \
    sh -c "grep -q '^a.txt ' report.txt && grep -q '^b.txt ' report.txt && ! grep -q '^c.txt' report.txt"
check "examples/Makefile: the report's corpus BLEU" grep -q '^BLEU|nrefs:1' report.txt

# Only what changed is translated again: list the outputs newer than a mark.
# File times move in steps of the kernel's clock tick (a few ms): tick waits
# past one, so that "newer" means something.
newer() { find out -name '*.txt' -newer mark | sort | tr '\n' ' '; }
tick() { sleep 0.05; }
tick; touch mark; tick
$MK -j2 >make.out 2>make.err
check "examples/Makefile: nothing to do when nothing changed" test -z "$(newer)"
touch in/b.txt
$MK -j2 >make.out 2>make.err
got=$(newer)
check "examples/Makefile: a changed source is translated again, alone (got: $got)" test "$got" = "out/b.txt "
check "examples/Makefile: and the report is made again" test report.txt -nt mark
tick; touch mark; tick
head -n 5 test.src >in/d.txt
$MK -j2 >make.out 2>make.err
got=$(newer)
check "examples/Makefile: a new source is translated, alone (got: $got)" test "$got" = "out/d.txt "
tick; touch mark; tick
touch dates.st
$MK -j2 >make.out 2>make.err
got=$(newer)
check "examples/Makefile: a new model translates everything again (got: $got)" \
    test "$got" = "out/a.txt out/b.txt out/c.txt out/d.txt "

# A broken model: the rule fails and leaves no translation behind.
head -c 100 dates.st >broken.st
$MK MODEL=broken.st OUT_DIR=out2 REPORT=report2.txt >make.out 2>make.err; rc=$?
check "examples/Makefile: a broken model fails the run (exit $rc)" test "$rc" -ne 0
check "examples/Makefile: and leaves no translation" test -z "$(ls out2 2>/dev/null)"

# Ten thousand one-line files at once (the test set's lines over and over),
# an empty file and one whose last line has no newline: every file comes
# out, with its lines, the translations of the whole; nothing is left
# behind.  (The files are the Makefile's and the shell's work, the same in
# both builds: under the sanitizers, whose programs take 40 s more over
# 10,000 lines, 1,000 files.)
mkdir -p many/in
case "$BIN" in *asan*) n_many=1000 ;; *) n_many=10000 ;; esac
awk -v n=$n_many 'NR == FNR { line[FNR] = $0; k = FNR; next }
    END { for (i = 0; i < n; i++) { f = sprintf("many/in/f%05d.txt", i); print line[i % k + 1] >f; close(f) } }' \
    test.src /dev/null
: >many/in/empty.txt
printf '%s' "$(head -n 1 test.src)" >many/in/unterminated.txt
$MK -j2 SRC_DIR=many/in OUT_DIR=many/out REPORT=many.report >make.out 2>make.err; rc=$?
check "examples/Makefile: $n_many one-line files, an empty one and an unterminated one (exit $rc)" \
    test "$rc" -eq 0
got=$(ls many/out | wc -l)
check "... a translation per file ($got of $((n_many + 2)))" test "$got" -eq $((n_many + 2))
check "... one pipeline for all of them" grep -q "translate $((n_many + 2)) file(s)" make.out
awk -v n=$n_many 'NR == FNR { line[FNR] = $0; k = FNR; next }
    END { for (i = 0; i < n; i++) print line[i % k + 1] }' test.out /dev/null >many.want
cat many/out/f*.txt >many.got
same_files "... every line the translation of its source" many.want many.got
check "... the empty file's is empty" test -f many/out/empty.txt -a ! -s many/out/empty.txt
head -n 1 test.out >one.want
same_files "... the unterminated line's is a whole line" one.want many/out/unterminated.txt
check "... and nothing is left behind" test -z "$(ls -A many/out | grep -v '\.txt$')"
