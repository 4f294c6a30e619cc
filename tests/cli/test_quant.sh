#!/bin/sh
# test_quant.sh - quantized inference from the command line: train quantize
# writes int8 and bf16 model files (a quarter and a half of the float32
# file), encode and decode compute in int8 and bf16 (--compute-type), on a
# model trained on a tiny version of the demo's dates: the translations
# nearly all equal float32's, a float32 model asked for int8 translates as its
# int8 file does, every int8 kernel gives the same bytes, and the other
# programs read quantized files.  Bad requests and damaged files get clear
# errors.  In the optimised build, the peak memory of decoding with an int8
# base model is at most 40% of float32's.
#
# Run through tests/run.sh, or by hand:
#   BUILD=build/release BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_quant.sh
. "$ROOT/tests/cli/lib.sh"

DEMO="$ROOT/tests/data/demo"
MK="$BUILD/tools/mkmodel"
for p in tokenize train encode decode score inspect-attn; do
    if [ ! -x "$BIN/$p" ]; then fail "no $BIN/$p"; exit 0; fi
done
if [ ! -x "$MK" ]; then fail "no $MK"; exit 0; fi
export PATH="$BIN:$PATH"
lines() { awk 'END { print NR }' "$1"; }
size() { wc -c <"$1" | tr -d ' '; }

# ---- a model to quantize -----------------------------------------------------------

# The shared fixture 'dates' (tests/fixtures.sh: 300 updates, trained once
# per run by the optimised build, which trains bit for bit as the sanitizer
# build does), with relative positions (train's default): their tables
# stay float32 in a quantized file (quantized, the attention read zeros:
# int8 BLEU 20.4 against float32's 100 before that was fixed).  Measured
# on it: int8 200 of 200 translations equal to float32's, bf16 200 of 200,
# BLEU 100.0 against 100.0.
fixture dates || { fail "the fixture 'dates': a model to quantize"; exit 0; }
cp dates.st f32.st

expect_status 0 "train quantize --compute-type int8" train quantize --compute-type int8 -i f32.st -o int8.st
expect_status 0 "train quantize --compute-type bf16" train quantize --compute-type bf16 --input f32.st --output bf16.st

# The sizes, on the small preset's shapes (the tiny model's header, its
# vocabulary, is most of its file): int8 at most 30% of float32, bf16 55%.
"$MK" --preset small --vocab dates.vocab --seed 3 -o small.st
train quantize --compute-type int8 -i small.st -o small.int8.st
train quantize --compute-type bf16 -i small.st -o small.bf16.st
f=$(size small.st) i=$(size small.int8.st) b=$(size small.bf16.st)
check "an int8 file is at most 30% of the float32 one ($i of $f bytes)" test $((i * 100)) -le $((f * 30))
check "a bf16 file is at most 55% of the float32 one ($b of $f bytes)" test $((b * 100)) -le $((f * 55))

# ---- translations ----------------------------------------------------------------

# translate MODEL OUT [DECODE OPTION]...: greedy, through the whole pipeline.
translate() {
    m=$1 out=$2; shift 2
    tokenize -m "$m" <test.src | encode -m "$m" "$@" | decode -m "$m" --greedy "$@" |
        tokenize -d -m "$m" >"$out"
}
same_lines() { paste -d '\t' "$1" "$2" | awk -F'\t' '$1 == $2 { n++ } END { print n + 0 }'; }

translate f32.st f32.out
translate int8.st int8.out
translate bf16.st bf16.out
n=$(lines test.src)
check "int8: a line per source ($(lines int8.out) of $n)" test "$(lines int8.out)" -eq "$n"
s8=$(same_lines f32.out int8.out) s16=$(same_lines f32.out bf16.out)
check "int8: at least 97% of the greedy translations equal float32's ($s8 of $n)" \
    test $((s8 * 100)) -ge $((n * 97))
check "bf16: at least 97% of the greedy translations equal float32's ($s16 of $n)" \
    test $((s16 * 100)) -ge $((n * 97))
b32=$(score bleu -b -r test.tgt f32.out) b8=$(score bleu -b -r test.tgt int8.out)
check "int8: BLEU within 1 of float32's ($b8 against $b32)" \
    awk -v a="$b8" -v b="$b32" 'BEGIN { exit !(a - b <= 1 && b - a <= 1) }'

translate f32.st f32as8.out --compute-type int8
check "a float32 model asked for int8 translates as its int8 file" cmp -s f32as8.out int8.out
translate f32.st f32as16.out --compute-type bf16
check "a float32 model asked for bf16 translates as its bf16 file" cmp -s f32as16.out bf16.out
translate int8.st int8as32.out --compute-type float32
check "an int8 file computes in float32 when asked (a line per source)" \
    test "$(lines int8as32.out)" -eq "$n"
for isa in avx512bw avx2 none; do
    TFM_ISA=$isa translate int8.st int8.$isa.out
    check "int8: TFM_ISA=$isa gives the same bytes" cmp -s int8.$isa.out int8.out
done
for isa in avx512bw avx2 none; do
    TFM_ISA=$isa translate bf16.st bf16.$isa.out
    check "bf16: TFM_ISA=$isa gives the same bytes" cmp -s bf16.$isa.out bf16.out
done

head -3 test.src | tokenize -m int8.st | encode -m int8.st >three.npy 2>/dev/null
expect_status 0 "decode -v with an int8 model" decode -v -m int8.st three.npy
expect_stderr "^decode: matrix kernel: int8 " "decode -v names the int8 kernel"
expect_stderr "^decode: why this kernel: the CPU has " "decode -v says why: what the CPU has"
TFM_ISA=avx2 expect_status 0 "decode -v with an int8 model, TFM_ISA=avx2" decode -v -m int8.st three.npy
expect_stderr "^decode: matrix kernel: int8 (AVX2|C)$" "decode -v names the AVX2 int8 kernel (or C, without AVX2)"
expect_stderr "^decode: why this kernel: TFM_ISA in the environment asks for no more$" \
    "decode -v says TFM_ISA chose it"
expect_status 0 "decode -v with a bf16 model" decode -v -m bf16.st three.npy
expect_stderr "^decode: matrix kernel: bf16 " "decode -v names the bf16 kernel"
TFM_ISA=avx2 expect_status 0 "decode -v with a bf16 model, TFM_ISA=avx2" decode -v -m bf16.st three.npy
expect_stderr "^decode: matrix kernel: bf16 (AVX2 \(widened to float32\)|C)$" \
    "decode -v names the AVX2 bf16 kernel (or C, without AVX2)"

# ---- the other programs read quantized models ---------------------------------------

head -20 test.src | tokenize -m dates.vocab >s.ids
head -20 test.tgt | tokenize -m dates.vocab >t.ids
expect_status 0 "score -m with an int8 model" score -m int8.st --src s.ids --tgt t.ids
check "score -m: a score per pair" test "$(lines out.txt)" -eq 20
expect_status 0 "tokenize -m with an int8 model" tokenize -m int8.st test.src
expect_status 0 "inspect-attn with an int8 model" inspect-attn -m int8.st --text --format tsv test.src
check "inspect-attn: weights printed" test -s out.txt

# ---- refusals -------------------------------------------------------------------------

expect_status 1 "an int8 model asked for bf16" encode -m int8.st --compute-type bf16 s.ids
expect_stderr "^encode: int8.st: the model's weights are int8: it computes in int8 or float32, not bf16$" \
    "names the model and what it computes in"
expect_status 2 "--compute-type int4" decode -m int8.st --compute-type int4 three.npy
expect_stderr "^decode: --compute-type: 'int4' is not one of: float32, int8, bf16, default$" "lists the types"
expect_status 2 "train quantize without --compute-type" train quantize -i f32.st -o x.st
expect_status 2 "train quantize --compute-type float32" train quantize --compute-type float32 -i f32.st -o x.st
expect_stderr "is not one of: int8, bf16" "says what quantize takes"
expect_status 1 "train quantize of an int8 model" train quantize --compute-type int8 -i int8.st -o x.st
expect_stderr "^train: int8.st: a model is quantized from float32: it is int8 already$" "says it is int8 already"
check "a refused quantize writes nothing" test ! -e x.st

# A damaged quantized file: a scale missing, a matrix of another dtype.
PY=$(python_numpy)
if [ -n "$PY" ]; then
    "$PY" - int8.st <<'EOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
def write(path, h):
    text = json.dumps(h).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
name = "decoder.layers.0.fc1.weight"
h = json.loads(json.dumps(header)); h[name + "_scale"]["dtype"] = "I32"
write("badscale.st", h)
h = json.loads(json.dumps(header)); h["__metadata__"]["quantization"] = "int4"
write("badtype.st", h)
h = json.loads(json.dumps(header)); h[name]["dtype"] = "U8"
write("badmatrix.st", h)
EOF
    expect_status 1 "a scale of another dtype" decode -m badscale.st three.npy
    expect_stderr "^decode: badscale.st: tensor 'decoder.layers.0.fc1.weight_scale' has dtype I32, expected F32$" \
        "names the scale tensor"
    expect_status 1 "an unknown quantization" decode -m badtype.st three.npy
    expect_stderr "metadata 'quantization' is 'int4', expected 'int8' or 'bf16'" "names the metadata"
    expect_status 1 "a matrix of another dtype" encode -m badmatrix.st s.ids
    expect_stderr "tensor 'decoder.layers.0.fc1.weight' has dtype U8" "names the matrix"
else
    skip "damaged quantized files: no python3 with numpy"
fi

# ---- memory ------------------------------------------------------------------------------

# Peak resident memory of decoding with the base preset: the int8 file's
# matrices stay int8 (a quarter), never float32.  Not under the sanitizers,
# whose shadow memory decides the peak.
case "$BUILD" in
*asan*) skip "peak memory: not measured under the sanitizers" ;;
*)
    if [ -x /usr/bin/time ]; then
        "$MK" --preset base --vocab dates.vocab --seed 4 -o base.st
        train quantize --compute-type int8 -i base.st -o base.int8.st
        head -50 test.src | tokenize -m base.st | encode -m base.st --threads 1 >base.npy
        peak() { /usr/bin/time -f %M -o mem.txt decode -m "$1" --threads 1 --greedy --max-length 20 base.npy >/dev/null; cat mem.txt; }
        m32=$(peak base.st) m8=$(peak base.int8.st)
        check "decode: peak memory with an int8 base model at most 40% of float32's ($m8 of $m32 KB)" \
            test $((m8 * 100)) -le $((m32 * 40))
    else
        skip "peak memory: no /usr/bin/time"
    fi
    ;;
esac
