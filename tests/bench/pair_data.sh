#!/bin/sh
# pair_data.sh BIN DIR [PAIR [LINES]] - the software strings of
# ../shared/data/PAIR (enfr, the default, or enru: English and the target
# language T) ready for the benchmarks that train on them, made once in
# DIR: train, valid and test text (.en, .T), one 8k joint vocabulary learnt
# on the training text (DIR/PAIR.vocab, tokenize learn), and id files of
# every text (DIR/SET.ids.LANG).  LINES keeps the first LINES training
# pairs alone (a quick trial).  Used by quality.sh, distill.sh and
# shapes.sh.
set -u
BIN=${1:?usage: pair_data.sh BIN DIR [PAIR [LINES]]}
D=${2:?usage: pair_data.sh BIN DIR [PAIR [LINES]]}
PAIR=${3:-enfr}
LINES=${4:-}
T=${PAIR#en}
DATA="$(cd "$(dirname "$0")/../.." && pwd)/../shared/data/$PAIR"
[ -s "$D/test.ids.$T" ] && exit 0
[ -f "$DATA/train.en.xz" ] || { echo "pair_data.sh: no corpus at $DATA"; exit 1; }
mkdir -p "$D" || exit 1
for s in train valid test; do
    for l in en "$T"; do xz -dc "$DATA/$s.$l.xz" >"$D/$s.$l" || exit 1; done
done
if [ -n "$LINES" ]; then
    for l in en "$T"; do head -n "$LINES" "$D/train.$l" >"$D/part" && mv "$D/part" "$D/train.$l" || exit 1; done
fi
"$BIN/tokenize" learn -q --vocab-size 8000 "$D/train.en" "$D/train.$T" -o "$D/$PAIR.vocab" || exit 1
for s in train valid test; do
    for l in en "$T"; do
        "$BIN/tokenize" -q -m "$D/$PAIR.vocab" <"$D/$s.$l" >"$D/$s.ids.$l" || exit 1
    done
done
