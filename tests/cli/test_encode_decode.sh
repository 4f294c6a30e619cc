#!/bin/sh
# test_encode_decode.sh - encode and decode end to end, on tiny freshly
# initialised models (built here with tokenize learn and $BUILD/tools/mkmodel):
# the .npy stream as numpy reads it, one output line per input line in order,
# determinism across runs, thread counts and batchings, greedy/beam/n-best/
# sampling options and their promises (prefix, min/max length, n-gram
# blocking), bad inputs (ids outside the vocabulary, a stream of the wrong
# width, a truncated stream, a cut or corrupt model), cropping of over-long
# inputs, and answers in an interactive pipe before the input ends.
. "$ROOT/tests/cli/lib.sh"

ENC="$BIN/encode" DEC="$BIN/decode" TOK="$BIN/tokenize" MK="$BUILD/tools/mkmodel"
TMO=60
for p in "$ENC" "$DEC" "$TOK" "$MK"; do
    [ -x "$p" ] || { fail "$p is not built"; exit 0; }
done
PY=$(python_numpy)

# ---- set-up: a vocabulary, tiny models, source id lines ------------------------

"$TOK" learn --vocab-size 2000 --soft-vocab-limit -q "$ROOT/tests/data/corpus-small.txt" -o v.vocab ||
    { fail "tokenize learn"; exit 0; }
V=$(wc -l <v.vocab | tr -d ' ')
"$MK" --preset tiny --vocab v.vocab --seed 1 -o m.st || { fail "mkmodel tiny"; exit 0; }
head -40 "$ROOT/tests/data/corpus-small.txt" | "$TOK" -m m.st >src.ids
nsrc=$(wc -l <src.ids | tr -d ' ')

# count_lines FILE: lines of FILE.
count_lines() { wc -l <"$1" | tr -d ' '; }

# ---- encode --------------------------------------------------------------------

expect_status 0 "encode src.ids exits 0" timeout $TMO "$ENC" -m m.st src.ids
cp out.txt src.npy
if [ -n "$PY" ]; then
    # Every record as numpy reads it: (ids + 1 for </s>, 64), float32, finite.
    check "encode: numpy reads $nsrc records of shape (ids+1, d_model), float32" "$PY" -c '
import sys, numpy as np
lens = [len(l.split()) for l in open("src.ids")]
f = open("src.npy", "rb"); n = 0
for want in lens:
    a = np.load(f)
    assert a.dtype == np.float32 and a.shape == (want + 1, 64), (n, a.dtype, a.shape, want)
    assert np.isfinite(a).all()
    n += 1
assert f.read() == b"", "bytes after the last record"
'
    timeout $TMO "$ENC" -m m.st --no-eos src.ids >noeos.npy
    check "encode --no-eos: records of shape (ids, d_model)" "$PY" -c '
import numpy as np
f = open("noeos.npy", "rb")
for l in open("src.ids"):
    assert np.load(f).shape == (len(l.split()), 64)
'
else
    skip "numpy not available: record shapes not checked"
fi
timeout $TMO "$ENC" -m m.st src.ids >src2.npy
check "encode: the same input gives the same bytes" cmp -s src.npy src2.npy
timeout $TMO "$ENC" -m m.st --threads 2 --batch-tokens 100000 src.ids >src3.npy
timeout $TMO "$ENC" -m m.st --threads 2 --batch-tokens 100000 src.ids >src4.npy
check "encode --threads 2: the same input gives the same bytes" cmp -s src3.npy src4.npy
if timeout $TMO "$ENC" -v -m m.st src.ids 2>&1 >/dev/null | grep -q 'matrix kernel: AVX'; then
    timeout $TMO "$ENC" -m m.st --batch-size 1 src.ids >bs1.npy
    check "encode, packed kernel: batches of 1 and any other batches give the same bytes" \
        sh -c 'cmp -s src.npy bs1.npy && cmp -s src.npy src3.npy'
else
    skip "no packed kernel on this CPU: batches are compared within a tolerance only (below)"
fi
# OpenBLAS's products (TFM_ISA=none, the kernel of CPUs without AVX2) round
# differently for different batch shapes: the same within float32's reach.
TFM_ISA=none timeout $TMO "$ENC" -m m.st src.ids >blas.npy
TFM_ISA=none timeout $TMO "$ENC" -m m.st --batch-size 1 src.ids >blas1.npy
if [ -n "$PY" ]; then
    check "encode, OpenBLAS (TFM_ISA=none): batches of 1 equal one batch within 1e-5" "$PY" -c '
import numpy as np
a, b = open("blas.npy", "rb"), open("blas1.npy", "rb")
n = 0
for l in open("src.ids"):
    x, y = np.load(a), np.load(b)
    assert x.shape == y.shape and np.abs(x - y).max() <= 1e-5 * max(1.0, np.abs(x).max()), n
    n += 1
assert n > 1 and a.read() == b"" and b.read() == b""
'
else
    check "encode, OpenBLAS (TFM_ISA=none): batches of 1 give as many bytes as one batch" \
        test "$(wc -c <blas.npy)" -eq "$(wc -c <blas1.npy)"
fi
if command -v script >/dev/null 2>&1; then
    script -qec "$ENC -m m.st </dev/null" /dev/null >tty.txt 2>&1
    check "encode refuses to write to a terminal" \
        grep -q "refusing to write binary tensors to a terminal; redirect or pipe" tty.txt
else
    skip "no script(1): the terminal check is not run"
fi

# ---- decode: the basic contract ----------------------------------------------------

# run_dec OUT OPTION...: decodes src.npy into OUT.
run_dec() { out=$1; shift; timeout $TMO "$DEC" -m m.st "$@" src.npy >"$out" 2>dec.err; }

run_dec beam.txt --max-length 20
check "decode: one line per record ($nsrc)" test "$(count_lines beam.txt)" -eq "$nsrc"
check "decode: ids inside the vocabulary, never <pad>, <s> or </s>" \
    awk -v V="$V" '{ for (i = 1; i <= NF; i++) if ($i !~ /^[0-9]+$/ || $i >= V || $i == 0 || $i == 2 || $i == 3) exit 1 }' beam.txt
run_dec beam2.txt --max-length 20
check "decode: the same input gives the same output" cmp -s beam.txt beam2.txt
run_dec t1.txt --max-length 20 --threads 1
run_dec t2.txt --max-length 20 --threads 2
check "decode: --threads 1 and --threads 2 give the same output" cmp -s t1.txt t2.txt
run_dec b1.txt --max-length 20 --batch-size 1 --threads 2
check "decode: --batch-size 1 gives the same output as batches of 64" cmp -s beam.txt b1.txt
TFM_ISA=avx2 timeout $TMO "$DEC" -m m.st --max-length 20 --scores src.npy >avx2.txt 2>avx2.err
run_dec best.txt --max-length 20 --scores
check "decode: TFM_ISA=avx2 gives the same ids and scores as the best kernel" cmp -s avx2.txt best.txt
TFM_ISA=none timeout $TMO "$DEC" -m m.st --max-length 20 src.npy >none.txt 2>dec.err
check "decode: TFM_ISA=none (OpenBLAS) decodes every record" test "$(count_lines none.txt)" -eq "$nsrc"
check "decode: TFM_ISA=none and avx2 are known: no warning" \
    sh -c "! grep -q TFM_ISA dec.err avx2.err"
# A value the kernel choice does not know (upper case, say) is ignored, as
# if unset, and said once; -q silences it.
TFM_ISA=AVX2 timeout $TMO "$DEC" -m m.st --max-length 20 --scores src.npy >upper.txt 2>dec.err
check "decode: TFM_ISA=AVX2 (unknown) decodes as with the best kernel" cmp -s upper.txt best.txt
check "decode: TFM_ISA=AVX2 (unknown) is said once, with the values known" \
    sh -c "[ \$(grep -c '^decode: warning: TFM_ISA=AVX2 is not one of avx512bw, avx2 and none' dec.err) -eq 1 ]"
TFM_ISA=AVX2 timeout $TMO "$ENC" -m m.st src.ids 2>enc.err >/dev/null
check "encode: TFM_ISA=AVX2 (unknown) is said" grep -q '^encode: warning: TFM_ISA=AVX2 is not one of' enc.err
TFM_ISA=AVX2 timeout $TMO "$DEC" -q -m m.st --max-length 20 src.npy >/dev/null 2>dec.err
check "decode -q: TFM_ISA=AVX2 (unknown) is not said" test ! -s dec.err

# Each sentence alone through encode | decode against all at once.
head -8 src.ids >eight.ids
timeout $TMO "$ENC" -m m.st eight.ids | timeout $TMO "$DEC" -m m.st --max-length 20 >together.txt
: >alone.txt
while IFS= read -r line; do
    echo "$line" | timeout $TMO "$ENC" -m m.st | timeout $TMO "$DEC" -m m.st --max-length 20 >>alone.txt
done <eight.ids
check "a sentence alone decodes as inside a batch" cmp -s together.txt alone.txt

run_dec greedy.txt --max-length 20 --greedy
run_dec beam1.txt --max-length 20 --beam 1
check "decode --greedy equals --beam 1" cmp -s greedy.txt beam1.txt
check "greedy and beam 4 differ somewhere (a random model)" test "$(cat greedy.txt)" != "$(cat beam.txt)"
run_dec greedy_s.txt --max-length 20 --greedy --scores
run_dec beam_s.txt --max-length 20 --scores
check "decode --scores: ids, a TAB and a number on each line" \
    awk -F'\t' 'NF != 2 || $2 !~ /^-?[0-9]+\.[0-9]+$/ { exit 1 }' beam_s.txt
cut -f1 beam_s.txt >beam_s_ids.txt
check "decode --scores: the ids are the plain output's" cmp -s beam_s_ids.txt beam.txt
check "beam 4's best score is never below greedy's" \
    awk -F'\t' 'NR == FNR { g[FNR] = $2; next } $2 + 1e-4 < g[FNR] { exit 1 }' greedy_s.txt beam_s.txt

# n-best in Marian's form: index ||| ids ||| F0= log-prob ||| score.
run_dec nbest.txt --max-length 20 --nbest 3
check "decode --nbest 3: 3 lines per record" test "$(count_lines nbest.txt)" -eq $((3 * nsrc))
check "decode --nbest 3: Marian's form, indexes in order, scores sorted" awk -F' [|][|][|] ' '
    NF != 4 || $1 !~ /^[0-9]+$/ || $2 !~ /^[0-9 ]*$/ || $3 !~ /^F0= -?[0-9.]+$/ || $4 !~ /^-?[0-9.]+$/ { exit 1 }
    { want = int((NR - 1) / 3); if ($1 != want) exit 1
      if ((NR - 1) % 3 && $4 > prev + 1e-6) exit 1; prev = $4 }' nbest.txt
awk -F' [|][|][|] ' '(NR - 1) % 3 == 0 { print $2 }' nbest.txt >nbest1.txt
check "decode --nbest 3: the first hypothesis is the 1-best output" cmp -s nbest1.txt beam.txt
expect_status 2 "decode --nbest 5 --beam 2 is a usage error" "$DEC" -m m.st --nbest 5 --beam 2 src.npy

# ---- sampling ------------------------------------------------------------------------

run_dec s5a.txt --max-length 15 --sample --seed 5
run_dec s5b.txt --max-length 15 --sample --seed 5 --threads 1 --batch-size 3
run_dec s6.txt --max-length 15 --sample --seed 6
check "sampling: the same seed gives the same samples (any batching, threads)" cmp -s s5a.txt s5b.txt
check "sampling: another seed gives other samples" test "$(cat s5a.txt)" != "$(cat s6.txt)"
run_dec topk1.txt --max-length 15 --sample-topk 1 --seed 9
run_dec greedy15.txt --max-length 15 --greedy
check "sampling --sample-topk 1 is greedy search" cmp -s topk1.txt greedy15.txt
run_dec s3.txt --max-length 15 --sample --nbest 3 --seed 5
check "sampling --nbest 3: 3 samples per record" test "$(count_lines s3.txt)" -eq $((3 * nsrc))

# ---- length, prefix and n-gram rules ---------------------------------------------------

run_dec max7.txt --max-length 7 --greedy
check "--max-length 7: no line longer than 7 ids" awk 'NF > 7 { exit 1 }' max7.txt
check "--max-length 7: a random model fills it" awk 'NF == 7 { n++ } END { exit !(n > 0) }' max7.txt
run_dec off3.txt --max-length-offset 3 --greedy
check "--max-length-offset 3: no line longer than the source (with </s>) + 3" \
    awk 'NR == FNR { n[FNR] = NF + 1; next } FNR in n && NF > n[FNR] + 3 { exit 1 }' src.ids off3.txt
run_dec default.txt --greedy
check "default max length: source (with </s>) + 50" \
    awk 'NR == FNR { n[FNR] = NF + 1; next } NF > n[FNR] + 50 { exit 1 }' src.ids default.txt

run_dec rep.txt --max-length 20 --greedy
run_dec norep.txt --max-length 20 --greedy --no-repeat-ngram 2
has_repeat='{ delete seen; for (i = 1; i < NF; i++) { k = $i " " $(i + 1); if (k in seen) r = 1; seen[k] = 1 } } END { exit !r }'
check "without --no-repeat-ngram a random model repeats bigrams" awk "$has_repeat" rep.txt
check "--no-repeat-ngram 2: no bigram twice in a line" sh -c "! awk '$has_repeat' norep.txt"

# A prefix on odd lines, none on even lines.
awk 'NR % 2 { print "5 6 7"; next } { print "" }' src.ids >prefix.txt
run_dec pre.txt --max-length 20 --greedy --prefix prefix.txt
check "--prefix: odd lines begin with the prefix" awk 'NR % 2 && !/^5 6 7( |$)/ { exit 1 }' pre.txt
awk 'NR % 2 == 0' pre.txt >pre_even.txt
awk 'NR % 2 == 0' greedy.txt >greedy_even.txt
check "--prefix: an empty prefix line forces nothing" cmp -s pre_even.txt greedy_even.txt
head -3 prefix.txt >short_prefix.txt
expect_status 1 "--prefix with fewer lines than records: exit 1" "$DEC" -m m.st --prefix short_prefix.txt src.npy
expect_stderr "^decode: short_prefix.txt: has 3 lines" "--prefix too short: the message names the prefix file"
printf '5 3 7\n' >eos_prefix.txt
expect_status 1 "--prefix holding </s>: exit 1" "$DEC" -m m.st --prefix eos_prefix.txt src.npy
expect_stderr "^decode: eos_prefix.txt:1: .*</s>" "--prefix holding </s>: the message names the line"

# --min-length: a model with a 300-piece vocabulary, sampled at a high
# temperature, ends some sentences early by itself (</s> is 1 in ~300).
"$TOK" learn --vocab-size 300 --soft-vocab-limit -q "$ROOT/tests/data/corpus-small.txt" -o v300.vocab 2>/dev/null
"$MK" --preset tiny --vocab v300.vocab --seed 2 -o m300.st
awk '{ print "5 6 7" }' src.ids | "$ENC" -m m300.st >short.npy
"$DEC" -m m300.st --sample --temperature 50 --max-length 40 --nbest 4 --seed 1 short.npy >free.txt
"$DEC" -m m300.st --sample --temperature 50 --max-length 40 --nbest 4 --seed 1 --min-length 20 short.npy >min20.txt
check "without --min-length some samples end before 20 ids" \
    awk -F' [|][|][|] ' '{ if (split($2, a, " ") < 20) n++ } END { exit !(n > 0) }' free.txt
check "--min-length 20: no sample ends before 20 ids" \
    awk -F' [|][|][|] ' '{ if (split($2, a, " ") < 20) exit 1 }' min20.txt

# ---- empty lines and over-long inputs ----------------------------------------------------

printf '5 6 7\n\n8 9\n' >empty.ids
"$ENC" -m m.st empty.ids >empty.npy
if [ -n "$PY" ]; then
    check "an empty line gives a (0, d_model) record" "$PY" -c '
import numpy as np
f = open("empty.npy", "rb")
assert [np.load(f).shape for _ in range(3)] == [(4, 64), (0, 64), (3, 64)]
'
fi
"$DEC" -m m.st --max-length 5 empty.npy >empty.txt 2>empty.err
check "an empty record gives an output line (3 lines for 3)" test "$(count_lines empty.txt)" -eq 3
# An empty line gives an empty line in every search: the model is never asked
# to invent a sentence from no source (issue 13).
printf '5\n9 10\n7\n' >empty_prefix.txt
for mode in "--greedy" "--beam 4" "--sample-topk 5 --seed 3" "--greedy --prefix empty_prefix.txt" \
    "--beam 4 --prefix empty_prefix.txt" "--beam 4 --scores"; do
    # shellcheck disable=SC2086 # mode is a list of options
    "$DEC" -m m.st --max-length 5 $mode empty.npy >empty_mode.txt
    check "decode $mode: the empty record's line is empty" \
        awk 'NR == 2 && $0 != "" && $0 !~ /^\t/ { exit 1 } END { exit NR != 3 }' \
        empty_mode.txt
done
for mode in "--beam 4 --nbest 3" "--sample-topk 5 --nbest 3 --seed 3"; do
    # shellcheck disable=SC2086
    "$DEC" -m m.st --max-length 5 $mode empty.npy >empty_nbest.txt
    check "decode $mode: the empty record's hypotheses are empty" \
        awk -F' [|][|][|] ' '$1 == 1 && $2 != "" { exit 1 }
            { seen[$1] = 1 } END { exit !(seen[0] && seen[1] && seen[2]) }' empty_nbest.txt
done

"$MK" --preset tiny --vocab v.vocab --max-positions 16 -o short_pos.st
awk 'BEGIN { print "5 6"; for (i = 0; i < 30; i++) printf "%d ", 10 + i; print ""; print "7" }' >long.ids
expect_status 0 "encode: a line longer than max_positions is cropped, exit 0" "$ENC" -m short_pos.st long.ids
cp out.txt long.npy
expect_stderr "^encode: long.ids:2: warning: .*cropped" "encode: the crop warning names the line"
if [ -n "$PY" ]; then
    check "encode: the cropped record has max_positions rows, none dropped" "$PY" -c '
import numpy as np
f = open("long.npy", "rb")
assert [np.load(f).shape for _ in range(3)] == [(3, 64), (16, 64), (2, 64)]
'
fi
expect_status 0 "encode --max-input-length 4: exit 0" "$ENC" -m m.st --max-input-length 4 long.ids
expect_stderr "^encode: long.ids:2: warning: " "encode --max-input-length 4: a warning naming the line"
expect_status 0 "decode --max-input-length 3 crops, exit 0" "$DEC" -m m.st --max-input-length 3 --max-length 4 long.npy
expect_stderr "^decode: long.npy: warning: record 2: .*cropped" "decode: the crop warning names the record"
check "decode --max-input-length: one line per record" test "$(count_lines out.txt)" -eq 3

# ---- bad input -------------------------------------------------------------------------------

printf '5 6\n7 8\n9 %d 10\n11\n' "$V" >oov.ids
expect_status 1 "encode: an id outside the vocabulary: exit 1" "$ENC" -m m.st oov.ids
expect_stderr "^encode: oov.ids:3: .*outside the vocabulary" "encode: the message names FILE:LINE"
if [ -n "$PY" ]; then
    cp out.txt oov.npy
    check "encode: the records before the bad line are written" "$PY" -c '
import numpy as np
f = open("oov.npy", "rb"); np.load(f); np.load(f); assert f.read() == b""
'
fi
printf '5 6\nhello\n' >text.ids
expect_status 1 "encode: a line that is not ids: exit 1" "$ENC" -m m.st text.ids
expect_stderr "^encode: text.ids:2: .*hello" "encode: the message names the line and the token"

"$MK" --preset tiny --vocab v.vocab --d-model 32 -o narrow.st
"$ENC" -m narrow.st src.ids >narrow.npy
expect_status 1 "decode: states of the wrong width: exit 1" sh -c "\"$DEC\" -m m.st <narrow.npy"
expect_stderr "^decode: -: record 1: states have width 32, but the model's d_model is 64" \
    "decode: the width message names the record"

size=$(wc -c <src.npy | tr -d ' ')
head -c $((size - 100)) src.npy >cut.npy
expect_status 1 "decode: a truncated stream: exit 1" "$DEC" -m m.st --max-length 3 cut.npy
expect_stderr "^decode: cut.npy: record $nsrc: " "decode: the truncation message names the record"
check "decode: the records before the truncation are decoded" test "$(count_lines out.txt)" -eq $((nsrc - 1))
expect_status 1 "decode: a text file is no stream: exit 1" "$DEC" -m m.st src.ids
expect_stderr "^decode: src.ids: record 1: " "decode: the message names record 1"
if [ -n "$PY" ]; then
    "$PY" -c 'import numpy as np, sys; np.save(sys.stdout.buffer, np.zeros((3, 64), np.int32))' >int.npy
    expect_status 1 "decode: an int32 record: exit 1" "$DEC" -m m.st int.npy
    expect_stderr "^decode: int.npy: record 1: .*float32" "decode: the dtype message names the record"
fi

msize=$(wc -c <m.st | tr -d ' ')
head -c $((msize / 2)) m.st >cutmodel.st
for p in encode decode; do
    expect_status 1 "$p: a model file cut short: exit 1" "$BIN/$p" -m cutmodel.st </dev/null
    expect_stderr "^$p: .*cutmodel.st.*truncated" "$p: a cut model: a message naming the file"
done
cp m.st badhead.st
printf 'XXXXXXXXXXXXXXXX' | dd of=badhead.st bs=1 seek=10 conv=notrunc 2>/dev/null
for p in encode decode; do
    expect_status 1 "$p: a model with a corrupt header: exit 1" "$BIN/$p" -m badhead.st </dev/null
    expect_stderr "^$p: .*badhead.st" "$p: a corrupt header: a message naming the file"
done
expect_status 1 "encode: a missing model: exit 1" "$ENC" -m nothere.st </dev/null
expect_stderr "^encode: .*nothere.st.*No such file" "encode: a missing model is named"
expect_status 2 "decode without -m: usage error" "$DEC" </dev/null
expect_status 2 "decode --beam 0: usage error" "$DEC" -m m.st --beam 0 </dev/null

# ---- streams: several files, '-', pipes -------------------------------------------------------

head -3 src.ids >a.ids
tail -n +4 src.ids >b.ids
# (The states may differ in the last bits from those of one batch, so the
# decoded ids are compared.)
"$ENC" -m m.st a.ids - <b.ids | "$DEC" -m m.st --max-length 20 >ab.txt
check "encode a.ids - <b.ids is encode of both in order" cmp -s ab.txt beam.txt

awk '{ for (i = 0; i < 50; i++) print }' src.ids >big.ids
{ "$ENC" -m m.st big.ids 2>pipe_enc.err | "$DEC" -m m.st --greedy --max-length 5 2>pipe_dec.err; } | head -n 1 >/dev/null
check "encode | decode | head -1: both end quietly" sh -c '! test -s pipe_enc.err && ! test -s pipe_dec.err'

# Interactive: a line written into encode | decode is answered before the
# input ends.
rm -f fifo
: >inter.out
mkfifo fifo
( timeout 30 "$ENC" -m m.st <fifo | timeout 30 "$DEC" -m m.st --max-length 5 >inter.out ) &
exec 3>fifo
echo "5 6 7" >&3
i=0
while [ $i -lt 100 ] && [ "$(count_lines inter.out)" -lt 1 ]; do
    sleep 0.1; i=$((i + 1))
done
check "interactive: a line is answered while the input is still open" test "$(count_lines inter.out)" -eq 1
echo "8 9" >&3
exec 3>&-
wait
check "interactive: the second line after it, then a clean end" test "$(count_lines inter.out)" -eq 2

# Run after run, at two threads, with products of a real model's size: the
# two workers call the BLAS at once, and a BLAS that is not safe for that
# (Debian's serial OpenBLAS, tried on 2026-11-29) gives states that change
# from run to run; the tiny model's products above were too small to show
# it.  A small-preset model (d_model 256), 300 lines: with the serial
# OpenBLAS, 3 runs gave 3 different files (at 100 lines, the same one).
# Not under the sanitizers: their builds always link the shared threaded
# library, and took 5 s more for it.
case "$BUILD" in *asan*) skip "the small-preset determinism check: not under the sanitizers"; exit 0 ;; esac
lines=300
"$MK" --preset small --vocab v.vocab --seed 3 -o small.st || { fail "mkmodel small"; exit 0; }
head -n "$lines" "$ROOT/tests/data/corpus-small.txt" | "$TOK" -m small.st >small.ids
for run in 1 2 3; do
    timeout $TMO "$ENC" -m small.st --threads 2 --batch-size 16 small.ids >small$run.npy
done
check "encode --threads 2, a small-preset model: the same states, run after run" \
    sh -c 'cmp -s small1.npy small2.npy && cmp -s small1.npy small3.npy'
for run in 1 2; do
    timeout $TMO "$DEC" -m small.st --threads 2 --batch-size 8 --greedy --max-length 6 small1.npy \
        >small$run.out
done
check "decode --threads 2, a small-preset model: the same output, run after run" cmp -s small1.out small2.out
