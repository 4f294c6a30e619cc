#!/bin/sh
# train_mpi.sh BUILD - training across processes (a section of
# tests/bench/run.sh): on this machine, the same updates made by one process
# of T threads (--accum T) and by T processes of one thread each (mpirun -np
# T, each rank bound to a core), T = THREADS (the CPU count); the time an
# update spends summing gradients across the processes; the gradient sum on
# its own, train's (in rank order) against MPI_Allreduce's; and from these a
# model of training on 8 and 64 machines over 10 and 25 Gbit/s links.
#
# The data and batches are train.sh's: random ids of an 8000-piece
# vocabulary, 24 per sentence, 4096-token batches, so every update is T
# batches of 163 pairs whichever way it is shared.  Tokens per second are
# taken over the timed updates from rank 0's log (the first update, a
# warm-up, left out); the sum and wait times per update are what train
# prints at the end (averaged over all updates, the first included).
#
# The scaling model is an estimate, not a measurement: each machine is one
# like this one running one process of T threads, which makes T batches per
# update in the time measured here (compute); the gradient sum sends and
# receives 2 (M - 1) / M of the gradient per machine per update (as a ring
# allreduce does; train's sum in rank order sends as much), at the link's
# nominal rate, plus 2 (M - 1) message latencies of 50 us per bucket of
# TFM_DIST_BUCKET floats.  Without overlap an update takes compute +
# network; with the sum overlapping the backward pass perfectly, the larger
# of the two (train does not overlap them: see the sum's share of an update
# on this machine, printed as train_mpi_sum_share, for what overlap could
# gain here).
#
# Environment: THREADS (default: the CPU count), STEPS_SMALL (8) and
# STEPS_BASE (3) timed updates, PRESETS ("small base"; "tiny" for a quick
# check of the script), BENCH_OUT.
#
# Output lines (also for run.sh's summary):
#   train_mpi_tokens_per_s preset=P layout=1x2 X     (1 process x 2 threads)
#   train_mpi_tokens_per_s preset=P layout=2x1 X     (2 processes x 1 thread)
#   train_mpi_processes_vs_threads preset=P R        (2x1 over 1x2)
#   train_mpi_sum_ms preset=P ranks=2 X, train_mpi_wait_ms preset=P ranks=2 X
#   train_mpi_sum_share preset=P F                   (of an update's time)
#   allreduce_ms preset=P ranks=2 algorithm=A X, ordered_sum_ms preset=P ranks=2 X
#   scaling_estimate preset=P machines=M gbit=G speedup=S efficiency=E overlapped=O
set -u
BUILD=${1:?usage: tests/bench/train_mpi.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
STEPS_SMALL=${STEPS_SMALL:-8}
STEPS_BASE=${STEPS_BASE:-3}
PRESETS=${PRESETS:-small base}
OUT=${BENCH_OUT:-build/bench}/train_mpi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TRAIN="$BUILD/bin/train"
[ -x "$TRAIN" ] || { echo "train_mpi.sh: $TRAIN is not built"; exit 1; }
command -v mpirun >/dev/null 2>&1 || { echo "train_mpi.sh: no mpirun (make deps installs openmpi-bin)"; exit 1; }
[ "$THREADS" -ge 2 ] || { echo "train_mpi.sh: needs 2 CPUs or more (THREADS=$THREADS)"; exit 1; }
MPIRUN="mpirun -np $THREADS --bind-to core"
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"

. tests/bench/train_lib.sh  # V, LEN, BATCH_TOKENS, ids, rate, update_seconds
ids 3000 11 >"$OUT/data.src"
ids 3000 12 >"$OUT/data.tgt"

# measure PRESET STEPS: both layouts of one preset; leaves the figures the
# scaling model needs in $OUT/PRESET.model.
measure() {
    preset=$1 steps=$2
    common="--preset $preset --vocab-size $V --src $OUT/data.src --tgt $OUT/data.tgt \
            --batch-tokens $BATCH_TOKENS --max-steps $((steps + 1)) --save-every 0"
    echo "-- $preset: $THREADS batches of $BATCH_TOKENS tokens per update, $steps timed updates"
    rm -f "$OUT/$preset"-*.tsv
    "$TRAIN" $common --accum "$THREADS" --threads "$THREADS" --log "$OUT/$preset-1x$THREADS.tsv" \
        -o "$OUT/$preset-1x$THREADS.st" 2>"$OUT/$preset-1x$THREADS.err" ||
        { echo "train failed: $(tail -1 "$OUT/$preset-1x$THREADS.err")"; return 1; }
    $MPIRUN "$TRAIN" $common --threads 1 --log "$OUT/$preset-${THREADS}x1.tsv" \
        -o "$OUT/$preset-${THREADS}x1.st" 2>"$OUT/$preset-${THREADS}x1.err" ||
        { echo "mpirun train failed: $(tail -3 "$OUT/$preset-${THREADS}x1.err")"; return 1; }
    threads_rate=$(rate "$OUT/$preset-1x$THREADS.tsv")
    ranks_rate=$(rate "$OUT/$preset-${THREADS}x1.tsv")
    echo "train_mpi_tokens_per_s preset=$preset layout=1x$THREADS $threads_rate"
    echo "train_mpi_tokens_per_s preset=$preset layout=${THREADS}x1 $ranks_rate"
    echo "train_mpi_processes_vs_threads preset=$preset $(awk -v a="$ranks_rate" -v b="$threads_rate" 'BEGIN { printf "%.2f", a / b }')"
    # "train: 2 processes: per update, W ms waiting for the others and S ms summing the gradients"
    err="$OUT/$preset-${THREADS}x1.err"
    wait_ms=$(sed -n 's/.*per update, \([0-9.]*\) ms waiting.*/\1/p' "$err")
    sum_ms=$(sed -n 's/.* and \([0-9.]*\) ms summing the gradients$/\1/p' "$err")
    echo "train_mpi_wait_ms preset=$preset ranks=$THREADS $wait_ms"
    echo "train_mpi_sum_ms preset=$preset ranks=$THREADS $sum_ms"
    update_s=$(update_seconds "$OUT/$preset-${THREADS}x1.tsv")
    echo "train_mpi_sum_share preset=$preset $(awk -v s="$sum_ms" -v u="$update_s" 'BEGIN { printf "%.4f", s / 1e3 / u }')"
    params=$(sed -n 's/.*vocabulary [0-9]*, \([0-9]*\) parameters$/\1/p' "$OUT/$preset-1x$THREADS.err")
    echo "$preset $params $(update_seconds "$OUT/$preset-1x$THREADS.tsv") $((THREADS * BATCH_TOKENS))" \
        >"$OUT/$preset.model"
}

echo "train across processes (Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{ print $NF }')):" \
     "load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
rm -f "$OUT"/*.model
for preset in $PRESETS; do
    case $preset in base) steps=$STEPS_BASE ;; *) steps=$STEPS_SMALL ;; esac
    measure "$preset" "$steps"
done

# The gradient sum alone: Open MPI's allreduce (its own choice, and the
# ring) against train's sum in rank order.
if [ -x "$BUILD/bench/allreduce" ]; then
    echo "-- the gradient sum alone, $THREADS processes (median of 5)"
    $MPIRUN "$BUILD/bench/allreduce" 5 default
    $MPIRUN --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 \
        "$BUILD/bench/allreduce" 5 ring | grep '^allreduce_ms'
fi

# The scaling model (see the header): an estimate.
echo "-- an estimate, not a measurement: one process of $THREADS threads per machine," \
     "the sum at the link's nominal rate, 50 us per message"
printf '%-6s %8s %6s %12s %10s %12s %12s %8s %10s %10s\n' preset machines Gbit/s \
    compute_s grad_MB network_s tokens/s speedup efficiency overlapped
for f in "$OUT"/*.model; do
    [ -f "$f" ] || continue
    read -r preset params compute tokens <"$f"
    for machines in 8 64; do
        for gbit in 10 25; do
            awk -v p="$preset" -v P="$params" -v c="$compute" -v tok="$tokens" -v M="$machines" \
                -v g="$gbit" -v bucket=4194304 'BEGIN {
                bytes = 4 * P
                buckets = int((P + bucket - 1) / bucket)
                net = 2 * (M - 1) / M * bytes / (g * 1e9 / 8) + 2 * (M - 1) * buckets * 50e-6
                t = c + net; to = c > net ? c : net
                printf "%-6s %8d %6d %12.3f %10.1f %12.3f %12.0f %8.1f %10.2f %10.2f\n",
                    p, M, g, c, bytes / 1e6, net, M * tok / t, M * c / t, c / t, c / to
                printf "scaling_estimate preset=%s machines=%d gbit=%d speedup=%.1f efficiency=%.2f overlapped=%.2f\n",
                    p, M, g, M * c / t, c / t, c / to }'
        done
    done
done >"$OUT/estimate.txt"
grep -v '^scaling_estimate' "$OUT/estimate.txt"
grep '^scaling_estimate' "$OUT/estimate.txt"
