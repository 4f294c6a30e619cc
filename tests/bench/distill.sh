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
#      CHUNK lines, keeping its 4 best translations of each; each chunk is
#      written whole (rename) and a chunk already made is kept, so a stopped
#      run loses one chunk at most.
#   4. students, each trained for STUDENT_TIME (default 30m) on the
#      teacher's translations ("distilled") and on the human targets
#      ("original"), with MIX=1 on both together ("mixed"), and with INTER=1
#      on the one of the teacher's 4 best closest to the human target by
#      sentence chrF ("inter": Kim and Rush's interpolation), for every
#      shape of STUDENTS: a list of NAME=OPTIONS separated by ';' (default
#      the small-cpu preset, 3+1 pre-norm, and the small preset).
#      RUNS=LIST names the students instead, NAME-KIND each (small-mixed,
#      say).  JOBS (2) train at a time, with THREADS / JOBS threads each: a
#      shape's distilled and original students side by side, in the same
#      conditions.  A student whose model exists is kept; a stopped one
#      goes on; one made with another STUDENT_TIME, options or data
#      (MODEL.recipe) stops the run with a message.  A new teacher moves
#      the last one's students (distilled, mixed, inter) to teacher-STAMP/.
#      SECOND_CYCLE=TIME (default none) gives every student a second cycle
#      of TIME from its own weights on the same targets (train --init: a
#      new warm-up and decay, the default training options, or
#      SECOND_CYCLE_OPTIONS: --dropout 0, say), and the students measured
#      are those.
#   5. the test set translated by each model, beam 4 and greedy: BLEU and
#      chrF (score, sacreBLEU's numbers) against the human references; the
#      last validation perplexity and the updates made; and the speed of
#      decode alone (THREADS threads), beam 4 and greedy, at batch 64 on the
#      2,000 lines and at batch 1 on the first 500: ROUNDS (3) rounds
#      interleaved over the models, as a speed-up on the teacher.  The
#      first shape's distilled student is measured in int8 too.
#
# Everything stays in BENCH_OUT/distill (default build/bench/distill).
# THREADS (2) threads for every program; LINES=N keeps the first N training
# pairs alone (a quick trial of the recipe, with short times).  Lines for
# scripts:
#   distill_bleu model=M search=beam4|greedy X, distill_chrf ...,
#   distill_speedup model=M search=beam4|greedy batch=64|1 X,
#   distill_greedy_gap model=M chrf=D p=P (greedy less beam 4),
#   distill_gain shape=S search=beam4|greedy chrf=D p=P (distilled less
#   original), D in chrF points to two decimals (a bar of 0.5 is judged on
#   them) and P the paired bootstrap's (1,000 resamples); both are also
#   printed after the table.
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
STUDENTS=${STUDENTS:-small-cpu=--preset small-cpu;small=--preset small}
JOBS=${JOBS:-2}
ROUNDS=${ROUNDS:-3}
STUDENT_TIME=${STUDENT_TIME:-30m}
SECOND_CYCLE=${SECOND_CYCLE:-}
SECOND_CYCLE_OPTIONS=${SECOND_CYCLE_OPTIONS:-}
CHUNK=${CHUNK:-20000}
MIX=${MIX:-0}
INTER=${INTER:-0}
RUNS=${RUNS:-}
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

# up_to_date TARGET SOURCE: TARGET is not empty and was modified after
# SOURCE (test's -nt, which POSIX lacks).
up_to_date() {
    [ -s "$1" ] && [ -n "$(find "$1" -prune -newer "$2" 2>/dev/null)" ]
}

# tokenized TEXT IDS: IDS, the ids of TEXT in the students' vocabulary,
# made again when TEXT is newer.
tokenized() {
    up_to_date "$2" "$1" || "$BIN/tokenize" -q -m "$D/enfr.vocab" <"$1" >"$2"
}

# translate_ids MODEL BEAM [DECODE_OPTION]... < TEXT > IDS, translate MODEL
# BEAM < TEXT > TEXT: the toolkit's pipeline, through the model's own
# vocabulary.
translate_ids() {
    model=$1 beam=$2
    shift 2
    "$BIN/tokenize" -q -m "$model" | "$BIN/encode" -q -m "$model" --threads "$THREADS" |
        "$BIN/decode" -q -m "$model" --beam "$beam" --threads "$THREADS" "$@"
}
translate() {
    translate_ids "$1" "$2" | "$BIN/tokenize" -q -d -m "$1"
}

. tests/bench/resumable.sh # train_resumable, in_batches, shape_names, shape_options, updates_of

# ---- 2. the teacher --------------------------------------------------------------------
if [ -n "$TEACHER" ]; then
    [ -s "$TEACHER" ] || { echo "distill.sh: no teacher model $TEACHER"; exit 1; }
    T=$(cd "$(dirname "$TEACHER")" && pwd)/$(basename "$TEACHER")
    echo "teacher: $T (given)"
else
    T="$OUT/teacher.st"
    echo "teacher: $TEACHER_OPTIONS for $TEACHER_TIME, unless made earlier"
    # shellcheck disable=SC2086
    train_resumable "$T" "$D/enfr.vocab" "$D/train.ids.en" "$D/train.ids.fr" "$D/valid.ids.en" \
        "$D/valid.ids.fr" "$TEACHER_TIME" $TEACHER_OPTIONS || exit 1
fi

# ---- 3. the teacher's translations of the training sources ------------------------------
# A new teacher makes new translations: the chunks are the teacher's, and
# the students that learnt from the last teacher's (distilled, mixed) are
# moved to a directory of their own, kept but no longer used.
stamp="$(cksum <"$T" | cut -d' ' -f1)"
last=$(cat "$OUT/chunks/teacher" 2>/dev/null)
if [ "$last" != "$stamp" ]; then
    if [ -n "$last" ]; then
        for f in "$OUT"/student-*-distilled* "$OUT"/student-*-mixed* "$OUT"/student-*-inter* \
            "$OUT"/*-distilled*.fr "$OUT"/*-mixed*.fr "$OUT"/*-inter*.fr; do
            [ -e "$f" ] || continue
            mkdir -p "$OUT/teacher-$last" && mv "$f" "$OUT/teacher-$last/" || exit 1
        done
        [ -d "$OUT/teacher-$last" ] &&
            echo "  a new teacher: the last one's students are now in $OUT/teacher-$last"
    fi
    rm -f "$OUT/chunks/"* "$OUT/train.distill.fr" "$OUT/train.inter.fr"
    echo "$stamp" >"$OUT/chunks/teacher"
fi
# chunk_lines I FILE: the lines of chunk I (from 0, CHUNK lines each) of
# FILE.
chunk_lines() {
    sed -n "$(($1 * CHUNK + 1)),$((($1 + 1) * CHUNK))p" "$2"
}

# translate_chunk I FILE: the teacher's 4 best translations of chunk I of
# the training sources (best first), as FILE.nbest, lines of the record's
# number in the chunk (from 0), a tab and the text; and the best of each
# as FILE.fr.  Both are written whole (rename), or neither.
translate_chunk() {
    chunk_lines "$1" "$D/train.en" >"$2.en.tmp" &&
        translate_ids "$T" 4 --nbest 4 <"$2.en.tmp" >"$2.ids.tmp" || return 1
    # Marian's n-best form: INDEX ||| IDS ||| F0= LOG-PROB ||| SCORE
    awk -F ' [|][|][|] ' -v index_file="$2.index.tmp" '{ print $1 >index_file; print $2 }' "$2.ids.tmp" |
        "$BIN/tokenize" -q -d -m "$T" >"$2.text.tmp" &&
        [ "$(wc -l <"$2.index.tmp")" -eq "$(wc -l <"$2.text.tmp")" ] &&
        paste "$2.index.tmp" "$2.text.tmp" >"$2.nbest.tmp" &&
        awk 'BEGIN { last = "none" } {
            i = substr($0, 1, index($0, "\t") - 1)
            if (i != last) print substr($0, index($0, "\t") + 1); last = i
        }' "$2.nbest.tmp" >"$2.fr.tmp" &&
        [ "$(wc -l <"$2.fr.tmp")" -eq "$(wc -l <"$2.en.tmp")" ] &&
        rm -f "$2.en.tmp" "$2.ids.tmp" "$2.index.tmp" "$2.text.tmp" &&
        mv "$2.nbest.tmp" "$2.nbest" && mv "$2.fr.tmp" "$2.fr"
}

# closest_chunk I FILE: of the teacher's translations of each source of
# chunk I (FILE.nbest), the closest to the human target by sentence chrF
# (the first of equals: the teacher's best), as FILE.inter (Kim and Rush's
# sequence-level interpolation, with chrF for their sentence BLEU).
closest_chunk() {
    [ -s "$2.nbest" ] || {
        echo "distill.sh: no $2.nbest (chunks made before the 4 best were kept):" \
            "remove $OUT/train.distill.fr to translate them again"
        return 1
    }
    chunk_lines "$1" "$D/train.fr" >"$2.ref.tmp" &&
        awk 'NR == FNR { ref[NR - 1] = $0; next }
             { print ref[substr($0, 1, index($0, "\t") - 1)] }' "$2.ref.tmp" "$2.nbest" >"$2.refs.tmp" &&
        cut -f2- "$2.nbest" >"$2.hyps.tmp" &&
        "$BIN/score" chrf --sentence -b -r "$2.refs.tmp" "$2.hyps.tmp" >"$2.chrf.tmp" &&
        paste "$2.chrf.tmp" "$2.nbest" | awk -F '\t' 'BEGIN { last = "none" }
            $2 != last { if (last != "none") print best; last = $2; top = -1 }
            $1 + 0 > top { top = $1 + 0; best = substr($0, length($1 $2) + 3) }
            END { if (last != "none") print best }' >"$2.inter.tmp" &&
        [ "$(wc -l <"$2.inter.tmp")" -eq "$(wc -l <"$2.fr")" ] &&
        rm -f "$2.ref.tmp" "$2.refs.tmp" "$2.hyps.tmp" "$2.chrf.tmp" &&
        mv "$2.inter.tmp" "$2.inter"
}

if [ ! -s "$OUT/train.distill.fr" ]; then
    lines=$(wc -l <"$D/train.en")
    n=$(((lines + CHUNK - 1) / CHUNK))
    echo "the teacher translates $lines training sources, beam 4, in $n chunks of $CHUNK"
    i=0
    while [ $i -lt $n ]; do
        c="$OUT/chunks/$(printf %04d $i)"
        if [ ! -s "$c.fr" ] || [ ! -s "$c.nbest" ]; then
            start=$(date +%s)
            translate_chunk $i "$c" || { echo "distill.sh: chunk $i failed"; exit 1; }
            echo "  chunk $((i + 1)) of $n: $(($(date +%s) - start)) s"
        fi
        i=$((i + 1))
    done
    cat "$OUT/chunks/"[0-9]*.fr >"$OUT/train.distill.tmp" && mv "$OUT/train.distill.tmp" "$OUT/train.distill.fr"
fi
tokenized "$OUT/train.distill.fr" "$D/train.distill.ids.fr" || exit 1

# ---- 4. the students ----------------------------------------------------------------------
# One job per student of RUNS, JOBS at a time with THREADS / JOBS threads
# each: the distilled and the original student of a shape train side by
# side, sharing the machine alike, so that equal time is equal conditions
# too.
if [ -z "$RUNS" ]; then
    for name in $(shape_names "$STUDENTS"); do RUNS="$RUNS $name-distilled $name-original"; done
    if [ "$MIX" = 1 ]; then
        for name in $(shape_names "$STUDENTS"); do RUNS="$RUNS $name-mixed"; done
    fi
    if [ "$INTER" = 1 ]; then
        for name in $(shape_names "$STUDENTS"); do RUNS="$RUNS $name-inter"; done
    fi
fi
jobs=$RUNS # NAME-KIND, in the order they train
case " $jobs " in
*-mixed\ *)
    up_to_date "$D/mixed.ids.fr" "$D/train.distill.ids.fr" || {
        cat "$D/train.ids.en" "$D/train.ids.en" >"$D/mixed.ids.en" &&
            cat "$D/train.distill.ids.fr" "$D/train.ids.fr" >"$D/mixed.ids.fr"
    } || exit 1
    ;;
esac
case " $jobs " in
*-inter\ *)
    if ! up_to_date "$OUT/train.inter.fr" "$OUT/train.distill.fr"; then
        echo "the teacher's translations closest to the human targets (sentence chrF)"
        i=0
        for c in "$OUT/chunks/"[0-9]*.fr; do
            closest_chunk $i "${c%.fr}" || { echo "distill.sh: chunk $i: no closest translations"; exit 1; }
            i=$((i + 1))
        done
        cat "$OUT/chunks/"[0-9]*.inter >"$OUT/train.inter.tmp" && mv "$OUT/train.inter.tmp" "$OUT/train.inter.fr" || exit 1
    fi
    tokenized "$OUT/train.inter.fr" "$D/train.inter.ids.fr" || exit 1
    ;;
esac
echo "students: $STUDENT_TIME each${SECOND_CYCLE:+, then a second cycle of $SECOND_CYCLE}, $JOBS at a time with $(threads_each "$JOBS") threads each"

# model_of NAME: the model file of the teacher, a student NAME-KIND (its
# second cycle's with SECOND_CYCLE) or one in int8, NAME-KIND-int8.
model_of() {
    case $1 in
    teacher) echo "$T" ;;
    *-int8) echo "$(model_of "${1%-int8}" | sed 's/\.st$//')-int8.st" ;;
    *) echo "$OUT/student-$1${SECOND_CYCLE:+.cycle2}.st" ;;
    esac
}

# train_student NAME-KIND: the student of shape NAME on the targets KIND.
train_student() {
    name=${1%-*} kind=${1##*-}
    case $kind in
    distilled) src="$D/train.ids.en" tgt="$D/train.distill.ids.fr" ;;
    original) src="$D/train.ids.en" tgt="$D/train.ids.fr" ;;
    mixed) src="$D/mixed.ids.en" tgt="$D/mixed.ids.fr" ;;
    inter) src="$D/train.ids.en" tgt="$D/train.inter.ids.fr" ;;
    *) echo "distill.sh: $1: not NAME-distilled, NAME-original, NAME-mixed or NAME-inter"; return 1 ;;
    esac
    options=$(shape_options "$STUDENTS" "$name") ||
        { echo "distill.sh: $1: no shape $name in STUDENTS"; return 1; }
    echo "  $1: $options"
    # shellcheck disable=SC2086 # the options are a list
    train_resumable "$OUT/student-$1.st" "$D/enfr.vocab" "$src" "$tgt" "$D/valid.ids.en" \
        "$D/valid.ids.fr" "$STUDENT_TIME" $options || return 1
    [ -n "$SECOND_CYCLE" ] || return 0
    # shellcheck disable=SC2086 # a list of options
    train_resumable "$(model_of "$1")" "--init=$OUT/student-$1.st" "$src" "$tgt" \
        "$D/valid.ids.en" "$D/valid.ids.fr" "$SECOND_CYCLE" $SECOND_CYCLE_OPTIONS
}

# shellcheck disable=SC2086 # a list of names
in_batches "$JOBS" train_student $jobs || exit 1

# The first shape's distilled student in int8 too (train quantize).
first=$(shape_names "$STUDENTS" | head -1)
int8="$first-distilled-int8"
evaluated=$jobs
case " $jobs " in
*" $first-distilled "*)
    [ -s "$(model_of "$int8")" ] || "$BIN/train" quantize -q --compute-type int8 \
        -i "$(model_of "$first-distilled")" -o "$(model_of "$int8")" || exit 1
    evaluated="$jobs $int8"
    ;;
esac

# ---- 5. quality and speed ------------------------------------------------------------------
. tests/bench/decode_speed.sh # decode_rounds, decode_speedups, decode_best
# decode_source MODEL TEXT: the models may have vocabularies of their own.
decode_source() {
    "$BIN/tokenize" -q -m "$1" <"$2"
}
: >"$OUT/lines.txt"
models=""
for name in teacher $evaluated; do
    m=$(model_of "$name")
    models="$models $name=$m"
    for beam in 4 1; do
        search=beam4
        [ $beam = 1 ] && search=greedy
        translate "$m" $beam <"$D/test.en" >"$OUT/$name.$search.fr" || exit 1
        bleu=$("$BIN/score" bleu -b -r "$D/test.fr" "$OUT/$name.$search.fr")
        chrf=$("$BIN/score" chrf -b -r "$D/test.fr" "$OUT/$name.$search.fr")
        echo "distill_bleu model=$name search=$search $bleu" >>"$OUT/lines.txt"
        echo "distill_chrf model=$name search=$search $chrf" >>"$OUT/lines.txt"
    done
done
echo "timing decode: $ROUNDS interleaved rounds"
# shellcheck disable=SC2086 # a list of NAME=MODEL
decode_rounds "$ROUNDS" "$D/test.en" $models || exit 1
# shellcheck disable=SC2086 # a list of names
decode_speedups "distill_speedup model=" teacher $evaluated >>"$OUT/lines.txt"

echo
echo "== the test set (2,000 lines): BLEU / chrF against the human references, beam 4 and greedy;"
echo "   decode alone, batch 64 on the test set and batch 1 on its first 500 lines, best of $ROUNDS:"
echo "   ms with the teacher, speed-up on it for the students"
printf '  %-22s %8s %8s  %-13s %-13s %s\n' model updates "val ppl" "beam 4" greedy \
    "beam 4 b64 / b1, greedy b64 / b1"
for name in teacher $evaluated; do
    m=$(model_of "$name")
    q() { sed -n "s/^distill_$2 model=$name search=$1 //p" "$OUT/lines.txt"; }
    ppl=$(valid_ppl_of "$m.tsv") updates=$(updates_of "$m.tsv")
    case $name in
    teacher | *-int8) ;;
    *) [ -z "$SECOND_CYCLE" ] || updates="$(updates_of "$OUT/student-$name.st.tsv")+$updates" ;;
    esac
    if [ "$name" = teacher ]; then
        speed="$(decode_best teacher 4 64) / $(decode_best teacher 4 1), $(decode_best teacher 1 64) / $(decode_best teacher 1 1) ms"
    else
        sp() { sed -n "s/^distill_speedup model=$name search=$1 batch=$2 //p" "$OUT/lines.txt"; }
        speed="$(sp beam4 64) / $(sp beam4 1), $(sp greedy 64) / $(sp greedy 1)"
    fi
    printf '  %-22s %8s %8s  %-13s %-13s %s\n' "$name" "$updates" "$ppl" \
        "$(q beam4 bleu) / $(q beam4 chrf)" "$(q greedy bleu) / $(q greedy chrf)" "$speed"
done

# paired_chrf BASE SYSTEM: "D P", SYSTEM's chrF less BASE's on the test set
# and the p of score's paired bootstrap resampling (1,000 resamples).
paired_chrf() {
    "$BIN/score" chrf -w 2 -r "$D/test.fr" --paired-bs "$1" "$2" |
        awk -F'\t' '$1 == "baseline" { base = $2 + 0 }
                    $1 == "system" { p = $3; sub(/.*p = /, "", p); sub(/\).*/, "", p)
                                     printf "%+.2f %s\n", $2 - base, p; done = 1 }
                    END { exit !done }'
}
echo
echo "== chrF differences on the test set, paired bootstrap (1,000 resamples): each model's"
echo "   greedy less its beam 4; each distilled student less its shape on the human targets"
for name in teacher $evaluated; do
    r=$(paired_chrf "$OUT/$name.beam4.fr" "$OUT/$name.greedy.fr") || exit 1
    echo "distill_greedy_gap model=$name chrf=${r% *} p=${r#* }" >>"$OUT/lines.txt"
    printf '  %-22s greedy less beam 4: %s (p = %s)\n' "$name" "${r% *}" "${r#* }"
done
for name in $evaluated; do
    shape=${name%-distilled}
    case " $evaluated " in *" $shape-original "*) ;; *) continue ;; esac
    [ "$shape" != "$name" ] || continue
    for search in beam4 greedy; do
        r=$(paired_chrf "$OUT/$shape-original.$search.fr" "$OUT/$name.$search.fr") || exit 1
        echo "distill_gain shape=$shape search=$search chrf=${r% *} p=${r#* }" >>"$OUT/lines.txt"
        printf '  %-22s distilled less original, %s: %s (p = %s)\n' "$shape" "$search" "${r% *}" "${r#* }"
    done
done
echo
cat "$OUT/lines.txt"
