#!/bin/sh
# curves.sh BUILD - the learning-curve benchmark (make bench-curves): does
# train learn as much per update as the PyTorch reference, with dropout on?
#
# Trains the small preset on ../shared/data/enfr for MAX_STEPS updates (1,500)
# with the README's recipe and every dropout site of nn.Transformer (0.1 on
# the residuals, the attention weights and the FFN activation; label
# smoothing 0.1), twice on each side with seeds 1 and 2, and prints the valid
# perplexity of all four runs at every 100th update, with the reference's
# run-to-run spread and whether each tfm run lies inside it or below it (a
# lower perplexity is a better model).
#
# The runs are one thread each, two at a time (the two references, then the
# two tfm runs): the curve is by update, so the machine's speed does not
# change it; tfm's training is the same bit for bit at any thread count.  The
# data comes from quality.sh (run first if build/bench/quality/data is
# missing).  About 2.5 hours on two CPUs (measured: the reference at one
# thread costs about 4.8 CPU-seconds an update, tfm about 2.7).
#
# The reference validates by time (every LOG_SECONDS of its training clock);
# its perplexity at update u is interpolated between the two logged updates
# around u, linearly in log perplexity.
#
# Environment: MAX_STEPS (1500), LOG_SECONDS (60), BENCH_OUT (build/bench),
# REPORT_ONLY=1 (print the table from the logs of an earlier run).
#
# Output lines (machine-readable), one per 100 updates:
#   curve update=U tfm1=X tfm2=X ref1=X ref2=X   (-1: not reached)
# and at the end: curves_inside N (tfm points inside the reference's band or
# below it), curves_above N (points above it).  REPORT_ONLY=1 prints the
# table from the logs as they are, also of runs still going or stopped.
set -u
BUILD=${1:?usage: tests/bench/curves.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
STEPS=${MAX_STEPS:-1500}
LOG_SECONDS=${LOG_SECONDS:-60}
OUT=${BENCH_OUT:-build/bench}
D="$OUT/quality/data"
C="$OUT/curves"
REF="$ROOT/../shared/reference"
BIN="$BUILD/bin"
PY=/usr/bin/python3
export LC_ALL=C.UTF-8 OMP_WAIT_POLICY=passive

if [ ! -s "$D/test.ids.fr" ]; then
    SKIP_TFM=1 SKIP_REF=1 sh tests/bench/quality.sh "$BUILD" >/dev/null || exit 1
fi
$PY -c 'import torch' 2>/dev/null || { echo "curves.sh: no PyTorch (make deps-bench)"; exit 1; }
mkdir -p "$C" || exit 1

# OPENBLAS_NUM_THREADS=1: torch's --threads sets its OpenMP pool, but
# Debian's torch multiplies through OpenBLAS (pthreads), whose own pool
# otherwise adds a thread per CPU to each run.
run_ref() { # seed
    OPENBLAS_NUM_THREADS=1 $PY "$REF/torch_nmt.py" --mode train --config small --data "$D/ref" --src en --tgt fr \
        --batch_tokens 4096 --dropout 0.1 --label_smoothing 0.1 --lr_factor 0.3 --warmup_lr 150 \
        --budget 1000000 --max_steps "$STEPS" --log_every "$LOG_SECONDS" --seed "$1" --threads 1 \
        --json "$C/ref$1.json" >"$C/ref$1.log" 2>&1
}
run_tfm() { # seed
    "$BIN/train" --preset small -m "$D/enfr.vocab" --src "$D/train.ids.en" --tgt "$D/train.ids.fr" \
        --valid-src "$D/valid.ids.en" --valid-tgt "$D/valid.ids.fr" --valid-every 100 \
        --schedule noam --lr-factor 0.3 --warmup 150 --batch-tokens 4096 --relative-positions 0 \
        --attention-dropout 0.1 --activation-dropout 0.1 --max-steps "$STEPS" --threads 1 \
        --seed "$1" --save-every 0 --log "$C/tfm$1.tsv" -o "$C/tfm$1.st" >"$C/tfm$1.log" 2>&1
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
    echo "curves: $(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs, $STEPS updates, 4 runs of one thread, two at a time"
    rm -f "$C"/ref*.json "$C"/ref*.log "$C"/tfm*.tsv
    run_ref 1 & run_ref 2 & wait
    run_tfm 1 & run_tfm 2 & wait
fi

# One line per run and update: "name update ppl".
{
    for s in 1 2; do
        [ -f "$C/tfm$s.tsv" ] &&
            awk -F'\t' -v n="tfm$s" 'NR > 1 && $8 == "valid" { print n, $1, $4 }' "$C/tfm$s.tsv"
        # the reference's log lines: "step N ... ppl X ..." (a run stopped early has no JSON)
        [ -f "$C/ref$s.log" ] && awk -v n="ref$s" '$1 == "step" {
            for (i = 1; i < NF; i++) if ($i == "ppl") print n, $2, $(i + 1) }' "$C/ref$s.log"
    done
} >"$C/points.txt"

echo "== valid perplexity by update (small preset, enfr, dropout 0.1 at every site, seeds 1 and 2)"
echo "   update     tfm 1     tfm 2     ref 1     ref 2    tfm against the reference's band"
awk -v steps="$STEPS" '
    { name[NR] = $1; up[NR] = $2; ppl[NR] = $3 }
    # The perplexity of run n at update u: exact for tfm, interpolated for the reference.
    function at(n, u,   i, lo, hi, lu, hu, lp, hp) {
        lu = -1; hu = -1
        for (i = 1; i <= NR; i++) {
            if (name[i] != n) continue
            if (up[i] == u) return ppl[i]
            if (up[i] < u && up[i] > lu) { lu = up[i]; lp = ppl[i] }
            if (up[i] > u && (hu < 0 || up[i] < hu)) { hu = up[i]; hp = ppl[i] }
        }
        if (lu < 0 || hu < 0) return -1
        return exp(log(lp) + (log(hp) - log(lp)) * (u - lu) / (hu - lu))
    }
    function show(x) { return x < 0 ? "        -" : sprintf("%9.2f", x) }
    END {
        inside = above = 0
        for (u = 100; u <= steps; u += 100) {
            t1 = at("tfm1", u); t2 = at("tfm2", u); r1 = at("ref1", u); r2 = at("ref2", u)
            verdict = ""
            if (r1 > 0 && r2 > 0) {
                hi = r1 > r2 ? r1 : r2; lo = r1 < r2 ? r1 : r2
                for (k = 1; k <= 2; k++) {
                    t = k == 1 ? t1 : t2
                    if (t < 0) continue
                    if (t > hi) { above++; verdict = verdict " above" }
                    else { inside++; verdict = verdict (t < lo ? " below" : " inside") }
                }
            }
            printf "   %6d %s %s %s %s   %s\n", u, show(t1), show(t2), show(r1), show(r2), verdict
            printf "curve update=%d tfm1=%.2f tfm2=%.2f ref1=%.2f ref2=%.2f\n", u, t1, t2, r1, r2 >"/dev/stderr"
        }
        printf "curves_inside %d\ncurves_above %d\n", inside, above
    }' "$C/points.txt" 2>"$C/curve-lines.txt"
cat "$C/curve-lines.txt"
