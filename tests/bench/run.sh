#!/bin/sh
# run.sh BUILD - the benchmarks of `make bench`.  They print figures; they
# never pass or fail, and `make check` does not run them.
#
# Every figure is a ratio measured in this one run, on this machine:
#   - the physical limits of the CPU come first (tests/bench/peak.c): its
#     FMA peak at 512 bits (where it has AVX-512) and 256 bits, and its
#     memory bandwidth, with 1 and THREADS threads; the later sections report
#     their flop rates as fractions of the FMA peak of their thread count, at
#     the widest width the CPU has; the read bandwidth is the yardstick of
#     work bound by memory;
#   - then the sgemm rate of OpenBLAS on a Transformer's matrix shapes
#     (tests/bench/sgemm.c), a reference, not the limit: run with OpenBLAS's
#     own choice of kernel (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for
#     it), which it names, and again, shorter, with OPENBLAS_CORETYPE=Haswell
#     (the setting of the project's machines) where its own choice differs;
#   - then each tool against the peer a user would pick instead, side by side
#     on the same input and thread count, where the peer is installed:
#     tokenize against SentencePiece (tests/bench/tokenize.sh, on a corpus of
#     50+ MB of real text that tests/bench/corpus.sh builds from Debian
#     packages and caches in build/bench/corpus.txt);
#   - and the growth of self-attention's cost with the sentence length, full
#     against restricted to a window (tests/bench/window.sh: the paper's
#     Table 1 by measurement).
# The machines are small (2 CPUs) and shared: CPU seconds are reported beside
# wall seconds, and only figures taken in the same run should be compared.
#
# Output goes to the terminal and to BENCH_OUT (default build/bench): one
# NAME.log per section, and summary.txt with the machine-readable lines
# ("key [name=value]... value") of every section and each section's status.
#
# Adding a benchmark is one block at the end of the sections below:
#
#   if [ -x "$BUILD/bin/train" ]; then
#       section train "train against PyTorch" sh tests/bench/train.sh "$BUILD"
#   fi
#
# A section's command runs from the top of the source tree and finds in its
# environment: BUILD (absolute), BENCH_OUT, THREADS; FMA_PEAK_512_1,
# FMA_PEAK_512_T, FMA_PEAK_256_1 and FMA_PEAK_256_T (the FMA peak of 1 and
# THREADS threads, GFLOP/s; the 512-bit ones empty without AVX-512), MEM_GBS_1
# and MEM_GBS_T (the read bandwidth of 1 and THREADS threads, GB/s); and
# SGEMM_GFLOPS_1 and SGEMM_GFLOPS_2 (OpenBLAS's training-shape rates of 1 and
# 2 BLAS threads, its own kernel, GFLOP/s).  Lines it prints that look like
# "some_key k=v... 12.3" or "some_key k=v..." go into the summary.
#
# Environment: BENCH_OUT, THREADS (default: the CPU count).
set -u
BUILD=${1:?usage: tests/bench/run.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
BENCH_OUT=${BENCH_OUT:-build/bench}
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
mkdir -p "$BENCH_OUT"
BENCH_OUT=$(cd "$BENCH_OUT" && pwd)
export BUILD BENCH_OUT THREADS
# Figures of an earlier run must not reach this run's summary.
rm -f "$BENCH_OUT"/*.log "$BENCH_OUT"/*.rc
: >"$BENCH_OUT/status.txt"

echo "tfm benchmarks, $(date '+%Y-%m-%d %H:%M'), $(uname -n): $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "All figures are ratios measured in this one run; compare only figures from the same run."

# section NAME TITLE COMMAND... - runs one benchmark, showing its output as it
# comes and keeping it in BENCH_OUT/NAME.log; records "NAME ok" or "NAME
# failed (exit N)" for the summary.  A failed section does not stop the others.
section() {
    name=$1 title=$2; shift 2
    echo
    echo "==== $name: $title ===="
    { "$@"; echo $? >"$BENCH_OUT/$name.rc"; } 2>&1 | tee "$BENCH_OUT/$name.log"
    rc=$(cat "$BENCH_OUT/$name.rc" 2>/dev/null || echo 1)
    if [ "$rc" -eq 0 ]; then
        echo "$name ok" >>"$BENCH_OUT/status.txt"
    else
        echo "$name failed (exit $rc)" >>"$BENCH_OUT/status.txt"
    fi
}

# skipped NAME WHY - a section that could not run.
skipped() {
    echo
    echo "==== $1: skipped: $2 ===="
    echo "$1 skipped: $2" >>"$BENCH_OUT/status.txt"
}

# ---- sections ------------------------------------------------------------------

if [ -x "$BUILD/bench/peak" ]; then
    section peak "the CPU's limits: FMA peak at 512 and 256 bits, memory bandwidth" \
        "$BUILD/bench/peak"
else
    skipped peak "$BUILD/bench/peak is not built (make bench builds it)"
fi
# figure LOG KEY KIND THREADS - the value of the line "KEY KIND threads=THREADS
# value" of BENCH_OUT/LOG ("" when there is none).
figure() {
    awk -v k="$2" -v kind="$3" -v t="threads=$4" '$1 == k && $2 == kind && $3 == t { print $4 }' \
        "$BENCH_OUT/$1" 2>/dev/null
}
FMA_PEAK_512_1=$(figure peak.log fma_peak_gflops bits=512 1)
FMA_PEAK_512_T=$(figure peak.log fma_peak_gflops bits=512 "$THREADS")
FMA_PEAK_256_1=$(figure peak.log fma_peak_gflops bits=256 1)
FMA_PEAK_256_T=$(figure peak.log fma_peak_gflops bits=256 "$THREADS")
MEM_GBS_1=$(figure peak.log mem_bandwidth_gbs kind=read 1)
MEM_GBS_T=$(figure peak.log mem_bandwidth_gbs kind=read "$THREADS")
export FMA_PEAK_512_1 FMA_PEAK_512_T FMA_PEAK_256_1 FMA_PEAK_256_T MEM_GBS_1 MEM_GBS_T

# OpenBLAS's own kernel choice, whatever the environment asks; then, if it
# chose another, OPENBLAS_CORETYPE=Haswell with a shorter budget (its lines
# name the kernel: "sgemm_gflops core=Haswell threads=1 X").
if [ -x "$BUILD/bench/sgemm" ]; then
    section sgemm "OpenBLAS's sgemm on a Transformer's shapes, its own kernel (a reference), of the FMA peak" \
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BUILD/bench/sgemm"
    own=$(awk '$1 == "sgemm_blas" { sub(/^core=/, "", $2); print $2 }' "$BENCH_OUT/sgemm.log")
    if [ "$own" = Haswell ]; then
        skipped sgemm_haswell "OpenBLAS's own choice is Haswell"
    else
        section sgemm_haswell "the same with OPENBLAS_CORETYPE=Haswell (0.1 s per shape)" \
            env OPENBLAS_CORETYPE=Haswell "$BUILD/bench/sgemm" --seconds 0.1 --name-core
    fi
else
    skipped sgemm "$BUILD/bench/sgemm is not built (make bench builds it)"
fi
# Training's products on the project's kernels (nn_sgemm) beside OpenBLAS
# in the environment as it is set, speed and accuracy, the same on the
# project's AVX2 kernels, and the accuracy of OpenBLAS's own choice.
if [ -x "$BUILD/bench/gemm" ]; then
    section gemm "training's products: the project's kernels against OpenBLAS, of the FMA peak" \
        "$BUILD/bench/gemm"
    section gemm_avx2 "the same with the project's AVX2 kernels (TFM_ISA=avx2)" \
        env TFM_ISA=avx2 "$BUILD/bench/gemm"
    section gemm_errors "their accuracy beside OpenBLAS's own kernel choice" \
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BUILD/bench/gemm" --errors
else
    skipped gemm "$BUILD/bench/gemm is not built (make bench builds it)"
fi
SGEMM_GFLOPS_1=$(awk '$1 == "sgemm_gflops" && $2 == "threads=1" { print $3 }' \
                 "$BENCH_OUT/sgemm.log" 2>/dev/null)
SGEMM_GFLOPS_2=$(awk '$1 == "sgemm_gflops" && $2 == "threads=2" { print $3 }' \
                 "$BENCH_OUT/sgemm.log" 2>/dev/null)
export SGEMM_GFLOPS_1 SGEMM_GFLOPS_2

if [ -x "$BUILD/bin/tokenize" ]; then
    section tokenize "tokenize against SentencePiece (learning, encoding, pieces)" \
        sh -c 'sh tests/bench/corpus.sh "$BENCH_OUT/corpus.txt" &&
               OUTDIR="$BENCH_OUT/tokenize" sh tests/bench/tokenize.sh "$BUILD" "$BENCH_OUT/corpus.txt"'
else
    skipped tokenize "$BUILD/bin/tokenize is not built"
fi

if [ -x "$BUILD/bench/forward" ]; then
    section forward "the forward pass alone: encoder and decoder steps, of the FMA peak and of sgemm" \
        "$BUILD/bench/forward"
    section forward_packed "the same on weights packed as encode and decode pack them" \
        "$BUILD/bench/forward" --packed
fi

if [ -x "$BUILD/bench/window" ] && [ -x "$BUILD/bin/decode" ] && [ -x "$BUILD/tools/mkmodel" ]; then
    section window "restricted self-attention against full: growth with n (Table 1), long decodes" \
        sh tests/bench/window.sh "$BUILD"
else
    skipped window "bench/window, decode or tools/mkmodel is not built"
fi

if [ -x "$BUILD/bin/decode" ] && [ -x "$BUILD/tools/mkmodel" ]; then
    section translate "encode | decode: greedy and beam, against PyTorch and CTranslate2's figures" \
        sh tests/bench/translate.sh "$BUILD"
else
    skipped translate "encode, decode or tools/mkmodel is not built"
fi

if [ -x "$BUILD/bin/train" ]; then
    section train "train: tokens/s and the model-flops rate, against PyTorch" \
        sh tests/bench/train.sh "$BUILD"
else
    skipped train "$BUILD/bin/train is not built"
fi

if [ -x "$BUILD/bin/train" ] && command -v mpirun >/dev/null 2>&1; then
    section train_mpi "train across processes: 2 processes x 1 thread against 1 x 2, the gradient sum, a scaling estimate" \
        sh tests/bench/train_mpi.sh "$BUILD"
else
    skipped train_mpi "$BUILD/bin/train is not built or mpirun is missing (make deps)"
fi

if [ -x "$BUILD/bin/score" ]; then
    section score "score: BLEU and chrF lines per second" sh tests/bench/score.sh "$BUILD"
else
    skipped score "$BUILD/bin/score is not built"
fi

# ---- summary -------------------------------------------------------------------

{
    echo "status:"
    sed 's/^/  /' "$BENCH_OUT/status.txt"
    echo "figures:"
    # in the order of the sections, the CPU's limits first
    for name in $(cut -d' ' -f1 "$BENCH_OUT/status.txt"); do
        log="$BENCH_OUT/$name.log"
        [ -f "$log" ] || continue
        grep -E '^[a-z][a-z0-9_]* ([a-z0-9_]+=[^ ]+ )*[-+0-9.]+$|^[a-z][a-z0-9_]* ([a-z0-9_]+=[^ ]+ ?)+$' "$log"
    done | sed 's/^/  /'
} >"$BENCH_OUT/summary.txt"
echo
echo "==== summary (also in $BENCH_OUT/summary.txt) ===="
cat "$BENCH_OUT/summary.txt"
