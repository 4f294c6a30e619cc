#!/bin/sh
# test_pack.sh - packed model files from the command line: train pack writes
# a model file with the panels the matrix kernels read beside the matrices;
# encode and decode read them in place (decode -v says so) and translate
# byte for byte as from the plain file, float32 and int8, beam and greedy,
# with the AVX2 kernels too (TFM_ISA=avx2) and with a shortlist; the other
# programs read the packed file as the model it also is; bad requests and a
# damaged file get clear errors.
#
# Run through tests/run.sh, or by hand:
#   BUILD=build/release BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_pack.sh
. "$ROOT/tests/cli/lib.sh"

DEMO="$ROOT/tests/data/demo"
MK="$BUILD/tools/mkmodel"
for p in tokenize train encode decode score; do
    if [ ! -x "$BIN/$p" ]; then fail "no $BIN/$p"; exit 0; fi
done
if [ ! -x "$MK" ]; then fail "no $MK"; exit 0; fi
export PATH="$BIN:$PATH"

expect_status 0 "train pack --help" train pack --help
grep -q 'read them in place' out.txt && pass "train pack --help says what it is for" ||
    fail "train pack --help says what it is for"
expect_status 2 "train pack without -o: a usage error" train pack -i nothing.st
expect_stderr "pack: -i MODEL and -o OUTPUT are required" "... saying what is missing"
expect_status 1 "train pack of a missing file" train pack -i nothing.st -o p.st
expect_stderr "nothing.st" "... naming it"
check "... and writing nothing" test ! -e p.st

# A random model of odd sizes (a 300-piece vocabulary: the output layer's
# last panel is partial), untied embeddings, and its int8 form.
head -300 "$DEMO/train.src" >src.txt
head -300 "$DEMO/train.tgt" >tgt.txt
tokenize learn -q --vocab-size 300 src.txt tgt.txt -o v.vocab
"$MK" --preset tiny --vocab v.vocab --seed 5 --d-ff 72 -o f32.st
train quantize --compute-type int8 -i f32.st -o int8.st
expect_status 0 "train pack float32" train pack -i f32.st -o f32.p.st
expect_status 0 "train pack int8" train pack --input int8.st --output int8.p.st
head -40 "$DEMO/test.src" | tokenize -m f32.st >ids.txt

# run MODEL OUT [DECODE OPTION]...: encode | decode, at most 12 ids (a
# random model stops late).
run() {
    m=$1 out=$2; shift 2
    encode -m "$m" <ids.txt | decode -m "$m" --max-length 12 "$@" >"$out"
}
for t in f32 int8; do
    for isa in "" avx2; do
        for search in "--beam 4" "--greedy"; do
            TFM_ISA=$isa run $t.st plain.out $search
            TFM_ISA=$isa run $t.p.st packed.out $search
            check "$t${isa:+, TFM_ISA=$isa}, $search: the packed file translates as the plain one" \
                test -s plain.out -a "$(lines_of packed.out)" -eq 40
            same_files "... byte for byte" plain.out packed.out
        done
    done
done

expect_status 0 "decode -v on the packed file" sh -c 'encode -m f32.p.st <ids.txt | decode -v -m f32.p.st --max-length 4'
expect_stderr "weights: the panels of the packed model file, read in place" "... says the panels are read in place"
expect_status 0 "decode -v on the plain file" sh -c 'encode -m f32.st <ids.txt | decode -v -m f32.st --max-length 4'
expect_stderr "weights: packed at start" "... says it packs at start"

# A shortlist gathers its columns from the file's panels.
train shortlist -m f32.st --src src.txt --tgt tgt.txt --text -o sl.st 2>/dev/null
head -40 "$DEMO/test.src" >text.txt
for t in f32 int8; do
    encode -m $t.st <ids.txt | decode -m $t.st --max-length 12 --shortlist sl.st --source text.txt >plain.out
    encode -m $t.p.st <ids.txt | decode -m $t.p.st --max-length 12 --shortlist sl.st --source text.txt >packed.out
    check "$t with a shortlist: a line per sentence" test "$(lines_of packed.out)" -eq 40
    same_files "... the same as the plain file's" plain.out packed.out
done

# The other programs read the packed file as the model it is.
head -40 "$DEMO/test.tgt" | tokenize -m f32.st >tgt_ids.txt
score -m f32.st --src ids.txt --tgt tgt_ids.txt >plain.score 2>/dev/null
score -m f32.p.st --src ids.txt --tgt tgt_ids.txt >packed.score 2>/dev/null
check "score -m: scores" test -s packed.score
same_files "... the same from the packed file" plain.score packed.score
echo 'a b c' | tokenize -m f32.p.st >tok.txt
echo 'a b c' | tokenize -m f32.st >tok0.txt
same_files "tokenize -m reads the packed file's vocabulary" tok0.txt tok.txt

# tokenize reads a packed file's vocabulary from its arrays, in place: the
# same ids and text as from the plain file, both ways, one vocabulary for
# both sides or one per side.
check "train pack stores the vocabulary as arrays" grep -q '"vocab.texts"' f32.p.st
head -40 "$DEMO/test.src" >src40.txt
tokenize -m f32.st src40.txt >ids0.txt
tokenize -m f32.p.st src40.txt >ids1.txt
check "tokenize -m PACKED: an ids line per line" test "$(lines_of ids1.txt)" -eq 40
same_files "... the same ids as from the plain file" ids0.txt ids1.txt
mkfifo model.fifo
cat f32.p.st >model.fifo &
tokenize -m model.fifo src40.txt >ids2.txt
wait
same_files "... and from the packed file through a pipe" ids0.txt ids2.txt
tokenize -d -m f32.st ids0.txt >text0.txt
tokenize -d -m f32.p.st ids0.txt >text1.txt
same_files "tokenize -d -m PACKED: the same text" text0.txt text1.txt
tokenize learn -q --vocab-size 290 tgt.txt -o t.vocab
train --init-only --preset tiny -q --src-vocab v.vocab --tgt-vocab t.vocab -o two.st
expect_status 0 "train pack of a model with a vocabulary per side" train pack -i two.st -o two.p.st
for side in source target; do
    tokenize --side $side -m two.st src40.txt >ids0.txt
    tokenize --side $side -m two.p.st src40.txt >ids1.txt
    check "... tokenize --side $side: ids" test -s ids1.txt
    same_files "... the same as from the plain file" ids0.txt ids1.txt
done

# Arrays that say another thing than the text: tokenize checks them as it
# checks the text (two byte pieces swapped are out of place), and a program
# that reads the whole model finds that they differ.
perl -0777 -pe 's/<0x41>\0<0x42>\0/<0x42>\0<0x41>\0/' f32.p.st >swapped.st
check "(the damaged copy differs)" sh -c '! cmp -s f32.p.st swapped.st'
expect_status 1 "tokenize -m of arrays out of order" sh -c 'echo a | tokenize -m swapped.st'
expect_stderr "swapped.st" "... naming the file"
expect_stderr "byte piece out of place: expected '<0x41>'" "... and what is wrong"
expect_status 1 "train pack of a file whose arrays differ from its text" \
    train pack -i swapped.st -o again.st
expect_stderr "of the arrays of 'vocab' differs from the vocabulary's text" "... saying so"

# Damage: a packed file cut short is refused, naming the file.
head -c 100000 f32.p.st >cut.st
expect_status 1 "decode of a packed file cut short" sh -c 'encode -m f32.st <ids.txt | decode -m cut.st'
expect_stderr "cut.st" "... naming it"
