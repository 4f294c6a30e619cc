#!/bin/sh
# quant_quality.sh BUILD MODEL - what int8 and bf16 cost in translations (make
# bench-quant MODEL=...; also the last step of make bench-quality): MODEL
# (float32, trained on ../shared/data/enfr with its vocabulary) is quantized
# with 'train quantize' to int8 and to bf16, and the three files translate
# the enfr test set (2,000 sentences) with beam 4 and with greedy search.
#
# Prints, for each compute type: test BLEU and chrF (beam 4, against the raw
# references, as make bench-quality scores), their change against float32,
# and the share of sentences identical to float32's, beam 4 and greedy.
# The translations stay in BENCH_OUT/quant (build/bench/quant).
#
# Output lines (machine-readable):
#   quant_quality compute=float32|bf16|int8 bleu=X chrf=X d_bleu=X d_chrf=X
#       beam_identical=P greedy_identical=P        (P: percent of sentences)
#
# Environment: THREADS (2), BENCH_OUT (build/bench).
set -u
BUILD=${1:?usage: tests/bench/quant_quality.sh BUILD MODEL}
MODEL=${2:?usage: tests/bench/quant_quality.sh BUILD MODEL}
BIN=$(cd "$BUILD" && pwd)/bin || exit 1
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL") || exit 1
cd "$(dirname "$0")/../.." || exit 1
DATA="$(pwd)/../shared/data/enfr"
THREADS=${THREADS:-2}
OUT=${BENCH_OUT:-build/bench}/quant
export LC_ALL=C.UTF-8

[ -f "$DATA/test.en.xz" ] || { echo "quant_quality.sh: no test set at $DATA"; exit 1; }
[ -f "$MODEL" ] || { echo "quant_quality.sh: no model $MODEL"; exit 1; }
mkdir -p "$OUT" || exit 1
for l in en fr; do xz -dc "$DATA/test.$l.xz" >"$OUT/test.$l" || exit 1; done

echo "quant: $(basename "$MODEL") in float32, bf16 and int8 on the enfr test set ($(wc -l <"$OUT/test.en") sentences), $THREADS threads"
cp "$MODEL" "$OUT/float32.st" || exit 1
for t in bf16 int8; do
    "$BIN/train" quantize --compute-type "$t" -i "$MODEL" -o "$OUT/$t.st" || exit 1
done

# translate TYPE SEARCH: the test set in OUT/SEARCH.TYPE.fr
translate() {
    "$BIN/tokenize" -q -m "$OUT/$1.st" <"$OUT/test.en" |
        "$BIN/encode" -q -m "$OUT/$1.st" --threads "$THREADS" |
        "$BIN/decode" -q -m "$OUT/$1.st" $2 --threads "$THREADS" |
        "$BIN/tokenize" -q -d -m "$OUT/$1.st" >"$OUT/$(echo "$2" | tr -d ' -').$1.fr"
}
# identical A B: the percentage of lines of A equal to the same line of B
identical() {
    paste -d '\t' "$1" "$2" | awk -F'\t' '$1 == $2 { n++ } END { printf "%.2f", NR ? 100 * n / NR : 0 }'
}

for t in float32 bf16 int8; do
    translate "$t" "--beam 4" && translate "$t" "--greedy" || exit 1
    bleu=$("$BIN/score" bleu -b -w 2 -r "$OUT/test.fr" "$OUT/beam4.$t.fr") || exit 1
    chrf=$("$BIN/score" chrf -b -w 2 -r "$OUT/test.fr" "$OUT/beam4.$t.fr") || exit 1
    [ "$t" = float32 ] && bleu32=$bleu chrf32=$chrf
    echo "$t $bleu $chrf $bleu32 $chrf32 $(identical "$OUT/beam4.$t.fr" "$OUT/beam4.float32.fr")" \
        "$(identical "$OUT/greedy.$t.fr" "$OUT/greedy.float32.fr")" | awk '{
        printf "  %-7s beam 4: BLEU %6.2f (%+.2f)  chrF %6.2f (%+.2f);  identical to float32: beam 4 %6.2f%%, greedy %6.2f%%\n",
            $1, $2, $2 - $4, $3, $3 - $5, $6, $7
        printf "quant_quality compute=%s bleu=%.2f chrf=%.2f d_bleu=%.2f d_chrf=%.2f beam_identical=%.2f greedy_identical=%.2f\n",
            $1, $2, $3, $2 - $4, $3 - $5, $6, $7 }'
done
rm -f "$OUT/float32.st" "$OUT/bf16.st" "$OUT/int8.st"
