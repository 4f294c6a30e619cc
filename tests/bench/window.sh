#!/bin/sh
# window.sh BUILD - restricted self-attention against full, by measurement:
# the first and last rows of the paper's Table 1 (seed 001's table),
#
#   Layer Type                   Complexity per layer   Sequential ops   Max path length
#   Self-Attention               O(n^2 d)               O(1)             O(1)
#   Self-Attention (restricted)  O(r n d)               O(1)             O(n/r)
#
#   growth   time and peak memory of self-attention's forward + backward
#            pass against the sentence length n = 64, 128, ..., WINDOW_MAX_N
#            (d_model 256, 4 heads, one sentence, one thread), full against
#            r = 16 and r = 64 (tests/bench/window.c): the attention alone
#            (what the table's row counts: similarities, softmax, weighted
#            sum) and one whole encoder layer's training step (projections
#            and FFN included, O(n d^2)); then the exponent of n fitted by
#            least squares on log-log over n >= WINDOW_FIT_FROM (default 512,
#            where the quadratic part shows), beside the table's 2 and 1.
#   decode   target tokens/s of decode (greedy) on DECODE_SENTENCES sources
#            of 1,000 ids, exactly 1,000 output ids each, the small preset
#            (random weights, 2,048 positions) with full self-attention and
#            with windows of 16 and 64: a window reads only the last r keys
#            of each row's cache.  encode's time on the same sources beside.
#
# Output in OUTDIR (default BENCH_OUT/window); machine-readable lines:
#   window_attention n=N window=R seconds=X peak_mb=Y scores_per_head=Z
#   window_layer n=N window=R seconds=X peak_mb=Y
#   window_exponent part=P window=R time=X memory=Y
#   window_decode window=R tokens_per_s=X encode_s=Y
# Environment: WINDOW_MAX_N (default 4096), WINDOW_FIT_FROM (512),
# WINDOW_SECONDS (per configuration, default 1), DECODE_SENTENCES (default
# 8; 0 skips decoding), THREADS (decode's, default: the CPU count).
set -u
BUILD=${1:?usage: tests/bench/window.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
BENCH_OUT=${BENCH_OUT:-build/bench}
OUTDIR=${OUTDIR:-$BENCH_OUT/window}
MAX_N=${WINDOW_MAX_N:-4096}
FIT_FROM=${WINDOW_FIT_FROM:-512}
SECONDS_EACH=${WINDOW_SECONDS:-1}
SENTENCES=${DECODE_SENTENCES:-8}
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
WINDOWS="0 16 64"
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
DRIVER="$BUILD/bench/window"
[ -x "$DRIVER" ] || { echo "window bench: $DRIVER is not built (make bench builds it)"; exit 1; }

echo "window bench: load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null); output in $OUTDIR"
echo "the seed's table (Vaswani et al., Table 1): Self-Attention O(n^2 d) per layer, O(1)"
echo "sequential operations, O(1) path; Self-Attention (restricted) O(r n d), O(1), O(n/r)"

# ---- growth with n ----------------------------------------------------------------

sizes=""
n=64
while [ "$n" -le "$MAX_N" ]; do sizes="$sizes $n"; n=$((n * 2)); done
: >"$OUTDIR/growth.txt"
for part in attention layer; do
    for r in $WINDOWS; do
        for n in $sizes; do
            "$DRIVER" --part "$part" --n "$n" --window "$r" --seconds "$SECONDS_EACH" \
                >>"$OUTDIR/growth.txt" 2>"$OUTDIR/driver.err" ||
                { echo "window bench: $part n=$n r=$r FAILED:"; cat "$OUTDIR/driver.err"; exit 1; }
        done
    done
done

# table PART TITLE - the rows of one part: n, then seconds and MB per window.
table() {
    echo
    echo "$2 (d_model 256, 4 heads, one sentence, one thread; best time, peak memory added):"
    awk -v part="window_$1" -v windows="$WINDOWS" '
        function value(field,   i, kv) {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == field) return kv[2] } }
        $1 == part {
            split($2, a, "="); split($3, b, "="); n = a[2]; r = b[2]
            s[n, r] = value("seconds"); m[n, r] = value("peak_mb"); ns[n] = 1 }
        END {
            k = split(windows, w, " ")
            printf "  %6s", "n"
            for (i = 1; i <= k; i++)
                printf "  %22s", (w[i] == 0 ? "full: s, MB" : "r = " w[i] ": s, MB")
            printf "\n"
            for (n in ns) order[++c] = n + 0
            for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++)
                if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
            for (i = 1; i <= c; i++) {
                printf "  %6d", order[i]
                for (j = 1; j <= k; j++) printf "  %12.4f %9.2f", s[order[i], w[j]], m[order[i], w[j]]
                printf "\n"
            }
        }' "$OUTDIR/growth.txt"
}

# exponents PART - the slope of log(time) and log(memory) against log(n)
# over n >= FIT_FROM, per window, beside the table's exponent.
exponents() {
    awk -v part="window_$1" -v from="$FIT_FROM" -v windows="$WINDOWS" -v name="$1" '
        function value(field,   i, kv) {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == field) return kv[2] } }
        function slope(sx, sy, sxx, sxy, c) { return (c * sxy - sx * sy) / (c * sxx - sx * sx) }
        $1 == part {
            split($2, a, "="); split($3, b, "="); n = a[2]; r = b[2]
            if (n < from) next
            x = log(n); t = log(value("seconds")); mb = value("peak_mb")
            c[r]++; sx[r] += x; sxx[r] += x * x; st[r] += t; sxt[r] += x * t
            if (mb > 0) { cm[r]++; mx[r] += x; mxx[r] += x * x; sm[r] += log(mb); sxm[r] += x * log(mb) }
        }
        END {
            k = split(windows, w, " ")
            for (i = 1; i <= k; i++) {
                r = w[i]
                if (c[r] < 2) continue
                te = slope(sx[r], st[r], sxx[r], sxt[r], c[r])
                me = cm[r] >= 2 ? slope(mx[r], sm[r], mxx[r], sxm[r], cm[r]) : 0
                printf "  %-22s time ~ n^%.2f   memory ~ n^%.2f   (the table: %s)\n",
                    (r == 0 ? "full" : "r = " r), te, me, (r == 0 ? "O(n^2 d): 2" : "O(r n d): 1")
                printf "window_exponent part=%s window=%s time=%.2f memory=%.2f\n", name, r, te, me \
                    > "/dev/stderr"
            }
        }' "$OUTDIR/growth.txt"
}

table attention "self-attention alone, forward + backward"
echo "  fitted exponent of n over n = $FIT_FROM..$MAX_N:"
exponents attention 2>"$OUTDIR/exponents.txt"
table layer "one encoder layer's training step (attention, projections, FFN), forward + backward"
echo "  fitted exponent of n over n = $FIT_FROM..$MAX_N (the projections and the FFN grow as n d^2):"
exponents layer 2>>"$OUTDIR/exponents.txt"
echo "  weights kept per head (scores) at n = $MAX_N: $(awk '$1 == "window_attention" && $2 == "n='"$MAX_N"'" {
    split($3, b, "="); split($NF, k, "=")
    printf "%s%s %s", (c++ ? ", " : ""), (b[2] == 0 ? "full" : "r = " b[2]), k[2] }' "$OUTDIR/growth.txt")"
echo
cat "$OUTDIR/growth.txt" "$OUTDIR/exponents.txt"

# ---- decoding long sources -------------------------------------------------------------------

[ "$SENTENCES" -gt 0 ] || exit 0
ENC="$BUILD/bin/encode" DEC="$BUILD/bin/decode" TOK="$BUILD/bin/tokenize" MK="$BUILD/tools/mkmodel"
for p in "$ENC" "$DEC" "$TOK" "$MK"; do
    [ -x "$p" ] || { echo "window bench: $p is not built"; exit 1; }
done
# A vocabulary of 1,000 pieces learnt from the sample corpus; sources of
# exactly 1,000 random ids (the speed does not depend on them).
"$TOK" learn -q --vocab-size 1000 --soft-vocab-limit tests/data/corpus-small.txt \
    -o "$OUTDIR/v1k.vocab" || exit 1
awk -v n="$SENTENCES" 'BEGIN { srand(7); for (s = 0; s < n; s++) { line = ""
    for (i = 0; i < 1000; i++) line = line (i ? " " : "") (4 + int(rand() * 900)); print line } }' \
    >"$OUTDIR/src1000.ids"
echo
echo "decode: $SENTENCES sources of 1,000 ids, greedy, exactly 1,000 output ids each; small preset"
echo "(d_model 256, 3+3 layers), random weights, $THREADS thread(s):"
: >"$OUTDIR/decode.txt"
printf "  %-10s %10s %12s %10s\n" "self-attn" "decode s" "tokens/s" "encode s"
for r in $WINDOWS; do
    m="$OUTDIR/small-r$r.st"
    "$MK" --preset small --vocab "$OUTDIR/v1k.vocab" --seed 1 --max-positions 2048 \
        --attention-window "$r" -o "$m" || exit 1
    start=$(date +%s.%N)
    "$ENC" -m "$m" --threads "$THREADS" "$OUTDIR/src1000.ids" >"$OUTDIR/states.npy" || exit 1
    mid=$(date +%s.%N)
    "$DEC" -m "$m" --threads "$THREADS" --greedy --min-length 1000 --max-length 1000 \
        "$OUTDIR/states.npy" >"$OUTDIR/out-r$r.ids" || exit 1
    end=$(date +%s.%N)
    got=$(awk '{ t += NF } END { print t + 0 }' "$OUTDIR/out-r$r.ids")
    [ "$got" -eq $((SENTENCES * 1000)) ] || echo "  r = $r: WRONG output: $got ids"
    awk -v r="$r" -v s="$start" -v m="$mid" -v e="$end" -v tok="$got" 'BEGIN {
        printf "  %-10s %10.2f %12.0f %10.2f\n", (r == 0 ? "full" : "r = " r), e - m, tok / (e - m), m - s
        printf "window_decode window=%s tokens_per_s=%.0f encode_s=%.2f\n", r, tok / (e - m), m - s \
            > "/dev/stderr" }' 2>>"$OUTDIR/decode.txt"
done
rm -f "$OUTDIR/states.npy"
cat "$OUTDIR/decode.txt"
