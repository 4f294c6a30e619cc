#!/bin/sh
# demo.sh BUILD - the main job on the embedded sample.  For now (the model
# programs are not built yet) it learns a vocabulary from the sample corpus,
# tokenizes held-out text and shows that decoding gives the text back.
set -e
BIN=$1/bin
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${DEMO_DIR:-build/demo}
mkdir -p "$OUT"
corpus=$ROOT/tests/data/corpus-small.txt
head -n -200 "$corpus" > "$OUT/train.txt"
tail -n 200 "$corpus" > "$OUT/heldout.txt"
echo "== learning a 2000-piece BPE vocabulary from $(wc -l < "$OUT/train.txt") lines"
"$BIN/tokenize" learn --vocab-size 2000 "$OUT/train.txt" -o "$OUT/demo.vocab"
echo "== a few held-out lines as pieces"
head -n 3 "$OUT/heldout.txt" | "$BIN/tokenize" -m "$OUT/demo.vocab" --output pieces
echo "== round trip of $(wc -l < "$OUT/heldout.txt") held-out lines"
"$BIN/tokenize" -m "$OUT/demo.vocab" < "$OUT/heldout.txt" > "$OUT/heldout.ids"
"$BIN/tokenize" -d -m "$OUT/demo.vocab" < "$OUT/heldout.ids" > "$OUT/heldout.back"
"$BIN/tokenize" normalize -m "$OUT/demo.vocab" < "$OUT/heldout.txt" > "$OUT/heldout.norm"
if cmp -s "$OUT/heldout.norm" "$OUT/heldout.back"; then
    echo "decode(encode(x)) == normalize(x) for every line"
else
    echo "round trip FAILED"; exit 1
fi
pieces=$(wc -w < "$OUT/heldout.ids"); lines=$(wc -l < "$OUT/heldout.ids")
echo "$pieces pieces for $lines lines"
