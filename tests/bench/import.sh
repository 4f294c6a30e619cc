#!/bin/sh
# import.sh BUILD [OPUSDIR] - an imported OPUS-MT model: encode | decode against
# CTranslate2 4.8.1 on the same model, the same sources and the same limits.
#
#   model    OPUSDIR (default ../bench-opus; BENCH_OPUS): a base-shaped OPUS-MT
#            directory with random weights (6+6 layers, d_model 512, 8 heads,
#            d_ff 2048, swish, post-norm, tied-all, 32k joint SentencePiece),
#            made when missing by
#            `python3 tests/import/make_fixtures.py --base OPUSDIR` (~1 min;
#            about 250 MB: never commit it).  `train import` turns it into
#            OUTDIR/base.st; CTranslate2 converts it itself (OpusMTConverter,
#            cached by tests/import/ct2_translate.py).
#   input    the first LINES (default 1000) lines of the enfr test set
#            (xzcat ../shared/data/enfr/test.en.xz), prepared once: ids with
#            `tokenize -m base.st`, pieces with spm_encode --model source.spm.
#   runs     float32 and int8 (encode/decode --compute-type int8; CTranslate2
#            compute_type int8), beam 4 and greedy, batch 64 and batch 1
#            (encode/decode --batch-size; max_batch_size, batch_type
#            examples), THREADS (default 2) threads each side, one run each.
#            Same search: decode --max-length 256 --max-length-offset 1000
#            --min-length 1 --plain-beam; CTranslate2 beam_size 4 or 1,
#            max_decoding_length 256 (its min_decoding_length defaults to 1).
#            tfm runs on this CPU's kernels and, where it has AVX-512, again
#            with TFM_ISA=avx2.  CTranslate2 runs with OMP_WAIT_POLICY=PASSIVE:
#            its spinning OpenMP threads are many times slower on this shared
#            2-CPU machine (tests/import/README.md), so it gets its best setting.
#   time     tfm: the wall time of `encode | decode` on the prepared ids, and
#            net of loading: minus the wall time of the same pipeline on no
#            input (both programs load the model; measured once per compute
#            type and ISA).  CTranslate2: translate_batch alone (its load and
#            conversion excluded), as ct2_translate.py reports it.
#            ratio = CTranslate2 time / tfm time: > 1 means tfm is faster.
#   work     output tokens of each side (with </s>): if they differ much, the
#            times do not compare the same work, and the table says so.
#            Float32 outputs are compared as text, line by line.
#
# Output to OUTDIR (default BENCH_OUT/import, BENCH_OUT default build/bench).
# Environment: THREADS, LINES, CT2DIR (default /work/ct2 or ../ct2),
# SKIP_AVX2=1, SKIP_BATCH1=1.
set -u
BUILD=${1:?usage: tests/bench/import.sh BUILD [OPUSDIR]}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
OPUS=${2:-${BENCH_OPUS:-../bench-opus}}
THREADS=${THREADS:-2}
LINES=${LINES:-1000}
BENCH_OUT=${BENCH_OUT:-build/bench}
OUTDIR=${OUTDIR:-$BENCH_OUT/import}
ENFR=${ENFR:-../shared/data/enfr}
CT2DIR=${CT2DIR:-}
[ -n "$CT2DIR" ] || for d in /work/ct2 ../ct2; do [ -d "$d/src/python" ] && { CT2DIR=$(cd "$d" && pwd); break; }; done
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
export LC_ALL=C.UTF-8
PY=/usr/bin/python3
ENC="$BUILD/bin/encode" DEC="$BUILD/bin/decode" TOK="$BUILD/bin/tokenize" TRAIN="$BUILD/bin/train"
for p in "$ENC" "$DEC" "$TOK" "$TRAIN"; do
    [ -x "$p" ] || { echo "import bench: $p is not built (make all)"; exit 1; }
done
CT2ENV="PYTHONPATH=${CT2DIR:-/nonexistent}/src/python LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread:${CT2DIR:-/nonexistent}/install/lib"
if [ -z "$CT2DIR" ] || ! env $CT2ENV "$PY" -c 'import ctranslate2' 2>/dev/null; then
    echo "import bench: skipped: CTranslate2 is not importable (make deps does not install it);"
    echo "  build it with ../shared/tools/ct2_build.sh (see tests/import/README.md) and set CT2DIR"
    exit 0
fi
command -v spm_encode >/dev/null || { echo "import bench: spm_encode missing (apt-get install sentencepiece)"; exit 1; }
[ -f "$ENFR/test.en.xz" ] || { echo "import bench: $ENFR/test.en.xz missing"; exit 1; }

cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
cpu_isa=AVX2; case "$cpu_flags" in *avx512f*) cpu_isa=AVX-512 ;; esac
case "$cpu_flags" in *avx512_vnni*) cpu_isa="$cpu_isa, VNNI" ;; esac
case "$cpu_flags" in *avx2*) ;; *) cpu_isa="no AVX2" ;; esac
isas=native
case "$cpu_flags" in *avx512f*) [ -n "${SKIP_AVX2:-}" ] || isas="native avx2" ;; esac
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1) ($cpu_isa)," \
     "$(nproc 2>/dev/null) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "import bench: $THREADS threads each side, $LINES lines, one run each; output in $OUTDIR"

# ---- the model, imported; the input, prepared once ----------------------------------------

if [ ! -f "$OPUS/decoder.yml" ]; then
    echo "import bench: making $OPUS (make_fixtures.py --base)"
    "$PY" tests/import/make_fixtures.py --base "$OPUS" || exit 1
fi
OPUS=$(cd "$OPUS" && pwd)
MODEL="$OUTDIR/base.st"
if [ ! -s "$MODEL" ] || [ -n "$(find "$OPUS" -newer "$MODEL" -type f | head -1)" ]; then
    t0=$(date +%s.%N)
    "$TRAIN" import -q "$OPUS" -o "$MODEL" || exit 1
    echo "train import: $(echo "$(date +%s.%N) - $t0" | bc) s -> $MODEL ($(du -m "$MODEL" | cut -f1) MB)"
fi
xz -dc "$ENFR/test.en.xz" | head -n "$LINES" >"$OUTDIR/src.txt"
"$TOK" -m "$MODEL" <"$OUTDIR/src.txt" >"$OUTDIR/src.ids" || exit 1
spm_encode --model "$OPUS/source.spm" --output_format piece <"$OUTDIR/src.txt" >"$OUTDIR/src.pieces" || exit 1
echo "sources: $(wc -l <"$OUTDIR/src.ids") lines, $(awk '{n += NF + 1} END {print n}' "$OUTDIR/src.ids") ids with </s>" \
     "(tokenize -m), $(awk '{n += NF + 1} END {print n}' "$OUTDIR/src.pieces") pieces (spm_encode)"

now() { date +%s.%N; }
# with_isa ISA COMMAND...: COMMAND with TFM_ISA=ISA (native: as the CPU allows)
with_isa() { (if [ "$1" != native ]; then TFM_ISA=$1; export TFM_ISA; fi; shift; "$@"); }
# tfm_run ISA COMPUTE SEARCH BATCH OUT: prints the wall seconds of encode | decode
tfm_run() {
    if [ "$3" = greedy ]; then s=--greedy; else s="--beam 4"; fi
    t0=$(now)
    with_isa "$1" sh -c '"$1" -q -m "$2" --threads "$3" --compute-type "$4" --batch-size "$5" <"$6" |
        "$7" -q -m "$2" --threads "$3" --compute-type "$4" --batch-size "$5" $8 \
             --max-length 256 --max-length-offset 1000 --min-length 1 --plain-beam >"$9"' \
        sh "$ENC" "$MODEL" "$THREADS" "$2" "$4" "$OUTDIR/src.ids" "$DEC" "$s" "$5" || return 1
    echo "$(now) - $t0" | bc
}
# load_time ISA COMPUTE: the same pipeline on no input
load_time() {
    t0=$(now)
    with_isa "$1" sh -c '"$1" -q -m "$2" --threads "$3" --compute-type "$4" </dev/null |
        "$5" -q -m "$2" --threads "$3" --compute-type "$4" --greedy >/dev/null' \
        sh "$ENC" "$MODEL" "$THREADS" "$2" "$DEC" || return 1
    echo "$(now) - $t0" | bc
}
# ct2_run COMPUTE SEARCH BATCH OUT: prints CTranslate2's translate seconds
ct2_run() {
    if [ "$2" = greedy ]; then b=1; else b=4; fi
    env $CT2ENV OMP_WAIT_POLICY=PASSIVE "$PY" tests/import/ct2_translate.py "$OPUS" --ct2 "$CT2DIR" \
        --compute-type "$1" --beam "$b" --batch-size "$3" --threads "$THREADS" --max-length 256 \
        <"$OUTDIR/src.pieces" >"$4" 2>"$4.log" || { cat "$4.log"; return 1; }
    sed -n 's/.* lines \([0-9.]*\) s wall.*/\1/p' "$4.log"
}
toks() { awk '{n += NF + 1} END {print n + 0}' "$1"; }

# ---- the runs --------------------------------------------------------------------------------

: >"$OUTDIR/summary.txt"
batches="64 1"; [ -n "${SKIP_BATCH1:-}" ] && batches=64
printf '\n%-7s %-6s %-5s %-6s | %8s %8s %8s | %8s %8s | %8s | %6s %6s | %s\n' \
    compute search batch isa "tfm s" "load s" "net s" "ct2 s" "ct2 tok" "tfm tok" "ratio" "net" "tok/s tfm(net) ct2, identical"
for compute in float32 int8; do
    for isa in $isas; do eval "load_${compute}_$isa=\$(load_time $isa $compute)"; done
    for batch in $batches; do
        for search in beam4 greedy; do
            name=$compute-$search-b$batch
            ct=$(ct2_run "$compute" "$search" "$batch" "$OUTDIR/ct2-$name.pieces") || continue
            spm_decode --model "$OPUS/target.spm" --input_format piece <"$OUTDIR/ct2-$name.pieces" >"$OUTDIR/ct2-$name.txt"
            ctok=$(toks "$OUTDIR/ct2-$name.pieces")
            for isa in $isas; do
                out="$OUTDIR/tfm-$name-$isa.ids"
                tt=$(tfm_run "$isa" "$compute" "$search" "$batch" "$out") || { echo "$name $isa: tfm failed"; continue; }
                "$TOK" -d -m "$MODEL" <"$out" >"${out%.ids}.txt"
                ttok=$(toks "$out")
                eval "lt=\$load_${compute}_$isa"
                same=$(paste -d '\t' "${out%.ids}.txt" "$OUTDIR/ct2-$name.txt" |
                       awk -F '\t' '$1 == $2 { s++ } END { print s + 0 }')
                awk -v c="$compute" -v s="$search" -v b="$batch" -v i="$isa" -v tt="$tt" -v lt="$lt" \
                    -v ct="$ct" -v ctok="$ctok" -v ttok="$ttok" -v same="$same" -v n="$LINES" 'BEGIN {
                    net = tt - lt; if (net < 0.001) net = 0.001
                    warn = (ttok > 1.1 * ctok || ctok > 1.1 * ttok) ? "  (tokens differ >10%: not comparable)" : ""
                    printf "%-7s %-6s %-5s %-6s | %8.2f %8.2f %8.2f | %8.2f %8d | %8d | %6.2f %6.2f | %.0f %.0f, %d/%d%s\n",
                        c, s, b, i, tt, lt, net, ct, ctok, ttok, ct / tt, ct / net, ttok / net, ctok / ct, same, n, warn
                    printf "import_vs_ct2 compute=%s search=%s batch=%s isa=%s tfm_s=%.3f tfm_load_s=%.3f ct2_s=%.3f tfm_tok=%d ct2_tok=%d identical=%d/%d ratio=%.3f ratio_net=%.3f\n",
                        c, s, b, i, tt, lt, ct, ttok, ctok, same, n, ct / tt, ct / net >"/dev/stderr" }' 2>>"$OUTDIR/summary.txt"
            done
        done
    done
done
echo
echo "ratio = CTranslate2 translate_batch seconds / tfm encode|decode seconds (> 1: tfm faster);"
echo "net = the same over tfm's seconds minus its load (the pipeline on no input); t/s = output"
echo "tokens with </s> per second (tfm: net); same = lines whose text equals CTranslate2's."
echo "Machine-readable lines: $OUTDIR/summary.txt"
