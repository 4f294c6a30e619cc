#!/bin/sh
# test_hostile.sh - every program under hostile input: random bytes,
# truncated and bit-flipped models, vocabularies and checkpoints, a 1 GB
# sparse file, a FIFO, a folder, an unreadable file (EIO), NUL bytes, CRLF, a
# 100 MB line, endless input, a full disk and a file-size limit, and a reader
# that goes away at every stage of the pipeline.
#
# Each case must end with the exit status documented for it (0, 1 or 2),
# with a message naming the file (and line or record) when it fails, with no
# sanitizer report, within its time limit, and (in the optimised build, where
# /usr/bin/time is there) under a stated peak memory: 300 MB for everything
# here (a tiny model), 100 MB where the input is huge and must not be held.
# Files already written are never lost or left half-written.
. "$ROOT/tests/cli/lib.sh"

TOK="$BIN/tokenize" ENC="$BIN/encode" DEC="$BIN/decode" TRAIN="$BIN/train"
SCORE="$BIN/score" IA="$BIN/inspect-attn" MK="$BUILD/tools/mkmodel"
for p in "$TOK" "$ENC" "$DEC" "$TRAIN" "$SCORE" "$IA" "$MK"; do
    [ -x "$p" ] || { fail "$p is not built"; exit 0; }
done
TMO=60
# Peak memory is measured in the optimised build only: ASan's shadow memory
# and quarantine are not the program's.
measure_rss=no
case "$BUILD" in *asan*) ;; *) [ -x /usr/bin/time ] && measure_rss=yes ;; esac
if [ "$measure_rss" = no ]; then skip "peak memory is not measured in this build (ASan, or no /usr/bin/time)"; fi

# hostile NAME STATUSES MSG MAX_MB COMMAND: runs the shell COMMAND (stdout to
# h.out, stderr to h.err) and checks its exit status is one of STATUSES
# ("0", "1", "0 1", ...), that a non-zero exit says MSG (an extended regular
# expression) on stderr, that no sanitizer spoke, and that the peak memory
# stayed under MAX_MB megabytes.
hostile() {
    name=$1 statuses=$2 msg=$3 max_mb=$4 cmd=$5
    if [ "$measure_rss" = yes ]; then
        timeout $TMO /usr/bin/time -f '%M' -o rss.txt sh -c "$cmd" >h.out 2>h.err
    else
        timeout $TMO sh -c "$cmd" >h.out 2>h.err
    fi
    rc=$?
    # /usr/bin/time notes a non-zero exit on its output file, not ours
    rss_kb=$( [ "$measure_rss" = yes ] && tail -n 1 rss.txt 2>/dev/null)
    problem=""
    case " $statuses " in *" $rc "*) ;; *) problem="exit $rc (expected $statuses)" ;; esac
    if [ -z "$problem" ] && [ "$rc" -ne 0 ] && ! grep -qE -- "$msg" h.err; then
        problem="stderr lacks /$msg/"
    fi
    if [ -z "$problem" ] && grep -qE 'Sanitizer|runtime error' h.err; then problem="a sanitizer report"; fi
    if [ -z "$problem" ] && [ -n "$rss_kb" ] && [ "$rss_kb" -gt $((max_mb * 1024)) ]; then
        problem="peak memory $((rss_kb / 1024)) MB, more than $max_mb MB"
    fi
    if [ -z "$problem" ]; then
        pass "$name: exit $rc${rss_kb:+, peak $((rss_kb / 1024)) MB}"
    else
        fail "$name: $problem"
        sed 's/^/    stderr: /' h.err | head -5
    fi
}

# ---- set-up: a vocabulary, a tiny model, ids, states, a checkpoint -----------------------

head -400 "$ROOT/tests/data/corpus-small.txt" >text.txt
"$TOK" learn -q --vocab-size 500 --soft-vocab-limit text.txt -o v.vocab || { fail "tokenize learn"; exit 0; }
"$MK" --preset tiny --vocab v.vocab --seed 1 -o m.st || { fail "mkmodel"; exit 0; }
"$TOK" -m v.vocab text.txt >text.ids
head -20 text.ids >few.ids
"$ENC" -m m.st few.ids >few.npy
"$TRAIN" --preset tiny -m v.vocab --src text.ids --tgt text.ids --batch-tokens 512 --threads 1 \
    --max-steps 2 --save-every 2 -q -o t.st || { fail "train: the checkpoint for the tests"; exit 0; }
[ -s t.st.ckpt-2 ] || { fail "train: no checkpoint t.st.ckpt-2"; exit 0; }

# bytes N SEED: N pseudo-random bytes, the same for the same seed
bytes() { perl -e 'srand($ARGV[1]); print map { chr(int(rand(256))) } 1 .. $ARGV[0]' "$1" "$2"; }
# flip FILE OFFSET OUT: FILE with one bit of the byte at OFFSET flipped
flip() {
    perl -e 'open(F, "<", $ARGV[0]) or die; binmode F; local $/; my $d = <F>;
             substr($d, $ARGV[1], 1) ^= chr(16); binmode STDOUT; print $d' "$1" "$2" >"$3"
}
# header_len FILE: the safetensors header length
header_len() { od -An -tu8 -N8 "$1" | tr -d ' '; }

# The programs that load a model, each as a command taking the model as $M.
model_users() {
    echo "encode|\"$ENC\" -m \"\$M\" few.ids"
    echo "decode|\"$DEC\" -m \"\$M\" --greedy --max-length 5 few.npy"
    echo "tokenize|\"$TOK\" -m \"\$M\" text.txt"
    echo "inspect-attn|\"$IA\" -m \"\$M\" -f align few.ids"
    echo "score|\"$SCORE\" -m \"\$M\" --src few.ids --tgt few.ids"
}
# each_model_user CASE STATUSES MSG MAX_MB MODEL: one case per program
each_model_user() {
    model_users | while IFS='|' read -r prog cmd; do
        hostile "$prog -m $5: $1" "$2" "$3" "$4" "M='$5'; $cmd"
    done
}

# ---- model files ---------------------------------------------------------------------------

bytes 4096 7 >random.st
each_model_user "random bytes" 1 "random\.st:" 300 random.st
size=$(wc -c <m.st)
head -c $((size / 2)) m.st >half.st
each_model_user "cut in half" 1 "half\.st: .*truncated" 300 half.st
head -c 100 m.st >head100.st
each_model_user "cut inside the header" 1 "head100\.st: " 300 head100.st
truncate -s 1G sparse.st
each_model_user "a 1 GB sparse file" 1 "sparse\.st: " 100 sparse.st
mkdir -p folder.st
each_model_user "a folder" 1 "folder\.st: .*(Is a directory|directory)" 300 folder.st
rm -f fifo.st; mkfifo fifo.st
hostile "encode -m FIFO: a model through a pipe loads" 0 "" 300 \
    "cat m.st >fifo.st & \"$ENC\" -m fifo.st few.ids"
hostile "tokenize -m FIFO: a vocabulary through a pipe loads" 0 "" 300 \
    "cat v.vocab >fifo.st & \"$TOK\" -m fifo.st text.txt"
if [ "$(id -u)" -ne 0 ]; then
    cp m.st locked.st; chmod 000 locked.st
    each_model_user "an unreadable file" 1 "locked\.st: Permission denied" 300 locked.st
else
    skip "a file without read permission: running as root, permissions do not apply (next: a file even root cannot read)"
fi
# A file even root cannot read: /proc/self/mem at offset 0 fails with EIO.
each_model_user "a file that cannot be read (EIO)" 1 "/proc/self/mem: .*Input/output error" 300 /proc/self/mem
hostile "tokenize: input that cannot be read (EIO)" 1 "/proc/self/mem:1: .*Input/output error" 300 \
    "\"$TOK\" -m v.vocab /proc/self/mem"
# Bit flips: in the header a clear error or, where the flip still makes
# sense (a digit of a number), a model that loads; in the weights nothing
# can tell (exit 0).  Never a crash.
hlen=$(header_len m.st)
for off in 0 3 7 8 20 $((hlen / 3)) $((hlen / 2)) $((hlen - 2)) $((hlen + 7)) $((hlen + 8 + 1000)) $((size - 1)); do
    flip m.st "$off" flip.st
    hostile "encode -m (a bit flipped at byte $off)" "0 1" "flip\.st: " 300 \
        "\"$ENC\" -m flip.st few.ids"
done
# A long vocabulary (64 KB or more of the header) is read only by the
# programs that use it: with a byte in it that is not UTF-8, tokenize names
# that byte of the header, and encode and decode, which never read it,
# translate as with the sound file.
perl -e 'srand(7); for (1 .. 20000) { print join(" ", map { join("", map { chr(97 + int(rand(26))) }
         1 .. 3 + int(rand(6))) } 1 .. 8), "\n" }' >words.txt
"$TOK" learn -q --vocab-size 5000 words.txt -o words.vocab &&
    "$MK" --preset tiny --vocab words.vocab --seed 1 -o words.st || { fail "a model of 5,000 pieces"; exit 0; }
at=$(perl -e 'open(F, "<", $ARGV[0]) or die; binmode F; local $/; my $d = <F>;
              print index($d, "\"vocab\":\"") + 30000' words.st)
perl -e 'open(F, "<", $ARGV[0]) or die; binmode F; local $/; my $d = <F>;
         substr($d, $ARGV[1], 1) = chr(255); binmode STDOUT; print $d' words.st "$at" >badvocab.st
head -50 words.txt | "$TOK" -m words.st >words.ids
"$ENC" -m words.st words.ids | "$DEC" -m words.st --greedy --max-length 5 >words.out
hostile "tokenize -m (its long vocabulary not UTF-8)" 1 \
    "badvocab\.st: the vocabulary in its metadata: header is not valid UTF-8: bad byte 0xff at byte $((at - 8)) of the header" \
    300 "\"$TOK\" -m badvocab.st words.txt"
hostile "encode | decode -m (the same file)" 0 "" 300 \
    "\"$ENC\" -m badvocab.st words.ids | \"$DEC\" -m badvocab.st --greedy --max-length 5 >bad.out"
check "  ... the same output as with the sound file" cmp -s words.out bad.out

# ---- vocabularies and checkpoints ----------------------------------------------------------

vsize=$(wc -c <v.vocab)
head -c $((vsize / 2)) v.vocab >cut.vocab
hostile "tokenize -m a vocabulary cut in half" 1 "cut\.vocab:[0-9]+: " 300 "\"$TOK\" -m cut.vocab text.txt"
for off in 0 5 40 $((vsize / 2)) $((vsize - 2)); do
    flip v.vocab "$off" flip.vocab
    hostile "tokenize -m (a vocabulary, a bit flipped at byte $off)" "0 1" "flip\.vocab:" 300 \
        "\"$TOK\" -m flip.vocab text.txt"
done
bytes 3000 11 >random.vocab
hostile "tokenize -m random bytes as a vocabulary" 1 "random\.vocab:1: " 300 "\"$TOK\" -m random.vocab text.txt"
csize=$(wc -c <t.st.ckpt-2)
head -c $((csize / 2)) t.st.ckpt-2 >cut.ckpt
hostile "train --resume a checkpoint cut in half" 1 "cut\.ckpt" 300 \
    "\"$TRAIN\" --resume=cut.ckpt --max-steps 3 -q -o resumed.st"
chlen=$(header_len t.st.ckpt-2)
for off in 9 $((chlen / 2)) $((chlen - 3)); do
    flip t.st.ckpt-2 "$off" flip.ckpt
    hostile "train --resume (a checkpoint, a bit flipped at byte $off)" "0 1" "flip\.ckpt" 300 \
        "\"$TRAIN\" --resume=flip.ckpt --max-steps 3 -q -o resumed.st"
done
hostile "train --resume=/dev/zero" 1 "/dev/zero: " 300 "\"$TRAIN\" --resume=/dev/zero -q -o resumed.st"

# ---- input lines and records ------------------------------------------------------------------

printf 'one\000two\nthree\r\n\nfour\n' >nul_crlf.txt
hostile "tokenize: NUL bytes and CRLF are data, one line out per line in" 0 "" 300 \
    "\"$TOK\" -m v.vocab nul_crlf.txt"
check "  ... and 4 lines out for 4 in" test "$(wc -l <h.out)" -eq 4
printf '5 6\000 7\n8 9\n' >nul.ids
hostile "encode: a NUL byte in an id line" 1 "nul\.ids:1: " 300 "\"$ENC\" -m m.st nul.ids"
printf '5 6\r\n8 9\r\n' >crlf.ids
hostile "encode: CRLF id lines" "0 1" "crlf\.ids:1: " 300 "\"$ENC\" -m m.st crlf.ids"
# 100 MB in one line: an error naming it, without holding it.
hostile "tokenize: a 100 MB line" 1 "big\.txt:2: .*longer than" 100 \
    "{ echo first; head -c 100000000 /dev/zero | tr '\\000' a; echo; echo last; } >big.txt; \"$TOK\" -m v.vocab big.txt"
check "  ... the line before it was written" sh -c "head -n 1 h.out | grep -q ."
rm -f big.txt
hostile "tokenize </dev/zero: endless input without a newline" 1 "standard input:1: .*longer than|-:1: .*longer than" 100 \
    "\"$TOK\" -m v.vocab </dev/zero"
hostile "encode </dev/zero" 1 ":1: " 100 "\"$ENC\" -m m.st </dev/zero"
bytes 5000 13 >random.npy
hostile "decode: random bytes as states" 1 "random\.npy: .*record 1" 300 "\"$DEC\" -m m.st random.npy"
hostile "decode </dev/zero" 1 "record 1" 100 "\"$DEC\" -m m.st </dev/zero"
npy=$(wc -c <few.npy)
head -c $((npy - 10)) few.npy >cut.npy
hostile "decode: states cut short" 1 "cut\.npy: .*record 20: truncated" 300 \
    "\"$DEC\" -m m.st --greedy --max-length 5 cut.npy"
check "  ... the 19 records before it were translated" test "$(wc -l <h.out)" -eq 19
bytes 3000 17 >random.txt
hostile "score bleu: random bytes as hypotheses" "0 1" "random\.txt:[0-9]+: " 300 \
    "\"$SCORE\" bleu -r random.txt random.txt"
# Read as text (they are not id lines), random bytes become sources of
# hundreds of tokens (one per byte or more), translated to as many: line 4,
# of 1,732 tokens, is cut to 1,023.  Lines 1 and 4 (378 and 1,023 tokens)
# make the same paths as all 8 of random.txt, which took 10 s of the
# sanitizer build's run: the attention of every layer and head, whose work
# grows with the square of the length, is what takes the time and memory.
sed -n '1p;4p' random.txt >random2.txt
hostile "inspect-attn: random bytes as sources: read as text, the bytes repaired" 0 "" 600 \
    "\"$IA\" -m m.st random2.txt"
check "  ... with a warning naming the file and line" grep -q 'random2\.txt:1: warning: invalid UTF-8' h.err
check "  ... and one for the line cropped to what the model takes" \
    grep -q 'random2\.txt:2: warning: 1732 tokens are more than the model takes; cropped to the first 1023' h.err

# ---- a full disk, a file-size limit --------------------------------------------------------

hostile "tokenize >/dev/full" 1 "(write error|write failed): No space left" 300 "\"$TOK\" -m v.vocab text.txt >/dev/full"
hostile "encode >/dev/full" 1 "(write error|write failed): No space left" 300 "\"$ENC\" -m m.st few.ids >/dev/full"
hostile "decode >/dev/full" 1 "(write error|write failed): No space left" 300 "\"$DEC\" -m m.st --greedy --max-length 5 few.npy >/dev/full"
hostile "score >/dev/full" 1 "(write error|write failed): No space left" 300 "\"$SCORE\" bleu -r text.txt text.txt >/dev/full"
hostile "inspect-attn >/dev/full" 1 "(write error|write failed): No space left" 300 "\"$IA\" -m m.st -f align few.ids >/dev/full"
hostile "encode with a 4 kB file-size limit (ulimit -f 4)" 1 "(write error|write failed): File too large" 300 \
    "ulimit -f 4; \"$ENC\" -m m.st few.ids >limited.npy"
# A model written over an existing one with too little room: the old one stays.
cp m.st keep.st
hostile "train -o over a model, with too little room (ulimit -f 64)" 1 "keep\.st: .*File too large" 300 \
    "ulimit -f 64; \"$TRAIN\" --preset tiny -m v.vocab --init-only -q -o keep.st"
check "  ... the model there before is intact" cmp -s m.st keep.st
check "  ... and no temporary file is left" sh -c '! ls keep.st.tmp* >/dev/null 2>&1'
cp t.st.ckpt-2 before.ckpt
hostile "train: the disk fills while a checkpoint is written (ulimit -f 64)" 1 \
    "t\.st\.ckpt-4.*File too large" 300 \
    "ulimit -f 64; \"$TRAIN\" --resume=t.st.ckpt-2 --max-steps 4 --save-every 2 -q -o t.st"
check "  ... the checkpoint before it is intact" cmp -s before.ckpt t.st.ckpt-2
check "  ... no half-written checkpoint is left" sh -c '! ls t.st.ckpt-4* >/dev/null 2>&1'
hostile "  ... and the run resumes from it with room" 0 "" 300 \
    "\"$TRAIN\" --resume=t.st.ckpt-2 --max-steps 3 --save-every 0 -q -o t3.st"

# ---- hostile training data: a message naming file and line, or a documented repair ----------

T1="--preset tiny -m v.vocab --batch-tokens 512 --threads 1 --max-steps 1 -q"
head -60 text.txt >d.txt
{ printf '\357\273\277'; cat d.txt; } >bom.txt
sed 's/$/\r/' d.txt >crlf.txt
"$TRAIN" $T1 --src d.txt --tgt d.txt -o clean.st 2>/dev/null
"$TRAIN" --preset tiny -m v.vocab --batch-tokens 512 --threads 1 --max-steps 1 --src bom.txt \
    --tgt crlf.txt -o bom.st 2>h.err
check "train: a byte order mark is dropped, and said" grep -q 'bom\.txt: the byte order mark at its start was dropped' h.err
check "train: CR LF line ends: the CRs are dropped, and said" grep -q 'crlf\.txt: 60 lines end in CR LF; the CRs were dropped' h.err
check "  ... so the model learns what it learns from the clean files" same_tensors clean.st bom.st
{ head -3 d.txt; head -c 50000000 /dev/zero | tr '\0' 'a'; echo; tail -3 d.txt; } >huge.txt
{ head -3 d.txt; echo x; tail -3 d.txt; } >huget.txt
hostile "train: a 50 MB line is skipped as too long, not held" 0 "" 100 \
    "\"$TRAIN\" $T1 --src huge.txt --tgt huget.txt -o huge.st"
"$TRAIN" --preset tiny -m v.vocab --batch-tokens 512 --threads 1 --max-steps 1 --src huge.txt --tgt huget.txt -o huge.st 2>h.err
check "  ... and counted with the long pairs" grep -q '6 pairs of 7 lines .* 1 longer than 256 tokens' h.err
hostile "train: every pair longer than --max-length" 1 "hold no usable sentence pair" 300 \
    "\"$TRAIN\" $T1 --max-length 2 --src d.txt --tgt d.txt -o long.st"
head -1 d.txt >one.txt
hostile "train: a corpus of one pair" 0 "" 300 "\"$TRAIN\" $T1 --src one.txt --tgt one.txt -o one.st"
{ head -5 d.txt; echo; echo; head -3 d.txt; } >v.txt
"$TRAIN" --preset tiny -m v.vocab --batch-tokens 512 --threads 1 --max-steps 1 --src d.txt --tgt d.txt \
    --valid-src v.txt --valid-tgt v.txt -o val.st 2>h.err
check "train: validation data with empty lines: skipped and counted" \
    grep -q 'validation data: 8 pairs of 10 lines .*skipped 2 with an empty side' h.err
printf 'a\000b c\n' >nul.txt
hostile "train: NUL bytes in text are text" 0 "" 300 "\"$TRAIN\" $T1 --src nul.txt --tgt one.txt -o nul.st"
{ head -3 text.ids; echo "5 99999 6"; } >beyond.ids
head -4 text.ids >four.ids
hostile "train: an id beyond the vocabulary" 1 "beyond\.ids:4: .*99999" 300 \
    "\"$TRAIN\" $T1 --src beyond.ids --tgt four.ids -o beyond.st"
head -3 text.ids >three3.ids
hostile "train: files of different lengths" 1 "source file has 4 lines but the target file has 3" 300 \
    "\"$TRAIN\" $T1 --src four.ids --tgt three3.ids -o diff.st"

# ---- two runs on one output, and a run killed -------------------------------------------------

TINY="--preset tiny -m v.vocab --src text.ids --tgt text.ids --batch-tokens 512 --threads 1"
"$TRAIN" $TINY --max-steps 100000 --save-every 0 -q -o busy.st 2>busy.err &
first=$!
i=0; while [ ! -s busy.st.lock ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
kill -STOP "$first"
hostile "train: a second run on the same output refuses at once" 1 \
    "busy\.st is being written by another process \(process $first holds busy\.st\.lock\)" 300 \
    "\"$TRAIN\" $TINY --max-steps 1 -q -o busy.st"
kill -KILL "$first"; wait "$first" 2>/dev/null
check "  ... the killed run leaves its lock file behind" test -e busy.st.lock
hostile "train: a lock left by a killed run blocks nothing" 0 "" 300 \
    "\"$TRAIN\" $TINY --max-steps 1 -q -o busy.st"
check "  ... and a run that ends removes it" test ! -e busy.st.lock

# ---- a reader that goes away, at every stage ---------------------------------------------------

# 8,000 lines: every stage writes more than a pipe holds (64 KB) before its
# input ends.  decode's lines of up to 40 ids fill the pipe after ~500 lines
# (at 5 ids, after ~4,000: 7 s of encoding each in the sanitizer build).
i=0; while [ $i -lt 20 ]; do cat text.txt; i=$((i + 1)); done >many.txt
for stage in 1 2 3 4; do
    # the pipeline cut after stage N by head -1
    case $stage in
        1) cmd="\"$TOK\" -m m.st many.txt 2>s1.err | head -n 1 >/dev/null" ;;
        2) cmd="\"$TOK\" -m m.st many.txt 2>s1.err | \"$ENC\" -m m.st 2>s2.err | head -c 100 >/dev/null" ;;
        3) cmd="\"$TOK\" -m m.st many.txt 2>s1.err | \"$ENC\" -m m.st 2>s2.err | \"$DEC\" -m m.st --greedy --max-length 40 2>s3.err | head -n 1 >/dev/null" ;;
        4) cmd="\"$TOK\" -m m.st many.txt 2>s1.err | \"$ENC\" -m m.st 2>s2.err | \"$DEC\" -m m.st --greedy --max-length 40 2>s3.err | \"$TOK\" -d -m m.st 2>s4.err | head -n 1 >/dev/null" ;;
    esac
    rm -f s1.err s2.err s3.err s4.err
    hostile "a pipeline of $stage stages, its reader gone after one line" 0 "" 300 "$cmd"
    check "  ... every stage quiet on stderr" sh -c 'for f in s1.err s2.err s3.err s4.err; do [ ! -s $f ] || exit 1; done'
done

# ---- strings that look like ids (train --input-format auto) -------------------------------------

# Real strings start with empty lines and numbers: the first block decides,
# not the first line.
{ echo; echo 42; echo 2026; echo undefined; echo null; head -20 text.txt; } >strings.txt
awk '{ print "x" }' strings.txt >x.txt
"$TRAIN" --preset tiny -m v.vocab --src strings.txt --tgt x.txt --batch-tokens 512 --threads 1 \
    --max-steps 1 -o strings.st 2>h.err
check "train: strings that start with an empty line and numbers are read as text" \
    grep -q 'training data: .*(text, text)' h.err
head -3 text.ids >three.ids
head -3 text.txt >three.txt
"$TRAIN" --preset tiny -m v.vocab --src three.ids --tgt three.txt --batch-tokens 512 --threads 1 \
    --max-steps 1 -o three.st 2>h.err
check "train: three id lines are ids, and train says it assumed so in one line" \
    sh -c "grep -q '(ids, text)' h.err && [ \"\$(grep -c 'three.ids read as id lines: it has only 3 non-empty lines of ids; give --input-format text' h.err)\" -eq 1 ]"
