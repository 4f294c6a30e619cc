#!/bin/sh
# distill.sh BUILD - sequence-level knowledge distillation (Kim and Rush,
# 2016) on the English-French strings (make bench-distill): a student learns
# from a teacher's translations of the training sources instead of the
# human ones, and is compared with the same student trained for the same
# time on the human targets, and with its teacher.
#
#   1. data: ../shared/data/enfr (266k pairs; valid and test 2,000), one 8k
#      joint vocabulary learnt on it (tokenize learn), id files.
#   2. the teacher: TEACHER=FILE, a model of any kind the toolkit reads (an
#      imported OPUS-MT model, say: it translates text through its own
#      vocabulary), or else one trained here with TEACHER_OPTIONS (default
#      --preset small) for TEACHER_TIME (default 4h).  Trained here, it is
#      resumable: run again, the script finds the model (done) or the run's
#      checkpoints (train --resume goes on with the same options and the
#      time already spent) and continues.
#   3. the teacher translates the training sources with beam 4, in chunks of
#      CHUNK lines; each chunk is written whole (rename) and a chunk already
#      made is kept, so a stopped run loses one chunk at most.
#   4. students of STUDENT_OPTIONS (default the small preset) for
#      STUDENT_TIME (default 30m) each: on the teacher's translations
#      ("distilled"), on the human targets ("original"), and with MIX=1 on
#      both together ("mixed").  A student whose model exists is kept.
#   5. the test set translated by each model, beam 4 and greedy: BLEU and
#      chrF (score, sacreBLEU's numbers) against the human references, and
#      the time of encode | decode of the 2,000 lines (batch 64, THREADS
#      threads) as a ratio to the teacher's.
#
# Everything stays in BENCH_OUT/distill (default build/bench/distill).
# THREADS (2) threads for every program; LINES=N keeps the first N training
# pairs alone (a quick trial of the recipe, with short times).  Lines for
# scripts:
#   distill_bleu model=M search=beam4|greedy X, distill_chrf ..., distill_speedup model=M X
set -u
BUILD=${1:?usage: tests/bench/distill.sh BUILD}
BUILD=$(cd "$BUILD" && pwd) || exit 1
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
BIN="$BUILD/bin"
THREADS=${THREADS:-2}
TEACHER=${TEACHER:-}
TEACHER_OPTIONS=${TEACHER_OPTIONS:---preset small}
TEACHER_TIME=${TEACHER_TIME:-4h}
STUDENT_OPTIONS=${STUDENT_OPTIONS:---preset small}
STUDENT_TIME=${STUDENT_TIME:-30m}
CHUNK=${CHUNK:-20000}
MIX=${MIX:-0}
LINES=${LINES:-}
OUT=${BENCH_OUT:-build/bench}/distill
DATA="$ROOT/../shared/data/enfr"
export LC_ALL=C.UTF-8

[ -f "$DATA/train.en.xz" ] || { echo "distill.sh: no corpus at $DATA"; exit 1; }
mkdir -p "$OUT/data" "$OUT/chunks" || exit 1
OUT=$(cd "$OUT" && pwd)
D="$OUT/data"
echo "distill: $(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), $THREADS threads"

# ---- 1. data -----------------------------------------------------------------------
sh tests/bench/pair_data.sh "$BIN" "$D" enfr $LINES || exit 1

# translate MODEL BEAM < TEXT > TEXT: the toolkit's pipeline, through the
# model's own vocabulary.
translate() {
    "$BIN/tokenize" -q -m "$1" | "$BIN/encode" -q -m "$1" --threads "$THREADS" |
        "$BIN/decode" -q -m "$1" --beam "$2" --threads "$THREADS" | "$BIN/tokenize" -q -d -m "$1"
}

. tests/bench/resumable.sh # train_resumable

# ---- 2. the teacher --------------------------------------------------------------------
if [ -n "$TEACHER" ]; then
    [ -s "$TEACHER" ] || { echo "distill.sh: no teacher model $TEACHER"; exit 1; }
    T=$(cd "$(dirname "$TEACHER")" && pwd)/$(basename "$TEACHER")
    echo "teacher: $T (given)"
else
    T="$OUT/teacher.st"
    echo "teacher: train $TEACHER_OPTIONS for $TEACHER_TIME"
    # shellcheck disable=SC2086
    train_resumable "$T" "$D/enfr.vocab" "$D/train.ids.en" "$D/train.ids.fr" "$D/valid.ids.en" \
        "$D/valid.ids.fr" "$TEACHER_TIME" $TEACHER_OPTIONS || exit 1
fi

# ---- 3. the teacher's translations of the training sources ------------------------------
# A new teacher makes new translations: the chunks are the teacher's.
stamp="$(cksum <"$T" | cut -d' ' -f1)"
if [ "$(cat "$OUT/chunks/teacher" 2>/dev/null)" != "$stamp" ]; then
    rm -f "$OUT/chunks/"* "$OUT/train.distill.fr"
    echo "$stamp" >"$OUT/chunks/teacher"
fi
if [ ! -s "$OUT/train.distill.fr" ]; then
    lines=$(wc -l <"$D/train.en")
    n=$(((lines + CHUNK - 1) / CHUNK))
    echo "the teacher translates $lines training sources, beam 4, in $n chunks of $CHUNK"
    i=0
    while [ $i -lt $n ]; do
        c="$OUT/chunks/$(printf %04d $i)"
        if [ ! -s "$c.fr" ]; then
            start=$(date +%s)
            sed -n "$((i * CHUNK + 1)),$(((i + 1) * CHUNK))p" "$D/train.en" | translate "$T" 4 >"$c.tmp" &&
                [ "$(wc -l <"$c.tmp")" -eq "$(sed -n "$((i * CHUNK + 1)),$(((i + 1) * CHUNK))p" "$D/train.en" | wc -l)" ] &&
                mv "$c.tmp" "$c.fr" || { echo "distill.sh: chunk $i failed"; exit 1; }
            echo "  chunk $((i + 1)) of $n: $(($(date +%s) - start)) s"
        fi
        i=$((i + 1))
    done
    cat "$OUT/chunks/"[0-9]*.fr >"$OUT/train.distill.tmp" && mv "$OUT/train.distill.tmp" "$OUT/train.distill.fr"
fi
[ -s "$D/train.distill.ids.fr" ] && [ "$D/train.distill.ids.fr" -nt "$OUT/train.distill.fr" ] ||
    "$BIN/tokenize" -q -m "$D/enfr.vocab" <"$OUT/train.distill.fr" >"$D/train.distill.ids.fr" || exit 1

# ---- 4. the students ----------------------------------------------------------------------
echo "students: train $STUDENT_OPTIONS for $STUDENT_TIME each"
# shellcheck disable=SC2086
train_resumable "$OUT/student-distilled.st" "$D/enfr.vocab" "$D/train.ids.en" \
    "$D/train.distill.ids.fr" "$D/valid.ids.en" "$D/valid.ids.fr" "$STUDENT_TIME" $STUDENT_OPTIONS || exit 1
# shellcheck disable=SC2086
train_resumable "$OUT/student-original.st" "$D/enfr.vocab" "$D/train.ids.en" \
    "$D/train.ids.fr" "$D/valid.ids.en" "$D/valid.ids.fr" "$STUDENT_TIME" $STUDENT_OPTIONS || exit 1
students="distilled original"
if [ "$MIX" = 1 ]; then
    [ -s "$D/mixed.ids.fr" ] || {
        cat "$D/train.ids.en" "$D/train.ids.en" >"$D/mixed.ids.en" &&
            cat "$D/train.distill.ids.fr" "$D/train.ids.fr" >"$D/mixed.ids.fr"
    } || exit 1
    # shellcheck disable=SC2086
    train_resumable "$OUT/student-mixed.st" "$D/enfr.vocab" "$D/mixed.ids.en" \
        "$D/mixed.ids.fr" "$D/valid.ids.en" "$D/valid.ids.fr" "$STUDENT_TIME" $STUDENT_OPTIONS || exit 1
    students="$students mixed"
fi

# ---- 5. quality and speed ------------------------------------------------------------------
# seconds MODEL BEAM: wall time of encode | decode of the test ids, best of 3.
seconds() {
    "$BIN/tokenize" -q -m "$1" <"$D/test.en" >"$OUT/test.$$.ids"
    best=""
    for _ in 1 2 3; do
        s=$(date +%s%N)
        "$BIN/encode" -q -m "$1" --threads "$THREADS" <"$OUT/test.$$.ids" |
            "$BIN/decode" -q -m "$1" --beam "$2" --batch-size 64 --threads "$THREADS" >/dev/null
        t=$((($(date +%s%N) - s) / 1000000))
        [ -z "$best" ] || [ "$t" -lt "$best" ] && best=$t
    done
    rm -f "$OUT/test.$$.ids"
    echo "$best"
}
echo
echo "== the test set (2,000 lines): BLEU / chrF against the human references; encode | decode time, batch 64"
printf '  %-20s %-15s %-15s %-22s %s\n' model "beam 4" greedy "ms beam 4 / greedy" "speed-up on the teacher (beam 4 / greedy)"
: >"$OUT/lines.txt"
t4=$(seconds "$T" 4)
t1=$(seconds "$T" 1)
for name in teacher $students; do
    if [ "$name" = teacher ]; then m=$T; else m="$OUT/student-$name.st"; fi
    row=""
    for beam in 4 1; do
        translate "$m" $beam <"$D/test.en" >"$OUT/$name.beam$beam.fr"
        bleu=$("$BIN/score" bleu -b -r "$D/test.fr" "$OUT/$name.beam$beam.fr")
        chrf=$("$BIN/score" chrf -b -r "$D/test.fr" "$OUT/$name.beam$beam.fr")
        search=beam4
        [ $beam = 1 ] && search=greedy
        echo "distill_bleu model=$name search=$search $bleu" >>"$OUT/lines.txt"
        echo "distill_chrf model=$name search=$search $chrf" >>"$OUT/lines.txt"
        row="$row$(printf '%-16s' "$bleu / $chrf")"
    done
    if [ "$name" = teacher ]; then s4=$t4 s1=$t1; else s4=$(seconds "$m" 4) s1=$(seconds "$m" 1); fi
    up=$(awk -v a="$t4" -v b="$s4" -v c="$t1" -v d="$s1" 'BEGIN { printf "%.2f / %.2f", a / b, c / d }')
    echo "distill_speedup model=$name ${up% / *}" >>"$OUT/lines.txt"
    printf '  %-20s %s %-22s %s\n' "$name" "$row" "$s4 / $s1" "$up"
done
echo
cat "$OUT/lines.txt"
