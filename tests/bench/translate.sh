#!/bin/sh
# translate.sh BUILD - encode | decode against PyTorch's nn.Transformer, side
# by side on the same shapes, weights and thread count.
#
#   speed    sentences/s and target tokens/s of greedy search and beam 4, at
#            batch 64 and batch 1, on the small preset (d_model 256, 3+3
#            layers, d_ff 1024, 4 heads) with an 8k vocabulary and on the base
#            preset (512, 6+6, 2048, 8 heads; a 32k vocabulary when the enfr
#            corpus is there, else the same 8k; fewer sentences); 25-token
#            sources (+ </s>), exactly 30 output tokens.
#   compute  the same shapes in float32, bf16 and int8 (quantized files),
#            on this CPU's kernels and, where it has AVX-512, on AVX2's
#            (TFM_ISA=avx2) in the same run; beside them, with the enfr
#            corpus, float32 with and without a lexical shortlist learnt
#            from it, on its real test sentences: one table of ratios.
#            No trained model exists yet, so the models are freshly
#            initialised (tests/tools/mkmodel) and decoding runs at fixed
#            length (--min-length 30 --max-length 30): the work is that of a
#            real model, the output is not a translation.
#   flops    the achieved GFLOP/s of encode + decode (counted from the shapes)
#            as a fraction of this machine's sgemm rate on decoding shapes
#            (tests/bench/sgemm.c, with the same thread count).
#   peer     PyTorch (Debian's python3-torch): tests/bench/torch_translate.py
#            builds nn.Transformer with our weights and decodes greedily at
#            batch 64 and 1 (it has no key/value cache and no beam search:
#            what a PyTorch user gets); ratio = ours / torch.  Torch runs
#            with OMP_WAIT_POLICY=PASSIVE: its default spinning OpenMP pool
#            made it up to 20x slower on this shared 2-CPU machine (DESIGN.md,
#            Threads), so it gets its best setting.  It also checks
#            correctness: both decode the same sources with no token repeated
#            (--no-repeat-ngram 1, so a random model's outputs vary), and
#            the share of identical outputs is reported.
#   context  CTranslate2 measured on another machine of this kind (d_model
#            256, 3+3, 8k vocabulary, 25-token sources, 30 output tokens):
#            9,700 target tokens/s greedy batch 64, 3,300 beam 4 batch 64,
#            850 greedy batch 1 - printed beside ours, labelled as taken
#            elsewhere, and never divided into ours (not the same run).
#   memory   peak RSS of encode and of decode (greedy, batch 64) on 10,000 and
#            on 1,000,000 input lines with a very small model: bounded by the
#            batch, not by the input.
#
# Everything goes to OUTDIR (default BENCH_OUT/translate, BENCH_OUT default
# build/bench).  Environment: THREADS (default: the CPU count), SGEMM_GFLOPS_*
# and BENCH_OUT from tests/bench/run.sh (else sgemm runs here), SCALE (a
# factor on the sentence counts, default 1), SKIP_BASE=1, SKIP_MEMORY=1.
set -u
BUILD=${1:?usage: tests/bench/translate.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
BENCH_OUT=${BENCH_OUT:-build/bench}
OUTDIR=${OUTDIR:-$BENCH_OUT/translate}
SCALE=${SCALE:-1}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
ENC="$BUILD/bin/encode" DEC="$BUILD/bin/decode" TOK="$BUILD/bin/tokenize" MK="$BUILD/tools/mkmodel"
export LC_ALL=C.UTF-8
for p in "$ENC" "$DEC" "$TOK" "$MK"; do
    [ -x "$p" ] || { echo "translate bench: $p is not built (make all tests)"; exit 1; }
done
PY=/usr/bin/python3
have_torch=yes
"$PY" -c 'import torch, numpy' 2>/dev/null || { have_torch=; echo "translate bench: PyTorch not installed for $PY: ours only"; }
TARGET_greedy_64=9700 TARGET_beam_64=3300 TARGET_greedy_1=850 TARGET_beam_1=

# ---- the yardstick: sgemm on decoding shapes, with our thread count --------------

st=$THREADS; [ "$st" -gt 2 ] && st=2
# run.sh measured it moments ago (and says so with SGEMM_GFLOPS_*); run alone,
# this script measures it itself: a log left by another run does not count.
sgemm_log="$BENCH_OUT/sgemm.log"
if [ -z "${SGEMM_GFLOPS_1:-}" ] || ! grep -q "^sgemm_gflops_decode threads=$st " "$sgemm_log" 2>/dev/null; then
    sgemm_log="$OUTDIR/sgemm.log"
    if [ -x "$BUILD/bench/sgemm" ]; then "$BUILD/bench/sgemm" --seconds 0.2 >"$sgemm_log" 2>&1
    else : >"$sgemm_log"; fi
fi
SGEMM=$(awk -v t="threads=$st" '$1 == "sgemm_gflops_decode" && $2 == t { print $3 }' "$sgemm_log")
[ -n "$SGEMM" ] || SGEMM=nan
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
cpu_isa=AVX2; case "$cpu_flags" in *avx512f*) cpu_isa=AVX-512 ;; esac
case "$cpu_flags" in *avx512_vnni*) cpu_isa="$cpu_isa, VNNI" ;; esac
case "$cpu_flags" in *avx512_bf16*) cpu_isa="$cpu_isa, BF16" ;; esac
case "$cpu_flags" in *avx2*) ;; *) cpu_isa="no AVX2" ;; esac
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1) ($cpu_isa)," \
     "$(nproc 2>/dev/null) CPUs"
echo "translate bench: $THREADS threads; sgemm on decoding shapes ($st thread(s)): $SGEMM GFLOP/s;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null); output in $OUTDIR"
# Our products run on our own kernel (lib/nn/packed.c) where the CPU has
# AVX2 or AVX-512; the yardstick is OpenBLAS with the kernels it chose (or
# that OPENBLAS_CORETYPE imposed), so a fraction above 100% can happen.
blas_core=$(sed -n 's/.*(core \([A-Za-z0-9_]*\)).*/\1/p' "$sgemm_log" | head -1)


# ---- vocabulary, sources, models ---------------------------------------------------

# With the English-French corpus (../shared/data/enfr, or ENFR=DIR) the
# vocabularies are learnt from it (8k for the small preset, 32k for base, as
# the field pairs them), the 25-id sources are crops of its training
# sources, and a lexical shortlist per model is learnt from it for the
# shortlist rows.  Without it: one 8k vocabulary from the bench corpus, no
# shortlist rows.
ENFR=${ENFR:-../shared/data/enfr}
corpus="$BENCH_OUT/corpus.txt"
[ -f "$corpus" ] || corpus=tests/data/corpus-small.txt
have_enfr=
if [ -f "$ENFR/train.en.xz" ] && [ -f "$ENFR/train.fr.xz" ] && [ -f "$ENFR/test.en.xz" ]; then
    have_enfr=yes
    for f in train.en train.fr test.en; do
        [ -s "$OUTDIR/$f" ] || xz -dc "$ENFR/$f.xz" >"$OUTDIR/$f" || exit 1
    done
    corpus="$OUTDIR/train.en"
fi
# learn_vocab SIZE NAME: OUTDIR/NAME.vocab (kept between runs)
learn_vocab() {
    [ -f "$OUTDIR/$2.vocab" ] && return
    if [ -n "$have_enfr" ]; then
        "$TOK" learn -q --vocab-size "$1" "$OUTDIR/train.en" "$OUTDIR/train.fr" -o "$OUTDIR/$2.vocab"
    else
        "$TOK" learn -q --vocab-size "$1" --soft-vocab-limit --input-sentence-size 200000 \
            "$corpus" -o "$OUTDIR/$2.vocab"
    fi || exit 1
}
learn_vocab 8000 v8k
small_vocab=v8k base_vocab=v8k
[ -n "$have_enfr" ] && { learn_vocab 32000 v32k; base_vocab=v32k; }
# vocab_of PRESET: the name of its vocabulary (v8k, v32k)
vocab_of() { if [ "$1" = base ]; then echo "$base_vocab"; else echo "$small_vocab"; fi; }
V=$(($(wc -l <"$OUTDIR/v8k.vocab") - 1))
V_base=$(($(wc -l <"$OUTDIR/$base_vocab.vocab") - 1))
# 2000 sources of exactly 25 ids: lines of at least 25 ids, cropped (cycled
# when the corpus has too few); one file per vocabulary.
for v in $small_vocab $base_vocab; do
    [ -s "$OUTDIR/src25.$v.ids" ] && continue
    head -60000 "$corpus" | "$TOK" -m "$OUTDIR/$v.vocab" |
        awk 'BEGIN { n = 0 } NF >= 25 { for (i = 1; i <= 25; i++) l[n] = l[n] (i > 1 ? " " : "") $i; n++ }
             END { for (i = 0; i < 2000 && n > 0; i++) print l[i % n] }' >"$OUTDIR/src25.$v.ids"
    [ -s "$OUTDIR/src25.$v.ids" ] || { echo "translate bench: no 25-token sources in $corpus"; exit 1; }
done
[ "$OUTDIR/small.st" -nt "$OUTDIR/$small_vocab.vocab" ] || "$MK" --preset small --vocab "$OUTDIR/$small_vocab.vocab" --seed 1 \
    -o "$OUTDIR/small.st" || exit 1
[ "$OUTDIR/base.st" -nt "$OUTDIR/$base_vocab.vocab" ] || "$MK" --preset base --vocab "$OUTDIR/$base_vocab.vocab" --seed 1 \
    -o "$OUTDIR/base.st" || exit 1
# the shortlists ('train shortlist', defaults) and the real sentences their
# rows decode: the test sources, as text and as ids
if [ -n "$have_enfr" ]; then
    for p in small base; do
        v=$(vocab_of "$p")
        [ "$OUTDIR/$p.sl" -nt "$OUTDIR/$p.st" ] && [ -s "$OUTDIR/test.$v.ids" ] && continue
        for f in train.en train.fr test.en; do "$TOK" -m "$OUTDIR/$v.vocab" <"$OUTDIR/$f" >"$OUTDIR/$f.$v.ids"; done
        mv "$OUTDIR/test.en.$v.ids" "$OUTDIR/test.$v.ids"
        "$BUILD/bin/train" shortlist -q -m "$OUTDIR/$p.st" --src "$OUTDIR/train.en.$v.ids" \
            --tgt "$OUTDIR/train.fr.$v.ids" -o "$OUTDIR/$p.sl" || exit 1
        rm -f "$OUTDIR/train.en.$v.ids" "$OUTDIR/train.fr.$v.ids"
    done
fi
echo "vocabularies: small $V pieces, base $V_base, from $corpus; sources: 25 ids + </s>; outputs: 30 ids"
head -1 "$OUTDIR/src25.$small_vocab.ids" | "$ENC" -m "$OUTDIR/small.st" | "$DEC" -v -m "$OUTDIR/small.st" \
    2>"$OUTDIR/kernel.txt" >/dev/null
has_avx512=
grep -q '^decode: matrix kernel: AVX-512' "$OUTDIR/kernel.txt" && has_avx512=yes
echo "our matrix kernel: $(sed -n 's/^decode: matrix kernel: //p' "$OUTDIR/kernel.txt")" \
     "(TFM_ISA=${TFM_ISA:-}); OpenBLAS kernels: ${blas_core:-unknown}" \
     "${OPENBLAS_CORETYPE:+(OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)}"

# with_isa ISA COMMAND... - runs COMMAND in a subshell with TFM_ISA=ISA
# (native: as the environment has it)
with_isa() {
    (if [ "$1" != native ]; then TFM_ISA=$1; export TFM_ISA; fi; shift; "$@")
}

# timed NAME COMMAND... - runs COMMAND (stdout to OUTDIR/NAME.out, stderr to
# OUTDIR/NAME.err) and sets wall and cpu (seconds).
timed() {
    name=$1; shift
    /usr/bin/time -f '%e %U %S' -o "$OUTDIR/$name.time" "$@" >"$OUTDIR/$name.out" 2>"$OUTDIR/$name.err"
    rc=$?
    set -- $(tail -1 "$OUTDIR/$name.time")
    wall=$1 cpu=$(awk "BEGIN { print $2 + $3 }")
    if [ "$rc" -ne 0 ]; then
        echo "  $name: FAILED (exit $rc):"; tail -3 "$OUTDIR/$name.err" | sed 's/^/    /'
    fi
    return "$rc"
}

# flops PRESET N ROWS - the flops of encoding and decoding N sentences
# (SRC_LEN source tokens, default 26; 30 target tokens, ROWS decoder rows
# per sentence and step; the whole vocabulary, also for shortlist rows):
# linear layers 2 x in x out per row, attention 4 x D per query and key,
# the encoder-attention keys and values once per sentence.
flops() {
    case $1 in small) D=256 F=1024 L=3 VV=$V ;; base) D=512 F=2048 L=6 VV=$V_base ;; esac
    awk -v D=$D -v F=$F -v L=$L -v V=$VV -v n=$2 -v r=$3 'BEGIN {
        S = '"${SRC_LEN:-26}"'; T = 30
        enc = L * (S * 2 * (4 * D * D + 2 * D * F) + 4 * S * S * D)
        cross_kv = L * S * 2 * 2 * D * D
        step = L * (2 * (6 * D * D + 2 * D * F) + 4 * S * D) + 2 * D * V
        self_attn = L * 4 * D * T * (T + 1) / 2
        print n * (enc + cross_kv + r * (T * step + self_attn)) }'
}

# ---- speed -------------------------------------------------------------------------------

: >"$OUTDIR/results.txt"
# run_ours PRESET SEARCH BATCH N [SUFFIX] - encode then decode N sources;
# prints a row (tagged PRESET-SEARCH-BATCH[-SUFFIX]).  COMPUTE (float32 when
# unset) is the --compute-type of both; the model is PRESET.st, or its
# quantized file PRESET.COMPUTE.st when QUANTIZED_FILES=1.  The sources are
# the 25-id crops of the preset's vocabulary, or the ids file SRC; with
# SHORTLIST=1 decode uses the preset's shortlist, with SRC_TEXT as --source.
run_ours() {
    preset=$1 search=$2 batch=$3 n=$(($4 * SCALE))
    m="$OUTDIR/$preset.st" tag="$preset-$search-$batch${5:+-$5}" ct="--compute-type=${COMPUTE:-float32}"
    [ "${QUANTIZED_FILES:-0}" = 1 ] && [ "${COMPUTE:-float32}" != float32 ] && m="$OUTDIR/$preset.$COMPUTE.st"
    src=${SRC:-"$OUTDIR/src25.$(vocab_of "$preset").ids"}
    head -n "$n" "$src" >"$OUTDIR/$tag.ids"
    sl=
    if [ "${SHORTLIST:-0}" = 1 ]; then
        head -n "$n" "$SRC_TEXT" >"$OUTDIR/$tag.txt"
        sl="--shortlist=$OUTDIR/$preset.sl --source=$OUTDIR/$tag.txt"
    fi
    timed "$tag-enc" "$ENC" -m "$m" $ct --threads "$THREADS" --batch-size "$batch" "$OUTDIR/$tag.ids" || return
    ew=$wall ec=$cpu
    mv "$OUTDIR/$tag-enc.out" "$OUTDIR/$tag.npy"
    if [ "$search" = greedy ]; then opts="--greedy" rows=1; else opts="--beam 4" rows=4; fi
    timed "$tag-dec" "$DEC" -m "$m" $ct --threads "$THREADS" --batch-size "$batch" $opts \
        --min-length 30 --max-length 30 $sl "$OUTDIR/$tag.npy" || return
    dw=$wall dc=$cpu
    got=$(awk '{ t += NF } END { print NR, t }' "$OUTDIR/$tag-dec.out")
    [ "$got" = "$n $((30 * n))" ] || echo "  $tag: WRONG output: $got lines, tokens (expected $n, $((30 * n)))"
    rm -f "$OUTDIR/$tag.npy"
    fl=$(flops "$preset" "$n" "$rows")
    awk -v tag="$tag" -v n=$n -v ew=$ew -v ec=$ec -v dw=$dw -v dc=$dc -v fl=$fl -v sg=$SGEMM \
        -v target="$([ "$preset" = small ] && eval echo "\${TARGET_${search}_${batch}:-}")" 'BEGIN {
        w = ew + dw; c = ec + dc; tps = 30 * n / w; gf = fl / w / 1e9
        printf "  %-18s %5d %8.2f %8.2f %9.1f %9.0f %9.0f %8.1f %7.1f%%   %s\n", tag, n, w, c, n / w,
            tps, 30 * n / c, gf, (sg > 0 ? 100 * gf / sg : 0), target
        print tag, n, w, c, tps, gf >> "'"$OUTDIR/results.txt"'" }'
}

echo
echo "encode | decode (our pipeline; wall and CPU seconds of encode + decode):"
printf "  %-18s %5s %8s %8s %9s %9s %9s %8s %8s   %s\n" "preset-search-batch" "sents" "wall s" \
    "cpu s" "sent/s" "tok/s" "tok/cpu-s" "GFLOP/s" "of sgemm" "CTranslate2 tok/s, another machine"
run_ours small greedy 64 640
run_ours small beam 64 256
run_ours small greedy 1 64
run_ours small beam 1 32
# for context, the same with the AVX2 kernel where AVX-512 runs
[ -n "$has_avx512" ] && with_isa avx2 run_ours small greedy 64 640 avx2
if [ "${SKIP_BASE:-0}" != 1 ]; then
    run_ours base greedy 64 128
    run_ours base beam 64 64
    run_ours base greedy 1 16
    run_ours base beam 1 8
fi

# ---- compute types and shortlists, on this CPU's kernels and on AVX2's ---------------------------

# The models quantized once ('train quantize'), as a user runs them, row by
# row: each shape runs in float32, bf16 and int8 one after the other, so the
# ratios come from one stretch of this shared machine.  (A float32 file
# given --compute-type int8 is quantized at every load instead: the same
# output, plus that time.)  Beside them, with the enfr corpus, float32 with
# and without the lexical shortlist on real sentences (the test sources as
# they are, not crops: the shortlist depends on their words).  Everything
# runs on the best kernels of this CPU, then again with TFM_ISA=avx2 where
# the CPU has AVX-512 (the kernels of AVX2-only CPUs, in the same run).
if [ "${SKIP_QUANT:-0}" != 1 ]; then
    presets=small; [ "${SKIP_BASE:-0}" != 1 ] && presets="small base"
    for p in $presets; do
        for ct in int8 bf16; do
            [ "$OUTDIR/$p.$ct.st" -nt "$OUTDIR/$p.st" ] || "$BUILD/bin/train" quantize -q \
                --compute-type $ct -i "$OUTDIR/$p.st" -o "$OUTDIR/$p.$ct.st"
        done
    done
    isas=native
    [ -n "$has_avx512" ] && isas="native avx2"
    quant_rows="small:greedy:64:640 small:beam:64:256 small:greedy:1:64 small:beam:1:32"
    [ "${SKIP_BASE:-0}" != 1 ] && quant_rows="$quant_rows base:greedy:64:128 base:beam:64:64 base:greedy:1:16 base:beam:1:8"
    echo
    echo "compute types and shortlists (quantized model files; ratios over float32 in the same run):"
    printf "  %-18s %5s %8s %8s %9s %9s %9s %8s %8s   %s\n" "preset-search-batch" "sents" "wall s" \
        "cpu s" "sent/s" "tok/s" "tok/cpu-s" "GFLOP/s" "of sgemm" ""
    for isa in $isas; do
        sfx=; [ "$isa" != native ] && sfx="-$isa"
        for row in $quant_rows; do
            set -- $(echo "$row" | tr ':' ' ')
            for ct in float32 bf16 int8; do
                COMPUTE=$ct QUANTIZED_FILES=1 with_isa "$isa" run_ours "$1" "$2" "$3" "$4" "$ct$sfx"
            done
            # the shortlist rows: batch 64, real sentences, full and shortlisted
            [ -n "$have_enfr" ] && [ "$3" = 64 ] || continue
            v=$(vocab_of "$1")
            len=$(head -n "$(($4 * SCALE))" "$OUTDIR/test.$v.ids" | awk '{ t += NF + 1 } END { print NR ? t / NR : 0 }')
            for kind in full shortlist; do
                sl=0; [ $kind = shortlist ] && sl=1
                SRC="$OUTDIR/test.$v.ids" SRC_TEXT="$OUTDIR/test.en" SRC_LEN=$len SHORTLIST=$sl \
                    with_isa "$isa" run_ours "$1" "$2" "$3" "$4" "$kind$sfx"
            done
        done
    done
    # For context, where AVX-512 runs: the kernels of CPUs without VNNI and
    # AVX-512 BF16 (TFM_ISA=avx512bw: int8 by vpmaddubsw, bf16 widened to
    # float32).
    if [ -n "$has_avx512" ]; then
        for row in small:greedy:64:640 small:greedy:1:64; do
            set -- $(echo "$row" | tr ':' ' ')
            for ct in float32 bf16 int8; do
                COMPUTE=$ct QUANTIZED_FILES=1 with_isa avx512bw run_ours "$1" "$2" "$3" "$4" "$ct-avx512bw"
            done
        done
    fi
    : >"$OUTDIR/quant.txt"
    awk '{ n = split($1, p, "-"); isa = n >= 5 ? p[5] : ""; k = p[1] "-" p[2] "-" p[3] "-" isa }
         p[4] == "float32" { f[k] = $5 }
         p[4] == "full" { full[k] = $5 }
         {
           if ((p[4] == "int8" || p[4] == "bf16") && f[k] > 0)
               printf "translate_compute_ratio preset=%s search=%s batch=%s compute=%s tok_s=%.0f float32_tok_s=%.0f ratio=%.2f%s\n",
                   p[1], p[2], p[3], p[4], $5, f[k], $5 / f[k], isa != "" ? " isa=" isa : "" > "/dev/stderr"
           if (p[4] == "shortlist" && full[k] > 0)
               printf "translate_shortlist_ratio preset=%s search=%s batch=%s tok_s=%.0f full_tok_s=%.0f ratio=%.2f%s\n",
                   p[1], p[2], p[3], $5, full[k], $5 / full[k], isa != "" ? " isa=" isa : "" > "/dev/stderr" }' \
        "$OUTDIR/results.txt" 2>>"$OUTDIR/quant.txt"
    # the table: one line per shape and kernel set
    echo
    echo "  target tokens/s; ratios over float32 (shortlist: over float32 without it, on real sentences):"
    printf "  %-18s %-7s %9s %9s %9s %9s %9s %9s %9s %9s\n" "preset-search-batch" "kernels" \
        "float32" "bf16" "int8" "bf16/f32" "int8/f32" "full" "shortlist" "ratio"
    awk '{ n = split($1, p, "-"); isa = n >= 5 ? p[5] : "native"; k = p[1] "-" p[2] "-" p[3]
           if (p[4] !~ /^(float32|bf16|int8|full|shortlist)$/) next
           if (!((k, isa) in seen)) { seen[k, isa] = 1; order[++m] = k SUBSEP isa }
           v[k, isa, p[4]] = $5 }
         END { for (i = 1; i <= m; i++) { split(order[i], q, SUBSEP); k = q[1]; isa = q[2]
                 f = v[k, isa, "float32"]; b = v[k, isa, "bf16"]; t = v[k, isa, "int8"]
                 u = v[k, isa, "full"]; s = v[k, isa, "shortlist"]
                 rb = (f > 0 && b > 0) ? sprintf("%.2f", b / f) : "-"
                 rt = (f > 0 && t > 0) ? sprintf("%.2f", t / f) : "-"
                 fu = (u > 0) ? sprintf("%.0f", u) : "-"; fs = (s > 0) ? sprintf("%.0f", s) : "-"
                 rs = (u > 0 && s > 0) ? sprintf("%.2f", s / u) : "-"
                 printf "  %-18s %-7s %9.0f %9.0f %9.0f %9s %9s %9s %9s %9s\n", k, isa, f, b, t, rb, rt, fu, fs, rs } }' \
        "$OUTDIR/results.txt"
    # Peak memory of decoding the base model (greedy, batch 64): int8 and bf16
    # model files against the float32 one.
    if [ "${SKIP_BASE:-0}" != 1 ]; then
        head -n 128 "$OUTDIR/src25.$(vocab_of base).ids" | "$ENC" -m "$OUTDIR/base.st" --threads "$THREADS" >"$OUTDIR/base128.npy"
        for m in base base.bf16 base.int8; do
            /usr/bin/time -f %M -o "$OUTDIR/mem-$m" "$DEC" -m "$OUTDIR/$m.st" --threads "$THREADS" \
                --greedy --min-length 30 --max-length 30 "$OUTDIR/base128.npy" >/dev/null
        done
        awk -v f="$(tail -1 "$OUTDIR/mem-base")" -v b="$(tail -1 "$OUTDIR/mem-base.bf16")" \
            -v i="$(tail -1 "$OUTDIR/mem-base.int8")" 'BEGIN {
            printf "  decode peak RSS, base model files: float32 %d KB, bf16 %d KB (%.0f%%), int8 %d KB (%.0f%%)\n", f, b, 100 * b / f, i, 100 * i / f
            printf "translate_compute_memory_kb preset=base float32=%d bf16=%d int8=%d\n", f, b, i > "/dev/stderr" }' \
            2>>"$OUTDIR/quant.txt"
        rm -f "$OUTDIR/base128.npy"
    fi
fi

# ---- PyTorch ------------------------------------------------------------------------------------

# run_torch PRESET BATCH N - torch greedy (no repeats) on N sources, and ours
# on the same with --no-repeat-ngram 1: speed and agreement.
run_torch() {
    preset=$1 batch=$2 n=$(($3 * SCALE))
    m="$OUTDIR/$preset.st" tag="torch-$preset-$batch"
    head -n "$n" "$OUTDIR/src25.$(vocab_of "$preset").ids" >"$OUTDIR/$tag.ids"
    OMP_WAIT_POLICY=PASSIVE "$PY" tests/bench/torch_translate.py "$m" "$OUTDIR/$tag.ids" "$OUTDIR/$tag.txt" --batch "$batch" \
        --threads "$THREADS" --length 30 --no-repeat >"$OUTDIR/$tag.log" 2>&1 ||
        { echo "  $tag: FAILED:"; tail -3 "$OUTDIR/$tag.log" | sed 's/^/    /'; return; }
    ts=$(awk '$1 == "torch_seconds" { print $2 }' "$OUTDIR/$tag.log")
    "$ENC" -m "$m" --threads "$THREADS" "$OUTDIR/$tag.ids" |
        "$DEC" -m "$m" --threads "$THREADS" --batch-size "$batch" --greedy --min-length 30 \
            --max-length 30 --no-repeat-ngram 1 >"$OUTDIR/$tag.ours.txt"
    ours=$(awk -v t="$preset-greedy-$batch" '$1 == t { print $5 }' "$OUTDIR/results.txt")
    awk -v tag="$preset-greedy-$batch" -v n=$n -v ts=$ts -v ours="$ours" -v preset=$preset \
        -v batch=$batch -v threads=$THREADS '
        NR == FNR { a[FNR] = $0; next }
        { same += (a[FNR] == $0); k = split(a[FNR], x, " "); split($0, y, " ")
          for (i = 1; i <= k; i++) { tok++; if (x[i] != y[i]) break; agree++ } }
        END { tps = 30 * n / ts
              printf "  %-18s %5d %8.2f %9.0f %9.0f %7.2f   %d/%d outputs identical, %.1f%% of tokens before the first difference\n",
                  tag, n, ts, tps, ours, ours / tps, same, FNR, 100 * agree / tok
              printf "translate_vs_torch preset=%s search=greedy batch=%d threads=%d ours_tok_s=%.0f torch_tok_s=%.0f ratio=%.2f identical=%d/%d\n",
                  preset, batch, threads, ours, tps, ours / tps, same, FNR > "/dev/stderr" }' \
        "$OUTDIR/$tag.ours.txt" "$OUTDIR/$tag.txt" 2>>"$OUTDIR/machine.txt"
}

: >"$OUTDIR/machine.txt"
echo
if [ -n "$have_torch" ]; then
    echo "PyTorch nn.Transformer, greedy, no cache ($(
        "$PY" -c 'import torch; print(torch.__version__)'), $THREADS threads, OMP_WAIT_POLICY=PASSIVE):"
    printf "  %-18s %5s %8s %9s %9s %7s   %s\n" "preset-search-batch" "sents" "wall s" "tok/s" \
        "ours" "ratio" "agreement with ours (greedy, no repeated token)"
    run_torch small 64 64
    run_torch small 1 16
    if [ "${SKIP_BASE:-0}" != 1 ]; then
        run_torch base 64 64
        run_torch base 1 8
    fi
else
    echo "PyTorch: not installed, no comparison"
fi

# ---- memory ---------------------------------------------------------------------------------------

if [ "${SKIP_MEMORY:-0}" != 1 ]; then
    echo
    echo "peak memory of encode | decode --greedy --batch-size 64 (d_model 32, 1+1 layers):"
    "$TOK" learn -q --vocab-size 300 --soft-vocab-limit tests/data/corpus-small.txt \
        -o "$OUTDIR/v300.vocab" 2>/dev/null
    "$MK" --preset tiny --vocab "$OUTDIR/v300.vocab" --d-model 32 --d-ff 64 --heads 2 --layers 1 \
        -o "$OUTDIR/micro.st"
    for lines in 10000 1000000; do
        t0=$(date +%s.%N)
        awk -v n=$lines 'BEGIN { srand(1); for (i = 0; i < n; i++) { k = 1 + int(rand() * 8); s = ""
                                 for (j = 0; j < k; j++) s = s (j ? " " : "") (4 + int(rand() * 290)); print s } }' |
            /usr/bin/time -f %M -o "$OUTDIR/mem-enc-$lines" "$ENC" -m "$OUTDIR/micro.st" |
            /usr/bin/time -f %M -o "$OUTDIR/mem-dec-$lines" "$DEC" -m "$OUTDIR/micro.st" --greedy \
                --max-length 3 --batch-size 64 | wc -l >"$OUTDIR/mem-lines-$lines"
        t1=$(date +%s.%N)
        printf "  %8d lines: encode %6d KB, decode %6d KB peak RSS; %d output lines in %.1f s\n" "$lines" \
            "$(tail -1 "$OUTDIR/mem-enc-$lines")" "$(tail -1 "$OUTDIR/mem-dec-$lines")" \
            "$(cat "$OUTDIR/mem-lines-$lines")" "$(awk "BEGIN { print $t1 - $t0 }")"
    done
    awk -v e1="$(tail -1 "$OUTDIR/mem-enc-10000")" -v e2="$(tail -1 "$OUTDIR/mem-enc-1000000")" \
        -v d1="$(tail -1 "$OUTDIR/mem-dec-10000")" -v d2="$(tail -1 "$OUTDIR/mem-dec-1000000")" 'BEGIN {
        printf "  1M lines / 10k lines peak RSS: encode %.2fx, decode %.2fx (1.00 = bounded by the batch)\n", e2 / e1, d2 / d1
        printf "translate_memory_kb lines=10000 encode=%d decode=%d\n", e1, d1 > "/dev/stderr"
        printf "translate_memory_kb lines=1000000 encode=%d decode=%d\n", e2, d2 > "/dev/stderr" }' \
        2>>"$OUTDIR/machine.txt"
fi

# ---- machine-readable lines --------------------------------------------------------------------------

echo
awk -v sg=$SGEMM -v th=$THREADS '{
    split($1, p, "-"); t = "TARGET_" p[2] "_" p[3]
    printf "translate_tok_s preset=%s search=%s batch=%s threads=%s sents=%d tok_s=%.0f gflops=%.1f of_sgemm=%.3f%s\n",
        p[1], p[2], p[3], th, $2, $5, $6, (sg > 0 ? $6 / sg : 0),
        (p[4] ~ /^(float32|int8|bf16)$/ ? " compute=" p[4] : p[4] ~ /^(full|shortlist)$/ ? " shortlist=" (p[4] == "full" ? "no" : "yes") : p[4] != "" ? " isa=" p[4] : "") \
        (p[5] != "" ? " isa=" p[5] : "") }' "$OUTDIR/results.txt"
cat "$OUTDIR/machine.txt"
[ -f "$OUTDIR/quant.txt" ] && [ "${SKIP_QUANT:-0}" != 1 ] && cat "$OUTDIR/quant.txt"
for sb in greedy_64 beam_64 greedy_1; do
    target=$(eval echo "\$TARGET_$sb")
    s=${sb%_*} b=${sb#*_}
    awk -v s=$s -v b=$b -v target=$target -v tag="small-$s-$b" '$1 == tag {
        printf "translate_context_ctranslate2 preset=small search=%s batch=%s ours_tok_s=%.0f other_machine_tok_s=%d\n",
            s, b, $5, target }' "$OUTDIR/results.txt"
done
