#!/bin/sh
# train.sh BUILD - the training benchmark (a section of tests/bench/run.sh):
# target tokens per second of 'train' on the small preset and on base, the
# model's flop rate as a fraction of the CPU's FMA peak (and, secondary, of
# OpenBLAS's sgemm rate), and PyTorch's nn.Transformer (Debian's
# python3-torch) side by side on the same configuration, batch and thread
# count, in its best thread setting.
#
# The data are random ids from an 8000-piece vocabulary, every source and
# target 24 ids long (25 positions with </s> or <s>), so every batch of a
# 4096-token budget holds 163 pairs and the work of a step is known exactly:
#
#   flops = 6 x (encoder weights x source tokens + decoder and output weights
#           x target tokens) + 12 x d_model x (S^2 + T^2 + S T) per pair and layer
#
# (a multiply-add is 2 flops; backward costs twice forward; the attention
# products QK^T and AV are 4 n_q n_k d_model forward).  The fraction is that
# rate over the FMA peak of the same thread count at the widest width the
# CPU has (512 bits with AVX-512; 256 with TFM_ISA=avx2, which keeps our
# kernels to 256 bits), from FMA_PEAK_512_T and FMA_PEAK_256_T (set by
# run.sh) or measured here with $BUILD/bench/peak before the runs.  The
# secondary fraction is over OpenBLAS's sgemm rate on training shapes with
# its own kernel choice, from SGEMM_GFLOPS_T (run.sh) or measured here with
# $BUILD/bench/sgemm (OPENBLAS_CORETYPE unset) before and after the runs
# (the better of the two).  Memory is the peak resident size
# (/usr/bin/time -f %M).
#
# Environment: THREADS (default: the CPU count), STEPS_SMALL (8) and
# STEPS_BASE (3): timed updates after one warm-up update; SKIP_TORCH=1
# (ours alone); BENCH_OUT.
#
# Output lines (also for run.sh's summary):
#   train_tokens_per_s preset=P threads=T X      (and train_cpu_tokens_per_s)
#   train_gflops preset=P threads=T X            the model-flops rate
#   train_peak_fraction preset=P threads=T F     X over the FMA peak
#   train_sgemm_fraction preset=P threads=T F    X over OpenBLAS's sgemm rate
#   train_peak_mb preset=P X
#   torch_train_tokens_per_s preset=P threads=T X  (and torch_train_cpu_tokens_per_s)
#   torch_train_peak_mb preset=P threads=T X
#   train_vs_torch preset=P R                    (ours over PyTorch's best)
set -u
BUILD=${1:?usage: tests/bench/train.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
STEPS_SMALL=${STEPS_SMALL:-8}
STEPS_BASE=${STEPS_BASE:-3}
OUT=${BENCH_OUT:-build/bench}/train
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TRAIN="$BUILD/bin/train"
[ -x "$TRAIN" ] || { echo "train.sh: $TRAIN is not built"; exit 1; }
TIME=/usr/bin/time
[ -x "$TIME" ] || TIME=""

. tests/bench/train_lib.sh  # V, LEN, BATCH_TOKENS, ids, rate
PAIRS=$((BATCH_TOKENS / (LEN + 1)))
rm -f "$OUT/sgemm.log" "$OUT/peak.log"  # rates measured in another run do not count
ids 3000 11 >"$OUT/data.src"
ids 3000 12 >"$OUT/data.tgt"

# OpenBLAS's sgemm with its own kernel choice, as run.sh runs it.
sgemm() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BUILD/bench/sgemm"; }

# The FMA peak of THREADS threads: "BITS GFLOP/s", or nothing when it is not
# known.  From run.sh's FMA_PEAK_*_T, else from peak.log, measured before
# the training runs.
fma_peak() {
    if [ -n "${FMA_PEAK_256_T:-}" ]; then
        p512=${FMA_PEAK_512_T:-} p256=$FMA_PEAK_256_T
    else
        p512="" p256=""
        if [ -f "$OUT/peak.log" ]; then
            p512=$(awk -v t="threads=$THREADS" '$1 == "fma_peak_gflops" && $2 == "bits=512" && $3 == t { print $4 }' "$OUT/peak.log")
            p256=$(awk -v t="threads=$THREADS" '$1 == "fma_peak_gflops" && $2 == "bits=256" && $3 == t { print $4 }' "$OUT/peak.log")
        fi
    fi
    if [ -n "$p512" ] && [ "${TFM_ISA:-}" != avx2 ]; then
        echo "512 $p512"
    elif [ -n "$p256" ]; then
        echo "256 $p256"
    fi
}

# The sgemm rate of T threads, GFLOP/s: the better of two measurements, one
# before the training runs and one after them (sgemm.log, sgemm-after.log),
# as a neighbour busy during one of them can cut its rate by a third.
sgemm_rate() {
    eval "rate=\${SGEMM_GFLOPS_$1:-}"
    if [ -z "$rate" ] && [ -x "$BUILD/bench/sgemm" ]; then
        for log in "$OUT/sgemm.log" "$OUT/sgemm-after.log"; do
            [ -f "$log" ] || sgemm >"$log" 2>&1
        done
        rate=$(awk -v t="threads=$1" '$1 == "sgemm_gflops" && $2 == t && $3 > best { best = $3 }
                                     END { if (best) print best }' "$OUT/sgemm.log" "$OUT/sgemm-after.log")
    fi
    echo "${rate:-}"
}

# Model flops of one update of PAIRS pairs (see the header).
step_flops() { # d_model d_ff layers
    awk -v D="$1" -v F="$2" -v N="$3" -v V=$V -v B=$PAIRS -v S=$((LEN + 1)) -v T=$((LEN + 1)) 'BEGIN {
        enc = N * (4 * D * D + 2 * D * F); dec = N * (8 * D * D + 2 * D * F); out = V * D
        dense = 6 * (enc * B * S + (dec + out) * B * T)
        attn = 12 * D * N * B * (S * S + T * T + S * T)
        printf "%.0f", dense + attn }'
}

# measure NAME PRESET D F H N STEPS: one run of train and PyTorch's best.
measure() {
    name=$1 preset=$2 D=$3 F=$4 H=$5 N=$6 steps=$7
    echo "-- $name: d_model $D, d_ff $F, $H heads, $N+$N layers, vocabulary $V," \
         "$PAIRS pairs x $((LEN + 1)) tokens per batch, $THREADS threads, $steps timed updates"
    log="$OUT/$name.tsv"
    rm -f "$log" "$OUT/$name.st"
    ${TIME:+$TIME -f "%M %U %S" -o "$OUT/$name.time"} "$TRAIN" --preset "$preset" --vocab-size $V \
        --src "$OUT/data.src" --tgt "$OUT/data.tgt" --batch-tokens $BATCH_TOKENS \
        --max-steps $((steps + 1)) --save-every 0 --threads "$THREADS" -q --log "$log" \
        --relative-positions 0 \
        -o "$OUT/$name.st" || { echo "train failed"; return 1; }
    # Tokens over the timed updates (the first is the warm-up), per wall second.
    rate=$(rate "$log")
    echo "train_tokens_per_s preset=$name threads=$THREADS $rate"
    if [ -n "$TIME" ] && [ -s "$OUT/$name.time" ]; then
        read -r kb user sys <"$OUT/$name.time"
        total=$(awk -F'\t' '$8 == "train" { tok += $11 } END { print tok }' "$log")
        echo "train_cpu_tokens_per_s preset=$name threads=$THREADS $(awk -v t="$total" -v c="$user" -v s="$sys" 'BEGIN { printf "%.1f", t / (c + s) }')"
        echo "train_peak_mb preset=$name $((kb / 1024))"
    fi
    flops=$(step_flops "$D" "$F" "$N")
    if [ -n "$rate" ]; then
        awk -v f="$flops" -v r="$rate" -v tok=$((PAIRS * (LEN + 1))) -v n="$name" -v t="$THREADS" 'BEGIN {
            printf "train_gflops preset=%s threads=%s %.1f\n", n, t, f * r / tok / 1e9 }' |
            tee -a "$OUT/gflops.txt"
    fi

    # PyTorch in its best thread setting (1 .. THREADS).
    [ "${SKIP_TORCH:-0}" = 1 ] && return 0
    if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        echo "(PyTorch is not installed: apt-get install python3-torch)"
        return 0
    fi
    best=""
    t=1
    while [ "$t" -le "$THREADS" ]; do
        ${TIME:+$TIME -f "%M" -o "$OUT/torch-$name-$t.time"} /usr/bin/python3 "$ROOT/tests/bench/torch_train.py" \
            --d-model "$D" --d-ff "$F" --heads "$H" --layers "$N" --vocab $V --batch $PAIRS \
            --len $LEN --steps "$steps" --threads "$t" >"$OUT/torch-$name-$t.out" 2>&1
        r=$(awk '$1 == "torch_train" { print $4 }' "$OUT/torch-$name-$t.out")
        if [ -n "$r" ]; then
            echo "torch_train_tokens_per_s preset=$name threads=$t $r"
            echo "torch_train_cpu_tokens_per_s preset=$name threads=$t $(awk '$1 == "torch_train" { print $6 }' "$OUT/torch-$name-$t.out")"
            [ -n "$TIME" ] && echo "torch_train_peak_mb preset=$name threads=$t $(($(cat "$OUT/torch-$name-$t.time") / 1024))"
            if [ -z "$best" ] || awk -v a="$r" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$r; fi
        else
            echo "(PyTorch failed with $t threads: $(tail -1 "$OUT/torch-$name-$t.out"))"
        fi
        t=$((t + 1))
    done
    if [ -n "$best" ] && [ -n "$rate" ]; then
        echo "train_vs_torch preset=$name $(awk -v a="$rate" -v b="$best" 'BEGIN { printf "%.2f", a / b }')"
    fi
}

echo "train against PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '(not installed)'):" \
     "load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
: >"$OUT/gflops.txt"
rm -f "$OUT/sgemm-after.log"
[ -z "${FMA_PEAK_256_T:-}" ] && [ -x "$BUILD/bench/peak" ] && "$BUILD/bench/peak" >"$OUT/peak.log" 2>&1
[ -z "${SGEMM_GFLOPS_2:-}" ] && [ -x "$BUILD/bench/sgemm" ] && sgemm >"$OUT/sgemm.log" 2>&1
measure small small 256 1024 4 3 "$STEPS_SMALL"
measure base base 512 2048 8 6 "$STEPS_BASE"

# The fractions of the FMA peak.
peak=$(fma_peak)
if [ -n "$peak" ]; then
    bits=${peak% *} gflops=${peak#* }
    echo "FMA peak, $THREADS threads, $bits bits${TFM_ISA:+ (TFM_ISA=$TFM_ISA)}: $gflops GFLOP/s"
    awk -v p="$gflops" '{ printf "train_peak_fraction %s %s %.3f\n", $2, $3, $4 / p }' "$OUT/gflops.txt"
else
    echo "(no FMA peak for $THREADS threads: bench/peak is not built or failed; the fractions are not computed)"
fi

# The fractions of the sgemm rate, now that it has been measured after the
# runs too.
sg=$(sgemm_rate "$THREADS")
if [ -n "$sg" ]; then
    echo "OpenBLAS's sgemm rate on training shapes, its own kernel, $THREADS threads: $sg GFLOP/s (the better of before and after)"
    awk -v sg="$sg" '{ printf "train_sgemm_fraction %s %s %.3f\n", $2, $3, $4 / sg }' \
        "$OUT/gflops.txt"
else
    echo "(no sgemm rate for $THREADS threads: the fractions are not computed)"
fi
