# resumable.sh - sourced by distill.sh and shapes.sh from the top of the
# tree: training runs of hours that can be spread over several runs of a
# benchmark, several side by side, and what their logs say.  BIN and
# THREADS are the caller's.

# shapes_of LIST: the shapes of LIST, a list of NAME=OPTIONS separated by
# ';', one per line, without the blanks before each NAME.
shapes_of() {
    printf '%s\n' "$1" | tr ';' '\n' | sed -n 's/^[[:blank:]]*\([^=[:blank:]][^=]*=\)/\1/p'
}

# shape_names LIST: the NAMEs of LIST, one per line, in its order.
shape_names() {
    shapes_of "$1" | cut -d= -f1
}

# shape_options LIST NAME: the OPTIONS of NAME in LIST; fails when LIST
# has no NAME.
shape_options() {
    shapes_of "$1" | awk -v name="$2" 'index($0, name "=") == 1 {
        print substr($0, length(name) + 2); found = 1; exit
    } END { exit !found }'
}

# updates_of LOG, valid_ppl_of LOG: the updates a run made and its last
# validation perplexity, from its train --log file ('-' without one).
updates_of() {
    if [ -s "$1" ]; then
        awk -F'\t' '$1 ~ /^[0-9]+$/ { n = $1 } END { print n }' "$1"
    else
        echo -
    fi
}
valid_ppl_of() {
    if [ -s "$1" ]; then
        awk -F'\t' '$8 == "valid" { ppl = $4 } END { printf "%.2f\n", ppl }' "$1"
    else
        echo -
    fi
}

# train_resumable MODEL VOCAB SRC TGT VALID_SRC VALID_TGT TIME OPTIONS...:
# trains MODEL for TIME with OPTIONS (VOCAB the vocabulary, or
# --init=START: a run from the weights of the model START, with its
# vocabulary and shape and a new schedule), validating every 500 updates and
# saving a checkpoint every 200; run again, it goes on from the newest
# checkpoint (train --resume: the same options, the time already spent),
# and once the run has ended (MODEL.done) it leaves MODEL alone.  A run
# stopped by a signal writes MODEL too, but not MODEL.done: it goes on.
# MODEL.recipe holds what the run was started with (TIME, OPTIONS and the
# checksums of SRC and TGT); asked for another recipe, it fails and says
# so instead of keeping or continuing a model made otherwise (a student
# of an earlier teacher, say).
train_resumable() {
    model=$1 vocab=$2 src=$3 tgt=$4 valid_src=$5 valid_tgt=$6 time=$7
    shift 7
    recipe="time $time; options $*; checksums: source $(cksum <"$src" | cut -d' ' -f1), target $(cksum <"$tgt" | cut -d' ' -f1)"
    case $vocab in
    --init=*) recipe="$recipe, start $(cksum <"${vocab#--init=}" | cut -d' ' -f1)" ;;
    esac
    if [ -f "$model.recipe" ] && [ "$(cat "$model.recipe")" != "$recipe" ]; then
        echo "  $model: made with another recipe than this run's:"
        echo "    made with:  $(cat "$model.recipe")"
        echo "    this run's: $recipe"
        echo "  remove its files ($model*) to make it again, or name the run otherwise"
        return 1
    fi
    if [ -s "$model" ] && { [ -e "$model.done" ] || ! ls "$model".ckpt-* >/dev/null 2>&1; }; then
        echo "  $model: made earlier ($(updates_of "$model.tsv") updates), kept"
        return 0
    fi
    if ls "$model".ckpt-* >/dev/null 2>&1; then
        echo "  $model: going on from $(ls -t "$model".ckpt-* | head -1)"
        "$BIN/train" --resume -q --threads "$THREADS" -o "$model" 2>>"$model.log"
    else
        echo "  $model: training"
        echo "$recipe" >"$model.recipe"
        case $vocab in
        --init=*) set -- "$@" "$vocab" ;;
        *) set -- "$@" -m "$vocab" ;;
        esac
        "$BIN/train" "$@" --src "$src" --tgt "$tgt" \
            --valid-src "$valid_src" --valid-tgt "$valid_tgt" --valid-every 500 \
            --max-time "$time" --threads "$THREADS" --save-every 200 -q --log "$model.tsv" \
            -o "$model" 2>>"$model.log"
    fi
    status=$?
    [ $status -eq 0 ] && [ -s "$model" ] || {
        echo "training $model stopped or failed, status $status (see $model.log)"
        return 1
    }
    : >"$model.done"
}

# threads_each JOBS: the threads of each of JOBS runs side by side, THREADS
# shared among them (one at least).
threads_each() {
    threads_n=$((THREADS / $1))
    [ "$threads_n" -ge 1 ] || threads_n=1
    echo "$threads_n"
}

# in_batches JOBS FUNCTION ITEM...: FUNCTION ITEM for every ITEM, JOBS at a
# time in the background with THREADS set to threads_each JOBS (each batch
# waited for before the next starts, so that the runs of a batch share the
# machine alike); fails when any did.
in_batches() {
    batch_jobs=$1 batch_fn=$2
    shift 2
    while [ $# -gt 0 ]; do
        batch_pids="" batch_n=0
        while [ $# -gt 0 ] && [ $batch_n -lt "$batch_jobs" ]; do
            (THREADS=$(threads_each "$batch_jobs") && "$batch_fn" "$1") &
            batch_pids="$batch_pids $!" batch_n=$((batch_n + 1))
            shift
        done
        batch_failed=0
        for pid in $batch_pids; do wait "$pid" || batch_failed=1; done
        [ $batch_failed = 0 ] || return 1
    done
}
