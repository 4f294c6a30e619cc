#!/bin/sh
# test_shapes.sh - the shapes made for translating on CPUs (a deeper
# encoder than decoder, pre-norm: 3+1 here, tiny) through every path of
# decoding that a student distilled for CPUs is used with: int8 and bf16
# (train quantize), the packed file (train pack) read as the plain one byte
# for byte, beam 1 as greedy, a batch of 64 as batches of one, a shortlist,
# decode --placeholders keeping every placeholder, a glossary's terms in
# the output, score -m; and train itself on the shape, its gradients
# flowing into every layer of the shallow decoder.  The weights are random
# (tools/mkmodel) or trained for 30 updates: these are invariants of the
# code paths, not of a model's quality.
#
# Run through tests/run.sh, or by hand:
#   BUILD=build/release BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_shapes.sh
. "$ROOT/tests/cli/lib.sh"

DEMO="$ROOT/tests/data/demo"
MK="$BUILD/tools/mkmodel"
for p in tokenize train encode decode score; do
    if [ ! -x "$BIN/$p" ]; then fail "no $BIN/$p"; exit 0; fi
done
if [ ! -x "$MK" ]; then fail "no $MK"; exit 0; fi
export PATH="$BIN:$PATH"

# A placeholder-aware vocabulary on the demo's dates and some format strings.
head -300 "$DEMO/train.src" >src.txt
head -300 "$DEMO/train.tgt" >tgt.txt
printf '%s\n' 'Open %s of %d files' '<b>%s</b> on {0}' 'Copy %2$s to %1$s' >ph.txt
cat src.txt ph.txt >learn.txt
tokenize learn -q --placeholders --vocab-size 320 --soft-vocab-limit learn.txt tgt.txt -o v.vocab
"$MK" --preset tiny --vocab v.vocab --seed 7 --d-ff 72 --encoder-layers 3 --decoder-layers 1 \
    --pre-norm -o f32.st
check "a 3+1 pre-norm model" test -s f32.st
train quantize -q --compute-type int8 -i f32.st -o int8.st
train quantize -q --compute-type bf16 -i f32.st -o bf16.st
for t in f32 int8 bf16; do train pack -q -i $t.st -o $t.p.st; done
check "... quantized to int8 and bf16, and packed" test -s int8.p.st -a -s bf16.p.st -a -s f32.p.st

head -40 "$DEMO/test.src" >text.txt
tokenize -m f32.st <text.txt >ids.txt
for t in f32 int8 bf16; do
    encode -m $t.st <ids.txt >$t.npy
    for search in "--beam 4" "--greedy"; do
        decode -m $t.st --max-length 12 $search <$t.npy >plain.out
        decode -m $t.p.st --max-length 12 $search <$t.npy >packed.out
        check "$t, $search: a line per sentence" test "$(lines_of plain.out)" -eq 40
        same_files "$t, $search: the packed file translates as the plain one" plain.out packed.out
        decode -m $t.st --max-length 12 $search --batch-size 1 --threads 1 <$t.npy >one.out
        same_files "$t, $search: batches of one as a batch of 64" plain.out one.out
    done
    decode -m $t.st --max-length 12 --greedy <$t.npy >greedy.out
    decode -m $t.st --max-length 12 --beam 1 <$t.npy >beam1.out
    same_files "$t: beam 1 is greedy" greedy.out beam1.out
done

# A shortlist, from the packed file's panels as from the plain file.
train shortlist -q -m f32.st --src src.txt --tgt tgt.txt --text -o sl.st
decode -m f32.st --max-length 12 --shortlist sl.st --source text.txt <f32.npy >plain.out
decode -m f32.p.st --max-length 12 --shortlist sl.st --source text.txt <f32.npy >packed.out
check "with a shortlist: a line per sentence" test "$(lines_of plain.out)" -eq 40
same_files "... the packed file's as the plain file's" plain.out packed.out

# Placeholders kept whole, and a glossary's term in the output.
printf '%s\n' 'Open %s of %d files' '<b>%s</b> on {0} %1$s' '' 'file %s, 12 June 1999' >hostile.txt
tokenize -m f32.st --placeholders <hostile.txt | encode -m f32.st |
    decode -m f32.st --max-length 16 --placeholders hostile.txt |
    tokenize -d -m f32.st --placeholders=hostile.txt >steered.txt 2>ph.err
sorted_placeholders() { tokenize placeholders "$1" | awk -F'\t' '{ n = split($0, a, "\t")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? "\t" : "") a[i]; print s }'; }
sorted_placeholders hostile.txt >want.ph
sorted_placeholders steered.txt >got.ph
check "decode --placeholders: every line keeps exactly its placeholders" cmp -s want.ph got.ph
printf 'décembre\t12\n' >terms.tsv
tokenize -m f32.st --glossary terms.tsv --constraints c.txt <text.txt | encode -m f32.st |
    decode -m f32.st --max-length 16 --constraints c.txt | tokenize -d -m f32.st >gloss.txt
check "a glossary: every source with the term has it translated" \
    awk 'NR == FNR { s[FNR] = $0; next } s[FNR] ~ /décembre/ && $0 !~ /12/ { bad = 1 } END { exit bad }' \
    text.txt gloss.txt
check "... and the test has such sources" grep -q décembre text.txt

tokenize -m f32.st <"$DEMO/test.tgt" | head -40 >tgt_ids.txt
score -m f32.st --src ids.txt --tgt tgt_ids.txt >plain.score 2>/dev/null
score -m f32.p.st --src ids.txt --tgt tgt_ids.txt >packed.score 2>/dev/null
check "score -m: a score per pair" test "$(lines_of plain.score)" -eq 40
same_files "... the same from the packed file" plain.score packed.score

# The preset of the shape: small's width, 3+1 layers, pre-norm, in the file.
train -q --preset small-cpu -m v.vocab --init-only -o cpu.st
head -c 4096 cpu.st | tr ',' '\n' >cpu.meta
check "--preset small-cpu: 3 encoder layers, 1 decoder layer, pre-norm, d_model 256" \
    sh -c 'grep -q "\"n_encoder_layers\":\"3\"" cpu.meta && grep -q "\"n_decoder_layers\":\"1\"" cpu.meta &&
        grep -q "\"norm\":\"pre\"" cpu.meta && grep -q "\"d_model\":\"256\"" cpu.meta'

# Training the shape: 30 updates move every tensor of the one decoder layer,
# of the encoder's last and the final layer norms of pre-norm, and a run
# resumed at update 15 ends as one never stopped.
SHAPE="--preset tiny --d-model 32 --d-ff 64 --heads 2 --encoder-layers 3 --decoder-layers 1 --pre-norm"
tokenize -m v.vocab <src.txt >s.ids
tokenize -m v.vocab <tgt.txt >t.ids
train -q $SHAPE -m v.vocab --init-only -o init.st
train -q $SHAPE -m v.vocab --src s.ids --tgt t.ids --batch-tokens 200 --threads 1 --max-steps 30 \
    --save-every 15 -o trained.st
check "train on the shape: a model" test -s trained.st
py=$(python_numpy)
if [ -z "$py" ]; then
    skip "train on the shape: the tensors that moved (no python3)"
else
    set -- $("$py" - init.st trained.st <<'PY'
import sys, json, struct
def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in h.items() if k != "__metadata__"}
a, b = read(sys.argv[1]), read(sys.argv[2])
names = [k for k in a if k.startswith(("decoder.layers.0.", "encoder.layers.2.",
                                       "encoder.layer_norm.", "decoder.layer_norm."))]
print(len(names), sum(a[k] != b[k] for k in names))
PY
)
    check "train on the shape: all ${1:-0} tensors of the decoder's layer, the encoder's last and the final norms moved (${2:-0})" \
        test "${1:-0}" -gt 20 -a "${1:-0}" = "${2:-x}"
fi
mv trained.st first.st
expect_status 0 "train --resume at update 15" train -q --resume=trained.st.ckpt-15 -o trained.st
check "... a run resumed at update 15 as one never stopped" same_tensors first.st trained.st
