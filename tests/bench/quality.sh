#!/bin/sh
# quality.sh BUILD - the quality benchmark (make bench-quality): what a user
# gets from 30 minutes of training on two CPUs, tfm beside the PyTorch
# reference (../shared/reference/torch_nmt.py, torch.nn.Transformer) on the
# same data, in the same run.
#
#   1. data: the English-French corpus (../shared/data/enfr: 266k pairs of
#      software UI strings; valid and test 2,000 each); one 8k joint BPE
#      vocabulary (tokenize learn); id files for both trainers.
#   2. tfm: train --preset small with its defaults and TFM_RECIPE (default:
#      nothing more) for QUALITY_MINUTES of wall time, validation included,
#      validating every VALID_EVERY updates.
#   3. the reference: the same small model, the paper's recipe as issue 12
#      ran it (--lr_factor 0.3 --warmup_lr 150 --batch_tokens 4096, dropout
#      and label smoothing 0.1), for QUALITY_MINUTES of training time
#      (its validations are not counted: a small advantage to it).
#   4. both translate the test set with beam 4 (each with its own default
#      length rule: tfm's log-probability per token, the reference's GNMT
#      penalty with alpha 0.6) and are
#      scored by 'score' (BLEU as sacreBLEU's 13a, chrF2) against the raw
#      French references, after detokenising with the same vocabulary.
#   5. tfm's model in int8 and bf16 against float32 (quant_quality.sh):
#      test BLEU and chrF, sentences identical to float32's.
#
# Prints both valid-perplexity curves (by update), the updates, the target
# tokens per second and the test scores side by side; keeps everything in
# BENCH_OUT/quality (logs, models, translations).  It is not part of `make
# check`: it takes about 2 x QUALITY_MINUTES + 10 minutes.
#
# Environment: QUALITY_MINUTES (30), THREADS (2), SEED (1), TFM_RECIPE,
# REF_SEED (1), SKIP_REF=1 (tfm only), SKIP_TFM=1 (reference only), SKIP_QUANT=1,
# TAG (a name for this run's files, default "run"), BENCH_OUT (build/bench).
#
# Output lines (machine-readable):
#   quality_bleu side=tfm|torch X, quality_chrf side=... X,
#   quality_updates side=... N, quality_valid_ppl side=... X
set -u
BUILD=${1:?usage: tests/bench/quality.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
MIN=${QUALITY_MINUTES:-30}
THREADS=${THREADS:-2}
SEED=${SEED:-1}
REF_SEED=${REF_SEED:-1}
TAG=${TAG:-run}
VALID_EVERY=${VALID_EVERY:-100}
# train's defaults (README: "Training"): the linear schedule to 0 at the
# budget's end, relative positions; TFM_RECIPE adds options (the recipe of
# the README before issue 29: --schedule noam --lr-factor 0.3 --warmup 150
# --relative-positions 0).
TFM_RECIPE=${TFM_RECIPE:-}
OUT=${BENCH_OUT:-build/bench}/quality
DATA="$ROOT/../shared/data/enfr"
REF="$ROOT/../shared/reference"
BIN="$BUILD/bin"
PY=/usr/bin/python3
export LC_ALL=C.UTF-8 OMP_WAIT_POLICY=passive

[ -f "$DATA/train.en.xz" ] || { echo "quality.sh: no corpus at $DATA"; exit 1; }
mkdir -p "$OUT/data" || exit 1
OUT=$(cd "$OUT" && pwd)
D="$OUT/data"

echo "quality: $(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $MIN minutes a side, $THREADS threads"

# ---- 1. data -------------------------------------------------------------------
if [ ! -s "$D/ref/test.ids.fr" ]; then
    sh tests/bench/pair_data.sh "$BIN" "$D" || exit 1
    # The reference's ids: <unk> is 3 there (tfm's </s>) and 1 is its <s>.
    mkdir -p "$D/ref"
    for f in "$D"/*.ids.*; do
        awk '{ for (i = 1; i <= NF; i++) if ($i == 1) $i = 3; print }' "$f" >"$D/ref/$(basename "$f")"
    done
fi
echo "data: $(wc -l <"$D/train.en") training pairs, 8k joint vocabulary, valid and test 2,000"

# ---- 2. tfm --------------------------------------------------------------------
translate_tfm() { # model, output text
    "$BIN/tokenize" -q -m "$1" <"$D/test.en" | "$BIN/encode" -q -m "$1" --threads "$THREADS" |
        "$BIN/decode" -q -m "$1" --beam 4 --threads "$THREADS" | "$BIN/tokenize" -q -d -m "$1" >"$2"
}
if [ "${SKIP_TFM:-0}" != 1 ]; then
    echo
    echo "== tfm: train --preset small $TFM_RECIPE --max-time ${MIN}m --threads $THREADS --seed $SEED"
    rm -f "$OUT/tfm-$TAG.tsv"
    # shellcheck disable=SC2086 # TFM_RECIPE is a list of options
    "$BIN/train" --preset small -m "$D/enfr.vocab" --src "$D/train.ids.en" --tgt "$D/train.ids.fr" \
        --valid-src "$D/valid.ids.en" --valid-tgt "$D/valid.ids.fr" --valid-every "$VALID_EVERY" \
        $TFM_RECIPE --max-time "${MIN}m" --threads "$THREADS" --seed "$SEED" --save-every 0 \
        --progress 60 --log "$OUT/tfm-$TAG.tsv" -o "$OUT/tfm-$TAG.st" 2>&1 | tee "$OUT/tfm-$TAG.log" | tail -4
    translate_tfm "$OUT/tfm-$TAG.st" "$OUT/tfm-$TAG.test.fr"
fi

# ---- 3. the reference ------------------------------------------------------------
if [ "${SKIP_REF:-0}" != 1 ]; then
    if ! [ -f "$REF/torch_nmt.py" ] || ! $PY -c 'import torch' 2>/dev/null; then
        echo "the reference: skipped (no $REF/torch_nmt.py or no PyTorch: make deps-bench)"
    else
        echo
        echo "== the reference: torch_nmt.py --config small --lr_factor 0.3 --warmup_lr 150 --budget $((MIN * 60)) --seed $REF_SEED"
        $PY "$REF/torch_nmt.py" --mode train --config small --data "$D/ref" --src en --tgt fr \
            --batch_tokens 4096 --dropout 0.1 --label_smoothing 0.1 --lr_factor 0.3 --warmup_lr 150 \
            --budget $((MIN * 60)) --log_every 60 --seed "$REF_SEED" --threads "$THREADS" \
            --ckpt "$OUT/ref-$TAG.pt" --json "$OUT/ref-$TAG.json" >"$OUT/ref-$TAG.log" 2>&1
        tail -1 "$OUT/ref-$TAG.log"
        $PY "$REF/torch_nmt.py" --mode translate --data "$D/ref" --ckpt "$OUT/ref-$TAG.pt" \
            --input "$D/ref/test.ids.en" --output "$OUT/ref-$TAG.test.ids" --beam 4 --alpha 0.6 \
            --threads "$THREADS" >>"$OUT/ref-$TAG.log" 2>&1
        # Back to tfm's ids (the reference's <unk> 3 is tfm's 1), then text.
        awk '{ for (i = 1; i <= NF; i++) if ($i == 3) $i = 1; print }' "$OUT/ref-$TAG.test.ids" |
            "$BIN/tokenize" -q -d -m "$D/enfr.vocab" >"$OUT/ref-$TAG.test.fr"
    fi
fi

# ---- 4. curves and scores ------------------------------------------------------------
echo
echo "== valid perplexity by update (tfm: every $VALID_EVERY updates; the reference: every 60 s)"
{
    [ -f "$OUT/tfm-$TAG.tsv" ] &&
        awk -F'\t' 'NR > 1 && $8 == "valid" { printf "tfm %d %.2f %.0f\n", $1, $4, $7 }' "$OUT/tfm-$TAG.tsv"
    [ -f "$OUT/ref-$TAG.json" ] && $PY -c '
import json, sys
for r in json.load(open(sys.argv[1]))["log"]:
    print("torch %d %.2f %.0f" % (r["step"], r["valid_ppl"], r["train_clock_s"]))' "$OUT/ref-$TAG.json"
} | sort -k2,2n -k1,1 | awk '{ printf "  %-6s update %5d  valid ppl %8.2f  at %5d s\n", $1, $2, $3, $4 }'

echo
echo "== test set, beam 4: BLEU and chrF against the raw references"
for side in tfm ref; do
    hyp="$OUT/$side-$TAG.test.fr"
    [ -s "$hyp" ] || continue
    name=$side; [ "$side" = ref ] && name=torch
    bleu=$("$BIN/score" bleu -b -r "$D/test.fr" "$hyp")
    chrf=$("$BIN/score" chrf -b -r "$D/test.fr" "$hyp")
    if [ "$side" = tfm ]; then
        updates=$(awk -F'\t' 'NR > 1 && $8 == "train" { s = $1 } END { print s }' "$OUT/tfm-$TAG.tsv")
        ppl=$(awk -F'\t' 'NR > 1 && $8 == "valid" { p = $4 } END { print p }' "$OUT/tfm-$TAG.tsv")
        # target tokens over the wall time, validations included
        rate=$(awk -F'\t' 'NR > 1 && $8 == "train" { t += $11; e = $7 } END { printf "%.0f", e ? t / e : 0 }' "$OUT/tfm-$TAG.tsv")
    else
        set -- $($PY -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["steps"], "%.2f" % r["final_valid_ppl"], "%.0f" % r["tok_per_s"])' "$OUT/ref-$TAG.json")
        updates=$1 ppl=$2 rate=$3
    fi
    echo "  $name: BLEU $bleu  chrF $chrf  ($updates updates, valid ppl $ppl at the end, ~$rate target tokens/s)"
    echo "quality_bleu side=$name tag=$TAG $bleu"
    echo "quality_chrf side=$name tag=$TAG $chrf"
    echo "quality_updates side=$name tag=$TAG $updates"
    echo "quality_valid_ppl side=$name tag=$TAG $ppl"
done

# ---- 5. tfm's model in int8 and bf16 -------------------------------------------------
if [ "${SKIP_QUANT:-0}" != 1 ] && [ -f "$OUT/tfm-$TAG.st" ]; then
    echo
    echo "== tfm's model quantized (tests/bench/quant_quality.sh)"
    THREADS=$THREADS sh tests/bench/quant_quality.sh "$BUILD" "$OUT/tfm-$TAG.st"
fi
