#!/bin/sh
# fixtures.sh BUILD DIR NAME - makes the test fixture NAME with BUILD's
# programs, into DIR/NAME: a directory that appears whole (made in
# DIR/NAME.tmp, then renamed) or, when making it failed, DIR/NAME.failed
# holding what went wrong.  Several tests use the same trained model; made
# once per run of tests/run.sh (which starts this beside the tests), a
# model costs its training once instead of once per test and build.  The
# tests take a fixture with `fixture NAME` (tests/cli/lib.sh), which waits
# for it, or makes it itself when a test runs alone.
#
# Fixtures:
#   dates  the demo's dates in three forms (English and French with the
#          month in words, ISO; 3,000 training pairs, 50 dev, 200 test:
#          train.src train.tgt dev.src dev.tgt test.src test.tgt), a
#          400-piece vocabulary with the placeholder tokens (dates.vocab;
#          the dates have no placeholders, so the model never sees them)
#          and a tiny model trained on them for 300 updates with train's
#          defaults otherwise (dates.st; about 13 s on one core).  The
#          optimised build and the sanitizer build train it bit for bit
#          alike (test_train.sh), so tests/run.sh makes it with the first
#          build that is not a sanitizer build.
set -u
[ $# -eq 3 ] || { echo "usage: tests/fixtures.sh BUILD DIR NAME" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) DIR=$2 NAME=$3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$BUILD/bin
mkdir -p "$DIR" || exit 1
out=$DIR/$NAME.tmp
rm -rf "$out" "$DIR/$NAME.failed"
mkdir "$out" || exit 1

make_dates() {
    (cd "$out" &&
        awk -f "$ROOT/tests/data/demo/dates.awk" -v out=. -v train=3000 -v dev=50 -v test=200 \
            -v forms=0,3,7 &&
        "$BIN/tokenize" learn -q --placeholders --vocab-size 400 train.src train.tgt -o dates.vocab &&
        "$BIN/train" --preset tiny -q --threads 1 -m dates.vocab --src train.src --tgt train.tgt \
            --batch-tokens 1024 --warmup 100 --lr-factor 0.5 --max-steps 300 --save-every 0 \
            -o dates.st && rm -f dates.st.ckpt-*)
}

case $NAME in
dates) make_dates >"$DIR/$NAME.log" 2>&1 ;;
*) echo "fixtures.sh: no fixture '$NAME'" >"$DIR/$NAME.log"; false ;;
esac
if [ $? -eq 0 ]; then
    rm -f "$DIR/$NAME.log"
    mv "$out" "$DIR/$NAME"
else
    rm -rf "$out"
    mv "$DIR/$NAME.log" "$DIR/$NAME.failed"
    exit 1
fi
