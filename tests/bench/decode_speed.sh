# decode_speed.sh - sourced by shapes.sh and distill.sh from the top of the
# tree: the speed of decode alone, compared over models.  BIN, THREADS and
# OUT are the caller's.

# ms CMD...: the wall time of CMD in milliseconds, or "failed" (its
# messages in $OUT/ms.err).
ms() {
    s=$(date +%s%N)
    if "$@" >/dev/null 2>"$OUT/ms.err"; then echo $((($(date +%s%N) - s) / 1000000)); else echo failed; fi
}

# decode_source MODEL SOURCE: the source ids MODEL decodes.  SOURCE is ids
# already here; a caller whose source is text, or whose models have
# vocabularies of their own, defines it again (tokenize -m MODEL).
decode_source() {
    cat "$2"
}

# decode_rounds ROUNDS SOURCE NAME=MODEL...: encodes SOURCE (decode_source),
# and its first 500 lines, once with each MODEL, then times decode alone,
# beam 4 and greedy, at batch 64 on the whole and at batch 1 on the 500
# lines: ROUNDS rounds interleaved over the models, so that a noisy minute
# is shared.  Writes "NAME BEAM BATCH MS" lines to $OUT/best.txt.
decode_rounds() {
    rounds=$1 source=$2
    shift 2
    for named in "$@"; do
        decode_source "${named#*=}" "$source" >"$OUT/decode.ids" &&
            head -n 500 "$OUT/decode.ids" >"$OUT/decode.500.ids" &&
            "$BIN/encode" -q -m "${named#*=}" --threads "$THREADS" <"$OUT/decode.ids" \
                >"$OUT/${named%%=*}.64.npy" &&
            "$BIN/encode" -q -m "${named#*=}" --threads "$THREADS" <"$OUT/decode.500.ids" \
                >"$OUT/${named%%=*}.1.npy" || return 1
    done
    rm -f "$OUT/decode.ids" "$OUT/decode.500.ids"
    rm -f "$OUT/best.txt"
    r=0
    while [ $r -lt "$rounds" ]; do
        for named in "$@"; do
            for beam in 4 1; do
                for batch in 64 1; do
                    echo "${named%%=*} $beam $batch $(ms "$BIN/decode" -q -m "${named#*=}" --beam $beam \
                        --batch-size $batch --threads "$THREADS" "$OUT/${named%%=*}.$batch.npy")" \
                        >>"$OUT/best.txt"
                done
            done
        done
        r=$((r + 1))
    done
    for named in "$@"; do rm -f "$OUT/${named%%=*}.64.npy" "$OUT/${named%%=*}.1.npy"; done
    if grep -q failed "$OUT/best.txt"; then
        echo "a decode failed: $(head -3 "$OUT/ms.err")"
        return 1
    fi
}

# decode_best NAME BEAM BATCH: the best time of NAME in $OUT/best.txt, in ms.
decode_best() {
    awk -v n="$1" -v b="$2" -v s="$3" '$1 == n && $2 == b && $3 == s && (best == "" || $4 < best) {
        best = $4 } END { print best }' "$OUT/best.txt"
}

# decode_speedup NAME YARDSTICK BEAM BATCH: how many times faster NAME
# decoded than YARDSTICK, best time against best time.
decode_speedup() {
    awk -v a="$(decode_best "$2" "$3" "$4")" -v b="$(decode_best "$1" "$3" "$4")" \
        'BEGIN { printf "%.2f\n", a / b }'
}

# decode_speedups PREFIX YARDSTICK NAME...: for each NAME, search and batch,
# the line "PREFIX<NAME> search=beam4|greedy batch=64|1 X", X its speed-up
# on YARDSTICK.
decode_speedups() {
    prefix=$1 yardstick=$2
    shift 2
    for named in "$@"; do
        for beam in 4 1; do
            search=beam4
            [ $beam = 1 ] && search=greedy
            for batch in 64 1; do
                echo "$prefix$named search=$search batch=$batch" \
                    "$(decode_speedup "$named" "$yardstick" $beam $batch)"
            done
        done
    done
}
