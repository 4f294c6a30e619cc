#!/bin/sh
# placeholders.sh BUILD - make bench-placeholders: what a translation does to
# the placeholders and terms of software strings, on the enfr test set
# (../shared/data/enfr: 2,000 strings of Debian's gettext catalogs), beam 4.
#
#   1. data and models.  PLAIN: the README's recipe (an 8k joint vocabulary,
#      train --preset small --lr-factor 0.3 --warmup 150 --batch-tokens 4096)
#      for BENCH_MINUTES (30) of wall time, or --max-steps BENCH_STEPS when
#      set; PH: the same with the vocabulary learnt by 'tokenize learn
#      --placeholders' and the training text tokenized with --placeholders.
#      PLAIN_MODEL=FILE and PH_MODEL=FILE use models trained before (PH_MODEL
#      with a vocabulary that has the placeholder tokens).
#   2. translations of the test set: the plain model; the placeholder model
#      without steering (its placeholder tokens put back by 'tokenize -d
#      --placeholders') and with 'decode --placeholders' (constrained beam
#      search that keeps exactly the source's placeholders), beam 4 and
#      greedy (ph-free-greedy, ph-greedy); each model with
#      a glossary ('tokenize --glossary', 'decode --constraints') made from
#      word pairs of the training data (placeholders.py): the terms of each
#      line that its reference holds too (Dinu et al.'s setting, "terms"),
#      and for the plain model also the whole glossary wherever a source
#      term is found ("whole glossary"), as a user would apply it.
#   3. measures (placeholders.py report): placeholders kept (the lines with
#      placeholders whose output holds exactly the source's multiset; the
#      references' own rate beside them), c-format entries that 'msgfmt
#      --check-format' rejects, the term use rate (Dinu et al., 2019), BLEU
#      and chrF (score), and the target tokens per second of decode with and
#      without constraints on the same encoder states, in this run.
#
# Output lines (machine-readable): placeholders name=... keep= msgfmt=
# msgfmt_all= terms=; bench_ph_quality name=... bleu=X chrf=X;
# bench_ph_speed what=... time_ratio=R constrained_tps=T unconstrained_tps=T.
# Everything stays in BENCH_OUT/placeholders (build/bench).  Not part of
# make check: about 2 x BENCH_MINUTES + 10 minutes with training.
#
# Environment: BENCH_MINUTES (30), BENCH_STEPS, THREADS (2), SEED (1),
# PLAIN_MODEL, PH_MODEL, BENCH_OUT.
set -u
BUILD=${1:?usage: tests/bench/placeholders.sh BUILD}
BIN=$(cd "$BUILD" && pwd)/bin || exit 1
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
DATA="$ROOT/../shared/data/enfr"
THREADS=${THREADS:-2}
SEED=${SEED:-1}
MIN=${BENCH_MINUTES:-30}
OUT=${BENCH_OUT:-build/bench}/placeholders
PY=/usr/bin/python3
export LC_ALL=C.UTF-8 OMP_WAIT_POLICY=passive

[ -f "$DATA/train.en.xz" ] || { echo "placeholders.sh: no corpus at $DATA"; exit 1; }
command -v msgfmt >/dev/null || { echo "placeholders.sh: no msgfmt (make deps-bench installs gettext)"; exit 1; }
mkdir -p "$OUT/data" || exit 1
OUT=$(cd "$OUT" && pwd)
D="$OUT/data"
echo "placeholders: $(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')), $THREADS threads"

# ---- 1. data and models --------------------------------------------------------------
if [ ! -s "$D/glossary.tsv" ]; then
    for s in train valid test; do
        for l in en fr; do xz -dc "$DATA/$s.$l.xz" >"$D/$s.$l" || exit 1; done
    done
    "$BIN/tokenize" learn -q --vocab-size 8000 "$D/train.en" "$D/train.fr" -o "$D/plain.vocab" || exit 1
    "$BIN/tokenize" learn -q --placeholders --vocab-size 8000 "$D/train.en" "$D/train.fr" \
        -o "$D/ph.vocab" || exit 1
    for s in train valid; do
        for l in en fr; do
            "$BIN/tokenize" -q -m "$D/plain.vocab" <"$D/$s.$l" >"$D/$s.plain.$l" || exit 1
            "$BIN/tokenize" -q --placeholders -m "$D/ph.vocab" <"$D/$s.$l" >"$D/$s.ph.$l" || exit 1
        done
    done
    $PY tests/bench/placeholders.py glossary "$D/train.en" "$D/train.fr" >"$D/glossary.tsv" || exit 1
fi
echo "data: $(wc -l <"$D/train.en") training pairs, 8k joint vocabularies (plain and with placeholder tokens), glossary of $(wc -l <"$D/glossary.tsv") word pairs"

BUDGET="--max-time ${MIN}m"
[ -n "${BENCH_STEPS:-}" ] && BUDGET="--max-steps $BENCH_STEPS"
train_model() { # NAME: trains OUT/NAME.st from the NAME id files
    # (the recipe of the README's table: the README's before issue 29)
    echo "== train $1: --preset small --schedule noam --lr-factor 0.3 --warmup 150 --relative-positions 0 --batch-tokens 4096 $BUDGET"
    "$BIN/train" --preset small -m "$D/$1.vocab" --src "$D/train.$1.en" --tgt "$D/train.$1.fr" \
        --valid-src "$D/valid.$1.en" --valid-tgt "$D/valid.$1.fr" --schedule noam --lr-factor 0.3 \
        --warmup 150 --relative-positions 0 \
        --batch-tokens 4096 $BUDGET --threads "$THREADS" --seed "$SEED" --save-every 0 \
        --progress 300 -o "$OUT/$1.st" 2>&1 | tail -2
}
PLAIN=${PLAIN_MODEL:-$OUT/plain.st}
PH=${PH_MODEL:-$OUT/ph.st}
[ -s "$PLAIN" ] || train_model plain
[ -s "$PH" ] || train_model ph
[ -s "$PLAIN" ] && [ -s "$PH" ] || { echo "placeholders.sh: no models"; exit 1; }

# ---- 2. translations -----------------------------------------------------------------
T="$D/test.en"
# encode MODEL NAME [TOKENIZE OPTION]...: the test set's states in OUT/NAME.npy
encode() {
    m=$1 name=$2; shift 2
    "$BIN/tokenize" -q -m "$m" "$@" <"$T" | "$BIN/encode" -q -m "$m" --threads "$THREADS" \
        >"$OUT/$name.npy" || exit 1
}
# decode MODEL NAME STATES [DECODE OPTION]...: OUT/NAME.ids, and the seconds in OUT/NAME.time
decode() {
    m=$1 name=$2 states=$3; shift 3
    /usr/bin/time -f %e -o "$OUT/$name.time" "$BIN/decode" -q -m "$m" --beam 4 \
        --threads "$THREADS" "$@" <"$OUT/$states.npy" >"$OUT/$name.ids" || exit 1
}
detok() { # MODEL NAME [OPTION]...: OUT/NAME.fr
    m=$1 name=$2; shift 2
    "$BIN/tokenize" -q -d -m "$m" "$@" <"$OUT/$name.ids" >"$OUT/$name.fr" || exit 1
}

encode "$PLAIN" plain
encode "$PH" ph --placeholders
# the glossary's constraints: Dinu et al.'s setting (each line's annotated
# terms: source word in the source, target word in the reference), and the
# whole glossary wherever a source term is found, as a user would apply it
$PY tests/bench/placeholders.py dinu-constraints "$BIN" "$PLAIN" "$D/glossary.tsv" "$T" \
    "$D/test.fr" >"$OUT/plain.terms.txt" || exit 1
$PY tests/bench/placeholders.py dinu-constraints "$BIN" "$PH" "$D/glossary.tsv" "$T" \
    "$D/test.fr" --placeholders >"$OUT/ph.terms.txt" || exit 1
"$BIN/tokenize" -q -m "$PLAIN" --glossary "$D/glossary.tsv" --constraints "$OUT/plain.gloss.txt" \
    <"$T" >/dev/null || exit 1
echo "glossary: $(grep -c . "$OUT/plain.terms.txt") test lines with annotated terms; the whole glossary finds terms in $(grep -c . "$OUT/plain.gloss.txt")"

# each pair of runs twice, interleaved, the faster of each kept (a shared machine)
RUNS="plain plain-terms plain-glossary ph-free ph ph-terms ph-free-greedy ph-greedy"
for round in 1 2; do
    decode "$PLAIN" plain plain
    decode "$PLAIN" plain-terms plain --constraints "$OUT/plain.terms.txt"
    decode "$PLAIN" plain-glossary plain --constraints "$OUT/plain.gloss.txt"
    decode "$PH" ph-free ph
    decode "$PH" ph ph --placeholders "$T"
    decode "$PH" ph-terms ph --placeholders "$T" --constraints "$OUT/ph.terms.txt"
    # greedy, with and without the placeholders' constrained search
    decode "$PH" ph-free-greedy ph --beam 1
    decode "$PH" ph-greedy ph --beam 1 --placeholders "$T"
    # the AVX2 kernels (TFM_ISA=avx2), for CPUs without AVX-512
    TFM_ISA=avx2 decode "$PLAIN" plain-avx2 plain
    TFM_ISA=avx2 decode "$PLAIN" plain-terms-avx2 plain --constraints "$OUT/plain.terms.txt"
    for n in $RUNS plain-avx2 plain-terms-avx2; do
        t=$(cat "$OUT/$n.time")
        b=$(cat "$OUT/$n.best" 2>/dev/null || echo 1e9)
        awk -v t="$t" -v b="$b" 'BEGIN { exit !(t < b) }' && echo "$t" >"$OUT/$n.best"
    done
done
for n in plain plain-terms plain-glossary; do detok "$PLAIN" "$n"; done
for n in ph-free ph ph-terms ph-free-greedy ph-greedy; do detok "$PH" "$n" --placeholders "$T"; done

# ---- 3. measures ---------------------------------------------------------------------
echo
echo "== placeholders and terms (beam 4; the references' own rates first)"
$PY tests/bench/placeholders.py report "$BIN" "$T" "$D/test.fr" \
    "plain=$OUT/plain.fr" "plain+terms=$OUT/plain-terms.fr" \
    "plain+whole_glossary=$OUT/plain-glossary.fr" \
    "placeholders_unsteered=$OUT/ph-free.fr" "placeholders=$OUT/ph.fr" \
    "placeholders+terms=$OUT/ph-terms.fr" "placeholders_unsteered_greedy=$OUT/ph-free-greedy.fr" \
    "placeholders_greedy=$OUT/ph-greedy.fr" --glossary "$D/glossary.tsv"

echo
echo "== BLEU and chrF against the raw references"
for n in $RUNS; do
    bleu=$("$BIN/score" bleu -b -r "$D/test.fr" "$OUT/$n.fr")
    chrf=$("$BIN/score" chrf -b -r "$D/test.fr" "$OUT/$n.fr")
    printf '  %-16s BLEU %6s  chrF %6s\n' "$n" "$bleu" "$chrf"
    echo "bench_ph_quality name=$n bleu=$bleu chrf=$chrf"
done

echo
echo "== decode speed (beam 4 unless said, batch 64, $THREADS threads, best of 2 runs; the same encoder states)"
rate() { awk -v t="$(cat "$OUT/$1.best")" '{ n += NF } END { printf "%.0f", (t > 0 ? n / t : 0) }' "$OUT/$1.ids"; }
speed() { # WHAT UNCONSTRAINED CONSTRAINED
    u=$(rate "$2") c=$(rate "$3")
    r=$(awk -v u="$(cat "$OUT/$2.best")" -v c="$(cat "$OUT/$3.best")" 'BEGIN { printf "%.2f", (u > 0 ? c / u : 0) }')
    printf '  %-42s %sx the time of unconstrained beam 4 (%s against %s target tokens/s)\n' "$1" "$r" "$c" "$u"
    echo "bench_ph_speed what=$(echo "$1" | tr ' ,+' '___') time_ratio=$r constrained_tps=$c unconstrained_tps=$u"
}
speed "annotated terms, plain model" plain plain-terms
speed "the whole glossary, plain model" plain plain-glossary
speed "placeholders, placeholder model" ph-free ph
speed "placeholders + terms, placeholder model" ph-free ph-terms
speed "placeholders, placeholder model, greedy" ph-free-greedy ph-greedy
speed "annotated terms, plain model, TFM_ISA=avx2" plain-avx2 plain-terms-avx2
