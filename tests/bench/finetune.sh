#!/bin/sh
# finetune.sh BUILD - domain adaptation by fine-tuning (make bench-finetune):
# what `train --init` buys on one product family's strings, on
# ../shared/data/enfr and its *.origin files (the package of every line).
#
#   1. data: the domain is the compiler and binutils diagnostics (packages
#      DOMAIN, default gcc-12-locales and binutils-common: about 25,700
#      training lines).  DOMAIN_TEST (1,200) of its training lines with
#      distinct sources are held out as the domain test; every training line
#      whose source is one of theirs is dropped from all training data.  The
#      general data are the other training lines; the general test is the
#      test set without the domain's packages.  One 8k joint vocabulary,
#      learnt from the general data only (the general model's).
#   2. general: train --preset small, defaults, GENERAL_MINUTES (30), on the
#      general data (validation: the valid set without the domain).
#   3. fine-tuned: train --init general on the domain data for FT_MINUTES (5),
#      with FT_RECIPE (default: train's defaults).
#   4. mixed: the same, on the domain data and MIX_SHARE (50) percent as many
#      general lines besides them, drawn at random, with MIX_RECIPE (default
#      --lr-factor 0.1: a third of the default peak rate, which keeps the
#      general test within a chrF point of the general model's).
#   5. domain alone: train --preset small on the domain data for
#      GENERAL_MINUTES + FT_MINUTES (35), from random weights.
#   6. every model translates both tests (beam 4); BLEU and chrF by 'score'.
#
# Prints the table and keeps everything in BENCH_OUT/finetune.  Not part of
# `make check`: it takes about 2 x (GENERAL_MINUTES + FT_MINUTES) + 15
# minutes.  Environment: GENERAL_MINUTES, FT_MINUTES, FT_RECIPE, MIX_SHARE, MIX_RECIPE,
# DOMAIN ("pkg1|pkg2"), DOMAIN_TEST, THREADS (2), SEED (1), SKIP_ALONE=1,
# BENCH_OUT (build/bench).
#
# Output lines (machine-readable): finetune_bleu model=M test=domain|general X,
# finetune_chrf model=M test=... X.
set -u
BUILD=${1:?usage: tests/bench/finetune.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
GMIN=${GENERAL_MINUTES:-30}
FMIN=${FT_MINUTES:-5}
FT_RECIPE=${FT_RECIPE:-}
MIX_RECIPE=${MIX_RECIPE---lr-factor 0.1}
MIX=${MIX_SHARE:-50}
DOMAIN=${DOMAIN:-gcc-12-locales|binutils-common}
NTEST=${DOMAIN_TEST:-1200}
THREADS=${THREADS:-2}
SEED=${SEED:-1}
OUT=${BENCH_OUT:-build/bench}/finetune
DATA="$ROOT/../shared/data/enfr"
BIN="$BUILD/bin"
export LC_ALL=C.UTF-8

[ -f "$DATA/train.origin.xz" ] || { echo "finetune.sh: no corpus at $DATA"; exit 1; }
mkdir -p "$OUT/data" || exit 1
OUT=$(cd "$OUT" && pwd)
D="$OUT/data"
echo "finetune: $(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), general ${GMIN} min, fine-tuning ${FMIN} min, $THREADS threads"
echo "domain: packages $DOMAIN"

# ---- 1. data -------------------------------------------------------------------
# split ORIGIN EN FR PREFIX: PREFIX.dom.{en,fr} (the domain's lines) and
# PREFIX.gen.{en,fr} (the others).
split() {
    paste "$1" "$2" "$3" | awk -F'\t' -v dom="^($DOMAIN)\$" -v p="$4" '
        { d = $1 ~ dom ? "dom" : "gen"; print $3 > (p "." d ".en"); print $4 > (p "." d ".fr") }'
}
# sample N: N lines of stdin drawn at random, the same for the same input.
sample() {
    awk 'BEGIN { srand(1) } { printf "%.9f\t%s\n", rand(), $0 }' | sort -k1,1 | head -n "$1" | cut -f2-
}
if [ ! -s "$D/mixed.fr" ]; then
    for s in train valid test; do
        for x in en fr origin; do xz -dc "$DATA/$s.$x.xz" >"$D/$s.$x" || exit 1; done
        split "$D/$s.origin" "$D/$s.en" "$D/$s.fr" "$D/$s" || exit 1
    done
    # The domain's test: NTEST distinct sources drawn with a fixed seed;
    # every training pair with one of these sources leaves the training data.
    paste "$D/train.dom.en" "$D/train.dom.fr" |
        awk -F'\t' '!seen[$1]++' | sample "$NTEST" >"$D/domtest.tsv"
    cut -f1 "$D/domtest.tsv" >"$D/domain-test.en"
    cut -f2 "$D/domtest.tsv" >"$D/domain-test.fr"
    for part in dom gen; do
        paste "$D/train.$part.en" "$D/train.$part.fr" |
            awk -F'\t' 'NR == FNR { held[$1] = 1; next } !($1 in held)' "$D/domain-test.en" - \
            >"$D/$part.tsv"
        cut -f1 "$D/$part.tsv" >"$D/$part.en"
        cut -f2 "$D/$part.tsv" >"$D/$part.fr"
    done
    mv "$D/test.gen.en" "$D/general-test.en"
    mv "$D/test.gen.fr" "$D/general-test.fr"
    # Mixed: the domain and MIX% as many general pairs.
    n=$(($(wc -l <"$D/dom.tsv") * MIX / 100))
    { cat "$D/dom.tsv"; sample "$n" <"$D/gen.tsv"; } >"$D/mixed.tsv"
    cut -f1 "$D/mixed.tsv" >"$D/mixed.en"
    cut -f2 "$D/mixed.tsv" >"$D/mixed.fr"
    "$BIN/tokenize" learn -q --vocab-size 8000 "$D/gen.en" "$D/gen.fr" -o "$D/general.vocab" || exit 1
fi
echo "data: general $(wc -l <"$D/gen.en") pairs, domain $(wc -l <"$D/dom.en"), mixed $(wc -l <"$D/mixed.en") ($MIX% general besides the domain);" \
     "tests: domain $(wc -l <"$D/domain-test.en"), general $(wc -l <"$D/general-test.en")"

# ---- 2-5. the models ---------------------------------------------------------------
# train_model NAME MINUTES OPTIONS...: text data, tokenized by train itself.
train_model() {
    name=$1 min=$2; shift 2
    [ -s "$OUT/$name.st" ] && { echo "== $name: kept from an earlier run"; return 0; }
    echo "== $name: train $* --max-time ${min}m"
    rm -f "$OUT/$name.tsv"
    "$BIN/train" "$@" --max-time "${min}m" --threads "$THREADS" --seed "$SEED" --save-every 0 \
        --progress 60 --log "$OUT/$name.tsv" -o "$OUT/$name.st" >"$OUT/$name.log" 2>&1 ||
        { tail -3 "$OUT/$name.log"; exit 1; }
    tail -1 "$OUT/$name.log"
}
train_model general "$GMIN" --preset small -m "$D/general.vocab" --src "$D/gen.en" \
    --tgt "$D/gen.fr" --valid-src "$D/valid.gen.en" --valid-tgt "$D/valid.gen.fr" --valid-every 500
# shellcheck disable=SC2086 # FT_RECIPE is a list of options
train_model finetuned "$FMIN" --init "$OUT/general.st" --src "$D/dom.en" --tgt "$D/dom.fr" $FT_RECIPE
# shellcheck disable=SC2086
train_model mixed "$FMIN" --init "$OUT/general.st" --src "$D/mixed.en" --tgt "$D/mixed.fr" $MIX_RECIPE
AMIN=$(awk -v a="$GMIN" -v b="$FMIN" 'BEGIN { print a + b }')
[ "${SKIP_ALONE:-0}" = 1 ] ||
    train_model alone "$AMIN" --preset small -m "$D/general.vocab" --src "$D/dom.en" \
        --tgt "$D/dom.fr"

# ---- 6. scores -------------------------------------------------------------------------
echo
echo "== beam 4; BLEU / chrF against the raw references"
printf '  %-34s %16s %16s\n' model "domain test" "general test"
rm -f "$OUT/scores.txt"
for name in general finetuned mixed alone; do
    [ -s "$OUT/$name.st" ] || continue
    line=""
    for t in domain general; do
        hyp="$OUT/$name.$t-test.fr"
        "$BIN/tokenize" -q -m "$OUT/$name.st" <"$D/$t-test.en" |
            "$BIN/encode" -q -m "$OUT/$name.st" --threads "$THREADS" |
            "$BIN/decode" -q -m "$OUT/$name.st" --threads "$THREADS" |
            "$BIN/tokenize" -q -d -m "$OUT/$name.st" >"$hyp"
        bleu=$("$BIN/score" bleu -b -r "$D/$t-test.fr" "$hyp")
        chrf=$("$BIN/score" chrf -b -r "$D/$t-test.fr" "$hyp")
        echo "finetune_bleu model=$name test=$t $bleu" >>"$OUT/scores.txt"
        echo "finetune_chrf model=$name test=$t $chrf" >>"$OUT/scores.txt"
        line="$line $(printf '%16s' "$bleu / $chrf")"
    done
    case $name in
    general) what="general (${GMIN} min)" ;;
    finetuned) what="+ fine-tuned on the domain (${FMIN} min)" ;;
    mixed) what="+ fine-tuned, mixed $MIX% ${MIX_RECIPE:-} (${FMIN} min)" ;;
    alone) what="domain alone ($AMIN min)" ;;
    esac
    printf '  %-34s%s\n' "$what" "$line"
done
grep -h '^finetune_' "$OUT/scores.txt" | tail -n 16
