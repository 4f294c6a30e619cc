#!/bin/sh
# demo.sh BUILD - the main job of the toolkit, end to end, on the sample task
# that ships in tests/data/demo: dates written in English, French and German,
# in words or figures, translated to DD/MM/YYYY (see tests/data/demo/dates.awk).
# `make demo` runs it after building.  It
#
#   1. learns a shared BPE vocabulary from both sides of the training data,
#   2. trains a tiny Transformer (2+2 layers, d_model 64) for DEMO_STEPS
#      updates (about two minutes on two CPUs), validating on held-out dates,
#   3. translates the held-out test file, dates never seen in training,
#      through tokenize | encode | decode | tokenize -d,
#   4. scores the output with BLEU and chrF, beside the score of copying the
#      source, and shows a few source / output / reference lines,
#   5. draws the attention of one sentence in the terminal and as SVG files.
#
# Everything it writes goes to DEMO_DIR (default build/demo).  Environment:
# DEMO_DIR, DEMO_STEPS (default 1000), DEMO_MAX_TIME (a cap on training,
# default 5m, for slow machines).
set -eu
BUILD=${1:?usage: tests/demo.sh BUILD}
BIN=$(cd "$BUILD/bin" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=$ROOT/tests/data/demo
OUT=${DEMO_DIR:-build/demo}
STEPS=${DEMO_STEPS:-1000}
MAX_TIME=${DEMO_MAX_TIME:-5m}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$OUT"
export PATH="$BIN:$PATH"   # the commands below read as a user would type them
export LC_ALL=C.UTF-8      # pieces are UTF-8 whatever the caller's locale

say() { printf '\n== %s\n' "$*"; }
now() { date +%s; }
# show SRC HYP REF N: the first N lines of three files side by side.
show() {
    paste "$1" "$2" "$3" | head -n "$4" | awk -F'\t' '{
        printf "  source:    %s\n  output:    %s\n  reference: %s%s\n\n", $1, $2, $3,
               ($2 == $3 ? "" : "   <- differs") }'
}

say "the task: $(wc -l <"$DATA/train.src") training pairs of dates in 9 forms, for example"
paste -d '\n' "$DATA/train.src" "$DATA/train.tgt" | head -n 12 | awk 'NR % 2 { printf "  %-58s -> ", $0; next } { print }'
echo "  The $(wc -l <"$DATA/test.src") test dates were never trained on, in any form."

say "1. tokenize learn: an 800-piece BPE vocabulary shared by both sides"
tokenize learn -q --vocab-size 800 "$DATA/train.src" "$DATA/train.tgt" -o dates.vocab
echo "  dates.vocab holds $(($(wc -l <dates.vocab) - 1)) pieces, one per line; a test sentence as pieces:"
grep -m 1 '^le ' "$DATA/test.src" | tokenize -m dates.vocab --output pieces | sed 's/^/  /'

say "2. train: the tiny preset for $STEPS updates (validation BLEU every 200)"
t0=$(now)
rm -f dates.st dates.st.* train.tsv
train --preset tiny -m dates.vocab --src "$DATA/train.src" --tgt "$DATA/train.tgt" \
      --valid-src "$DATA/dev.src" --valid-tgt "$DATA/dev.tgt" --valid-bleu --valid-every 200 \
      --max-steps "$STEPS" --max-time "$MAX_TIME" --save-every 0 \
      --log train.tsv -o dates.st
train_s=$(($(now) - t0))
echo "  trained in ${train_s}s: dates.st ($(wc -c <dates.st) bytes; it holds the vocabulary too)"

say "3. translate the held-out test file: tokenize | encode | decode | tokenize -d"
t0=$(now)
tokenize -m dates.st <"$DATA/test.src" | encode -m dates.st \
    | decode -m dates.st --beam 4 | tokenize -d -m dates.st >test.out
echo "  $(wc -l <test.out) lines translated in $(($(now) - t0))s"
echo
show "$DATA/test.src" test.out "$DATA/test.tgt" 6

say "4. score: BLEU and chrF against the references"
score bleu -r "$DATA/test.tgt" test.out | tee test.bleu
score chrf -r "$DATA/test.tgt" test.out | tee test.chrf
exact=$(paste -d '\t' test.out "$DATA/test.tgt" | awk -F'\t' '$1 == $2 { n++ } END { print n + 0 }')
echo "  $exact of $(wc -l <test.out) dates exactly right"
paste "$DATA/test.src" test.out "$DATA/test.tgt" | awk -F'\t' '$2 != $3' >test.wrong
if [ -s test.wrong ]; then
    echo "  the first it got wrong:"
    head -n 4 test.wrong | awk -F'\t' '{ printf "    %s -> %s (not %s)\n", $1, $2, $3 }'
fi
echo "  copying the source instead would score BLEU $(score bleu -b -r "$DATA/test.tgt" "$DATA/test.src")," \
     "chrF $(score chrf -b -r "$DATA/test.tgt" "$DATA/test.src")"

say "5. inspect-attn: what the decoder looked at (last layer, mean of the heads)"
# A German date: the day, the month and the year's words each draw the
# attention of their own figures.
grep -m 1 '^der ' "$DATA/test.src" >attn.src
inspect-attn -m dates.st --text attn.src
inspect-attn -m dates.st --text --format svg attn.src -o attention.svg
inspect-attn -m dates.st --text --format svg --layer all --head all attn.src -o attention-all.svg
echo "  the same as SVG: $OUT/attention.svg; every layer and head: $OUT/attention-all.svg"

say "done: $OUT holds the vocabulary, the model, test.out, the scores and the pictures"
bleu=$(score bleu -b -r "$DATA/test.tgt" test.out)
echo "  training ${train_s}s, BLEU $bleu, chrF $(score chrf -b -r "$DATA/test.tgt" test.out)"
# A demo that translates badly is a broken build, not a result: fail loudly.
if awk -v b="$bleu" 'BEGIN { exit !(b < 80) }'; then
    echo "demo: BLEU $bleu is far below what this task reaches (over 95): something is wrong" >&2
    exit 1
fi
