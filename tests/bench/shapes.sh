#!/bin/sh
# shapes.sh BUILD - models shaped for translating on CPUs (make bench-shapes):
# shapes that move depth from the decoder to the encoder, each trained for
# the same time as the small preset on the same data, with the defaults
# otherwise, then compared on quality and decoding speed.
#
#   1. data: ../shared/data/PAIR for each of PAIRS (default "enfr enru"),
#      one 8k joint vocabulary each (pair_data.sh).
#   2. one model per pair and shape, trained for TIME (default 30m) on
#      THREADS (2) threads, validation every 500 updates; JOBS=N trains N
#      at a time side by side with THREADS / N threads each (the models of
#      a batch then share the machine alike).  SHAPES is a
#      list of NAME=OPTIONS separated by ';' (default below: small 3+3,
#      small-cpu 3+1 pre-norm, then 6+1, 6+2 and 8+2 pre-norm at d_model
#      256, and 6+2 pre-norm at d_model 512).  Resumable: run again, a
#      model that exists is kept and a stopped run goes on from its
#      checkpoints (train --resume, with the time already spent), so the
#      whole can be spread over several runs.
#   3. for each model: the validation perplexity and the updates made, test
#      BLEU and chrF (score, sacreBLEU's numbers) with beam 4 and greedy,
#      and the time of decode alone (encode timed apart) on the test set at
#      batch 64 and on its first 500 lines at batch 1, beam 4 and greedy:
#      rounds interleaved over the models, best of ROUNDS (3), as a speed-up
#      on the first shape of the list.
#
# Everything stays in BENCH_OUT/shapes (default build/bench/shapes).
# LINES=N keeps the first N training pairs and TEST_LINES=N the first N
# test lines (a quick trial, with a short TIME).  Lines for scripts:
#   shapes_quality pair=P shape=S search=beam4|greedy bleu=X chrf=Y ppl=Z updates=N
#   shapes_speedup pair=P shape=S search=beam4|greedy batch=64|1 X
set -u
BUILD=${1:?usage: tests/bench/shapes.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
BIN="$BUILD/bin"
THREADS=${THREADS:-2}
TIME=${TIME:-30m}
JOBS=${JOBS:-1}
ROUNDS=${ROUNDS:-3}
PAIRS=${PAIRS:-enfr enru}
LINES=${LINES:-}
SHAPES=${SHAPES:-small=--preset small;\
small-cpu=--preset small-cpu;\
6+1=--preset small --encoder-layers 6 --decoder-layers 1 --pre-norm;\
6+2=--preset small --encoder-layers 6 --decoder-layers 2 --pre-norm;\
8+2=--preset small --encoder-layers 8 --decoder-layers 2 --pre-norm;\
6+2-d512=--preset small --d-model 512 --d-ff 2048 --heads 8 \
--encoder-layers 6 --decoder-layers 2 --pre-norm}
OUT=${BENCH_OUT:-build/bench}/shapes
export LC_ALL=C.UTF-8
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
cpu=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)
echo "shapes: $(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs ($cpu), $THREADS threads, $TIME per model"

. tests/bench/resumable.sh # train_resumable, in_batches, shape_names, shape_options, updates_of
. tests/bench/decode_speed.sh # decode_rounds, decode_speedups

# The shapes' names, in the list's order (the first is the speed's yardstick).
names=$(shape_names "$SHAPES")

# train_shape NAME: the model of shape NAME on the pair being trained.
train_shape() {
    options=$(shape_options "$SHAPES" "$1") || { echo "shapes.sh: no shape $1 in SHAPES"; return 1; }
    # shellcheck disable=SC2086 # the options are a list
    train_resumable "$OUT/$pair-$1.st" "$d/$pair.vocab" "$d/train.ids.en" "$d/train.ids.$t" \
        "$d/valid.ids.en" "$d/valid.ids.$t" "$TIME" $options
}

: >"$OUT/lines.txt"
for pair in $PAIRS; do
    t=${pair#en}
    d="$OUT/data-$pair"
    sh tests/bench/pair_data.sh "$BIN" "$d" "$pair" $LINES || exit 1
    # the test set (TEST_LINES: its first lines alone, for a quick trial)
    head -n "${TEST_LINES:-999999}" "$d/test.ids.en" >"$d/test.part.ids.en"
    head -n "${TEST_LINES:-999999}" "$d/test.$t" >"$d/test.part.$t"
    echo "== $pair: training, $JOBS at a time with $(threads_each "$JOBS") threads each"
    # shellcheck disable=SC2086 # a list of names
    in_batches "$JOBS" train_shape $names || exit 1

    # Quality: the last validation, the updates, BLEU / chrF on the test set.
    for name in $names; do
        m="$OUT/$pair-$name.st"
        valid=$(valid_ppl_of "$m.tsv") updates=$(updates_of "$m.tsv")
        for beam in 4 1; do
            search=beam4
            [ $beam = 1 ] && search=greedy
            "$BIN/encode" -q -m "$m" --threads "$THREADS" <"$d/test.part.ids.en" |
                "$BIN/decode" -q -m "$m" --beam $beam --threads "$THREADS" |
                "$BIN/tokenize" -q -d -m "$m" >"$OUT/$pair-$name.$search.$t"
            bleu=$("$BIN/score" bleu -b -r "$d/test.part.$t" "$OUT/$pair-$name.$search.$t")
            chrf=$("$BIN/score" chrf -b -r "$d/test.part.$t" "$OUT/$pair-$name.$search.$t")
            echo "shapes_quality pair=$pair shape=$name search=$search bleu=$bleu chrf=$chrf" \
                "ppl=$valid updates=$updates" >>"$OUT/lines.txt"
        done
    done

    # Speed: decode alone from states encoded once, rounds interleaved.
    models=""
    for name in $names; do models="$models $name=$OUT/$pair-$name.st"; done
    # shellcheck disable=SC2086 # a list of NAME=MODEL
    decode_rounds "$ROUNDS" "$d/test.part.ids.en" $models || exit 1
    first=$(echo "$names" | head -1)
    # shellcheck disable=SC2086 # a list of names
    decode_speedups "shapes_speedup pair=$pair shape=" "$first" $names >>"$OUT/lines.txt"

    echo
    echo "== $pair: test BLEU / chrF (beam 4, greedy); decode speed-up on $first" \
        "(beam 4 b64 / b1, greedy b64 / b1)"
    printf '  %-10s %8s %8s  %-13s %-13s %s\n' shape updates "val ppl" "beam 4" greedy "speed-up"
    for name in $names; do
        # q SEARCH FIELD: a field (bleu, chrf, ppl, updates) of this shape's quality line
        q() {
            sed -n "s/^shapes_quality pair=$pair shape=$name search=$1 .*$2=\([^ ]*\).*/\1/p" \
                "$OUT/lines.txt"
        }
        sp() { sed -n "s/^shapes_speedup pair=$pair shape=$name search=$1 batch=$2 //p" "$OUT/lines.txt"; }
        printf '  %-10s %8s %8s  %-13s %-13s %s / %s, %s / %s\n' "$name" "$(q beam4 updates)" \
            "$(q beam4 ppl)" "$(q beam4 bleu) / $(q beam4 chrf)" "$(q greedy bleu) / $(q greedy chrf)" \
            "$(sp beam4 64)" "$(sp beam4 1)" "$(sp greedy 64)" "$(sp greedy 1)"
    done
done
echo
cat "$OUT/lines.txt"
