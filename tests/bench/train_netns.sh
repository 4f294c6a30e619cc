#!/bin/sh
# train_netns.sh BUILD - training on 2 processes over TCP between two network
# namespaces of this host, against shared memory (as root; not part of make
# bench, which runs as any user):
#
#   shm  mpirun -np 2 in namespace A, Open MPI's shared memory (btl vader)
#   tcp  mpirun in A, rank 1 in namespace B (started by an agent script with
#        `ip netns exec` where real hosts use ssh), TCP over a veth link
#        (btl tcp, self): what two hosts do, minus the wire
#
# Both with one thread per rank and --bind-to none (mpirun takes each
# namespace for a host with its own cores, and would bind both ranks to
# core 0), interleaved run by run (ROUNDS rounds, the order swapped every
# round) so that a change in the machine's load falls on both.  train.sh's
# and train_mpi.sh's data: random ids of an 8000-piece vocabulary, 24 per
# sentence, 4096-token batches, one per rank per update.
#
# Per run: target tokens/s over the updates after the first (rank 0's log),
# and what train prints at the end: the ms per update rank 0 waited for the
# other and spent summing the gradients (the exchange).  Then the README's
# scaling model checked against them: an update takes compute + network
# (no overlap), so the tcp update should take the shm update's time minus
# its sum plus the tcp sum; and the sum's effective rate over the link,
# 2 (M - 1) / M of the gradient sent per rank (M = 2: the whole gradient),
# against the nominal link rates the model assumes.  The gradient sum alone
# (bench/allreduce, median of 5) over both transports too, when built.
#
# Environment: PRESETS ("small base"), STEPS_SMALL (8), STEPS_BASE (3),
# ROUNDS (2), BENCH_OUT.  Output lines:
#   netns_tokens_per_s preset=P transport=shm|tcp round=R X
#   netns_sum_ms preset=P transport=T round=R X, netns_wait_ms ...
#   netns_tcp_vs_shm preset=P R (tokens/s, mean over the rounds)
#   netns_model preset=P update_shm_s=A sum_shm_ms=B sum_tcp_ms=C predicted_tcp_s=D measured_tcp_s=E
#   netns_link_rate preset=P gbit_per_s=X (the gradient's bytes over the tcp sum's time)
#   ordered_sum_ms preset=P ranks=2 transport=T X (bench/allreduce)
set -u
BUILD=${1:?usage: tests/bench/train_netns.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
PRESETS=${PRESETS:-small base}
STEPS_SMALL=${STEPS_SMALL:-8}
STEPS_BASE=${STEPS_BASE:-3}
ROUNDS=${ROUNDS:-2}
OUT=${BENCH_OUT:-build/bench}/train_netns
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TRAIN="$BUILD/bin/train"
[ -x "$TRAIN" ] || { echo "train_netns.sh: $TRAIN is not built"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "train_netns.sh: needs root (ip netns)"; exit 1; }
command -v mpirun >/dev/null 2>&1 || { echo "train_netns.sh: no mpirun (make deps)"; exit 1; }

NSA=tfmbench$$-a NSB=tfmbench$$-b VA=tfmb$$a VB=tfmb$$b
cleanup() {
    for ns in $NSA $NSB; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
ip netns add "$NSA" && ip netns add "$NSB" && ip link add "$VA" type veth peer name "$VB" &&
    ip link set "$VA" netns "$NSA" && ip link set "$VB" netns "$NSB" &&
    ip -n "$NSA" addr add 10.214.1.1/24 dev "$VA" && ip -n "$NSB" addr add 10.214.1.2/24 dev "$VB" &&
    ip -n "$NSA" link set lo up && ip -n "$NSB" link set lo up &&
    ip -n "$NSA" link set "$VA" up && ip -n "$NSB" link set "$VB" up ||
    { echo "train_netns.sh: the namespaces could not be made"; exit 1; }
cat >"$OUT/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
10.214.1.1) ns=$NSA ;;
10.214.1.2) ns=$NSB ;;
*) echo "agent: no host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$OUT/agent"
printf '10.214.1.1 slots=1\n10.214.1.2 slots=1\n' >"$OUT/hosts"
# run TRANSPORT ARGS...: 2 ranks of ARGS over shared memory or TCP.
run() {
    transport=$1; shift
    case $transport in
    shm) ip netns exec "$NSA" mpirun --allow-run-as-root -np 2 --bind-to none \
            --mca btl vader,self "$@" ;;
    tcp) ip netns exec "$NSA" mpirun --allow-run-as-root --hostfile "$OUT/hosts" -np 2 \
            --map-by node --bind-to none --mca plm_rsh_agent "$OUT/agent" --mca btl tcp,self \
            --mca btl_tcp_if_include 10.214.1.0/24 --mca oob_tcp_if_include 10.214.1.0/24 "$@" ;;
    esac
}

. tests/bench/train_lib.sh  # V, LEN, BATCH_TOKENS, ids, rate, update_seconds
ids 3000 11 >"$OUT/data.src"
ids 3000 12 >"$OUT/data.tgt"
mean() { awk '{ s += $1; n++ } END { if (n) printf "%.3f", s / n }'; }

echo "train over TCP between namespaces against shared memory (Open MPI" \
     "$(mpirun --version 2>/dev/null | head -1 | awk '{ print $NF }')," \
     "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs):" \
     "$(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for preset in $PRESETS; do
    case $preset in base) steps=$STEPS_BASE ;; *) steps=$STEPS_SMALL ;; esac
    common="--preset $preset --vocab-size $V --src $OUT/data.src --tgt $OUT/data.tgt \
            --batch-tokens $BATCH_TOKENS --max-steps $((steps + 1)) --save-every 0 --threads 1"
    echo "-- $preset: 2 ranks x 1 thread, a batch of $BATCH_TOKENS tokens each per update, $steps timed updates"
    for round in $(seq 1 "$ROUNDS"); do
        order="shm tcp"
        [ $((round % 2)) -eq 0 ] && order="tcp shm"
        for t in $order; do
            name="$OUT/$preset-$t-$round"
            rm -f "$name.tsv" "$name.st"
            if ! run "$t" "$TRAIN" $common --log "$name.tsv" -o "$name.st" >"$name.out" 2>"$name.err"; then
                echo "train over $t failed: $(tail -3 "$name.err")"
                continue
            fi
            wait_ms=$(sed -n 's/.*per update, \([0-9.]*\) ms waiting.*/\1/p' "$name.err")
            sum_ms=$(sed -n 's/.* and \([0-9.]*\) ms summing the gradients$/\1/p' "$name.err")
            echo "netns_tokens_per_s preset=$preset transport=$t round=$round $(rate "$name.tsv")"
            echo "netns_update_s preset=$preset transport=$t round=$round $(update_seconds "$name.tsv")"
            echo "netns_sum_ms preset=$preset transport=$t round=$round $sum_ms"
            echo "netns_wait_ms preset=$preset transport=$t round=$round $wait_ms"
            rm -f "$name.st"*
        done
    done
    for t in shm tcp; do
        for r in $(seq 1 "$ROUNDS"); do rate "$OUT/$preset-$t-$r.tsv"; echo; done | mean >"$OUT/$preset-$t.rate"
        for r in $(seq 1 "$ROUNDS"); do update_seconds "$OUT/$preset-$t-$r.tsv"; echo; done | mean >"$OUT/$preset-$t.update"
        for r in $(seq 1 "$ROUNDS"); do
            sed -n 's/.* and \([0-9.]*\) ms summing the gradients$/\1/p' "$OUT/$preset-$t-$r.err"
        done | mean >"$OUT/$preset-$t.sum"
    done
    echo "netns_tcp_vs_shm preset=$preset $(awk -v a="$(cat "$OUT/$preset-tcp.rate")" \
        -v b="$(cat "$OUT/$preset-shm.rate")" 'BEGIN { printf "%.3f", a / b }')"
    params=$(sed -n 's/.*vocabulary [0-9]*, \([0-9]*\) parameters$/\1/p' "$OUT/$preset-shm-1.err" "$OUT/$preset-tcp-1.err" | head -1)
    awk -v p="$preset" -v P="${params:-0}" -v us="$(cat "$OUT/$preset-shm.update")" \
        -v ss="$(cat "$OUT/$preset-shm.sum")" -v st="$(cat "$OUT/$preset-tcp.sum")" \
        -v ut="$(cat "$OUT/$preset-tcp.update")" 'BEGIN {
        printf "netns_model preset=%s update_shm_s=%.3f sum_shm_ms=%.1f sum_tcp_ms=%.1f predicted_tcp_s=%.3f measured_tcp_s=%.3f\n",
            p, us, ss, st, us - ss / 1e3 + st / 1e3, ut
        if (P > 0 && st > 0) printf "netns_link_rate preset=%s gradient_mb=%.1f gbit_per_s=%.2f\n",
            p, 4 * P / 1e6, 4 * P * 8 / (st / 1e3) / 1e9 }'
done
if [ -x "$BUILD/bench/allreduce" ]; then
    echo "-- the gradient sum alone (bench/allreduce, median of 5), 2 ranks"
    for t in shm tcp; do
        run "$t" "$BUILD/bench/allreduce" 5 default 2>/dev/null | sed -n "s/^ordered_sum_ms \(preset=[a-z]* ranks=[0-9]*\) /ordered_sum_ms \1 transport=$t /p"
    done
fi
