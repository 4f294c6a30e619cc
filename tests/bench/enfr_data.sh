#!/bin/sh
# enfr_data.sh BIN DIR [LINES] - the English-French strings of
# ../shared/data/enfr ready for the benchmarks that train on them, made
# once in DIR: train, valid and test text (.en, .fr), one 8k joint
# vocabulary learnt on the training text (DIR/enfr.vocab, tokenize learn),
# and id files of every text (DIR/SET.ids.LANG).  LINES keeps the first
# LINES training pairs alone (a quick trial).  Used by quality.sh and
# distill.sh.
set -u
BIN=${1:?usage: enfr_data.sh BIN DIR [LINES]}
D=${2:?usage: enfr_data.sh BIN DIR [LINES]}
LINES=${3:-}
DATA="$(cd "$(dirname "$0")/../.." && pwd)/../shared/data/enfr"
[ -s "$D/test.ids.fr" ] && exit 0
[ -f "$DATA/train.en.xz" ] || { echo "enfr_data.sh: no corpus at $DATA"; exit 1; }
mkdir -p "$D" || exit 1
for s in train valid test; do
    for l in en fr; do xz -dc "$DATA/$s.$l.xz" >"$D/$s.$l" || exit 1; done
done
if [ -n "$LINES" ]; then
    for l in en fr; do head -n "$LINES" "$D/train.$l" >"$D/part" && mv "$D/part" "$D/train.$l" || exit 1; done
fi
"$BIN/tokenize" learn -q --vocab-size 8000 "$D/train.en" "$D/train.fr" -o "$D/enfr.vocab" || exit 1
for s in train valid test; do
    for l in en fr; do
        "$BIN/tokenize" -q -m "$D/enfr.vocab" <"$D/$s.$l" >"$D/$s.ids.$l" || exit 1
    done
done
