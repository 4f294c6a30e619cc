#!/bin/sh
# tokenize.sh BUILD CORPUS - our tokenize against SentencePiece (Debian's
# spm_train and spm_encode), side by side on the same text and thread count:
#
#   learn    a BPE vocabulary of 8000 and of 32000 pieces from all of CORPUS
#            (ratio = spm seconds / our seconds: above 1 means we are faster)
#   encode   all of CORPUS with each vocabulary, to id lines
#            (ratio = our MB/s / spm's MB/s); spm_encode has no thread option
#            and runs on one thread, so ours is timed with 1 and with N threads
#   pieces   average pieces per line of each encoding, and how much more (+) or
#            fewer (-) pieces ours gives, in % of spm's
#
# Both learn with byte fallback, NFKC, character coverage 0.9995, pieces of at
# most 16 characters and no sampling of the input.  Wall and CPU (user+system)
# seconds come from /usr/bin/time.  Everything (vocabularies, logs, times) goes
# to OUTDIR (default build/bench/tokenize); id files are deleted after counting
# unless BENCH_KEEP=1.  Without spm_* it prints "sentencepiece not installed:
# ours only" and measures ours; without BUILD/bin/tokenize, spm's only.
#
# Environment: THREADS (default: the CPU count), VOCABS (default "8000 32000"),
# OUTDIR, BENCH_KEEP.
set -u
BUILD=${1:?usage: tests/bench/tokenize.sh BUILD CORPUS}
CORPUS=${2:?usage: tests/bench/tokenize.sh BUILD CORPUS}
THREADS=${THREADS:-$(nproc 2>/dev/null || echo 1)}
VOCABS=${VOCABS:-8000 32000}
OUTDIR=${OUTDIR:-build/bench/tokenize}
TOK="$BUILD/bin/tokenize"
export LC_ALL=C.UTF-8
mkdir -p "$OUTDIR"
RESULTS="$OUTDIR/results.txt"   # one line per measurement: KEY VALUE...
: >"$RESULTS"

have_spm=yes
command -v spm_train >/dev/null 2>&1 && command -v spm_encode >/dev/null 2>&1 || {
    have_spm=; echo "tokenize bench: sentencepiece not installed: ours only"; }
have_ours=yes
[ -x "$TOK" ] || { have_ours=; echo "tokenize bench: $TOK not built: sentencepiece only"; }

corpus_bytes=$(wc -c <"$CORPUS" | tr -d ' ')
corpus_lines=$(wc -l <"$CORPUS" | tr -d ' ')
corpus_mb=$(awk "BEGIN { printf \"%.1f\", $corpus_bytes / 1e6 }")
echo "tokenize bench: $CORPUS: $corpus_mb MB, $corpus_lines lines; $THREADS threads; output in $OUTDIR"

# timed NAME COMMAND... - runs COMMAND with its stdout in OUTDIR/NAME.out and
# its stderr in OUTDIR/NAME.log, and records "NAME wall cpu" in RESULTS.
# Returns the command's status.
timed() {
    name=$1; shift
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%e %U %S' -o "$OUTDIR/$name.time" "$@" \
            >"$OUTDIR/$name.out" 2>"$OUTDIR/$name.log"
        rc=$?
        # The last line (above it, time may say "Command exited with non-zero status").
        set -- $(tail -1 "$OUTDIR/$name.time")
        wall=$1 cpu=$(awk "BEGIN { print $2 + $3 }")
    else   # without it there is no CPU time: wall only
        t0=$(date +%s.%N)
        "$@" >"$OUTDIR/$name.out" 2>"$OUTDIR/$name.log"
        rc=$?
        wall=$(awk "BEGIN { print $(date +%s.%N) - $t0 }") cpu=nan
    fi
    if [ "$rc" -ne 0 ]; then
        echo "  $name: FAILED (exit $rc); the end of $OUTDIR/$name.log:"
        tail -5 "$OUTDIR/$name.log" | sed 's/^/    /'
        return "$rc"
    fi
    echo "$name $wall $cpu" >>"$RESULTS"
    printf '  %-20s %8.2f s wall %8.2f s cpu\n' "$name" "$wall" "$cpu"
}

# pieces NAME - counts the ids in OUTDIR/NAME.out (an encoding), checks there
# is one line per corpus line, and records "NAME pieces-per-line".
pieces() {
    set -- "$1" $(awk '{ n += NF } END { printf "%d %.4f", NR, NR ? n / NR : 0 }' "$OUTDIR/$1.out")
    [ "${BENCH_KEEP:-0}" = 1 ] || rm -f "$OUTDIR/$1.out"
    if [ "$2" -ne "$corpus_lines" ]; then
        echo "  $1: $2 output lines for $corpus_lines input lines: WRONG"
        return 1
    fi
    echo "$1.pieces $3" >>"$RESULTS"
    printf '  %-20s %8.3f pieces per line\n' "$1" "$3"
}

for v in $VOCABS; do
    echo "vocabulary of $v pieces:"
    if [ -n "$have_spm" ]; then
        timed "spm-learn-$v" spm_train --input="$CORPUS" --model_prefix="$OUTDIR/spm-$v" \
            --model_type=bpe --vocab_size="$v" --byte_fallback=true \
            --character_coverage=0.9995 --max_sentencepiece_length=16 \
            --max_sentence_length=1000000 --input_sentence_size=0 \
            --num_threads="$THREADS" &&
        timed "spm-encode-$v" spm_encode --model="$OUTDIR/spm-$v.model" --output_format=id \
            "$CORPUS" &&
        pieces "spm-encode-$v"
    fi
    if [ -n "$have_ours" ]; then
        timed "ours-learn-$v" "$TOK" learn --vocab-size "$v" --character-coverage 0.9995 \
            --max-piece-length 16 --threads "$THREADS" -o "$OUTDIR/ours-$v.vocab" "$CORPUS" &&
        timed "ours-encode-$v" "$TOK" -m "$OUTDIR/ours-$v.vocab" --threads "$THREADS" \
            "$CORPUS" &&
        pieces "ours-encode-$v" &&
        if [ "$THREADS" -ne 1 ]; then  # spm_encode runs on one thread: ours on one too
            timed "ours-encode1-$v" "$TOK" -m "$OUTDIR/ours-$v.vocab" --threads 1 "$CORPUS" &&
            pieces "ours-encode1-$v"
        fi
    fi
done

# ---- summary -------------------------------------------------------------------

# The figures in RESULTS become ratios; a ratio is "-" when a side is missing.
echo
echo "tokenize vs sentencepiece: $corpus_mb MB, $corpus_lines lines, $THREADS threads"
echo "(learn: spm seconds / ours; encode: ours MB/s / spm's; cpu: per CPU-second; > 1: ours faster)"
awk -v vocabs="$VOCABS" -v mb="$corpus_mb" -v threads="$THREADS" '
    { wall[$1] = $2; cpu[$1] = $3; val[$1] = $2 }
    function f(x, fmt) { return x == "" ? "-" : sprintf(fmt, x) }
    function ratio(a, b) { return (a == "" || b == "" || a == "nan" || b == "nan" || b == 0) ? "" : a / b }
    function rate(s) { return (s == "" || s == "nan" || s == 0) ? "" : mb / s }
    # row LABEL VOCAB SPM OURS TARGET KEY: time rows (seconds) or rate rows (MB/s).
    function row(label, v, spm, ours, is_rate, target, key,   sw, ow, sc, oc, rw, rc) {
        if (is_rate) {
            sw = rate(wall[spm]); ow = rate(wall[ours]); sc = rate(cpu[spm]); oc = rate(cpu[ours])
            rw = ratio(ow, sw); rc = ratio(oc, sc)
        } else {
            sw = wall[spm]; ow = wall[ours]; sc = cpu[spm]; oc = cpu[ours]
            rw = ratio(sw, ow); rc = ratio(sc, oc)
        }
        printf "%-22s %6s %9s %9s %9s %9s %8s %8s   %s\n", label, v, f(sw, "%.2f"), f(ow, "%.2f"),
            f(sc, "%.2f"), f(oc, "%.2f"), f(rw, "%.2f"), f(rc, "%.2f"), target
        if (rw != "")
            machine = machine sprintf("%s vocab=%s ratio_wall=%.3f ratio_cpu=%s\n", key, v, rw,
                                      f(rc, "%.3f"))
    }
    END {
        printf "%-22s %6s %9s %9s %9s %9s %8s %8s   %s\n", "", "vocab", "spm wall", "ours wall",
            "spm cpu", "ours cpu", "ratio", "ratio", "target"
        printf "%-22s %6s %9s %9s %9s %9s %8s %8s\n", "", "", "", "", "", "", "wall", "cpu"
        n = split(vocabs, vs, " ")
        for (i = 1; i <= n; i++) {
            v = vs[i]
            row("learn (s)", v, "spm-learn-" v, "ours-learn-" v, 0, "ratio >= 1", "tokenize_learn")
            row("encode (MB/s) " threads " thr", v, "spm-encode-" v, "ours-encode-" v, 1,
                "ratio >= 2", "tokenize_encode threads=" threads)
            if (("ours-encode1-" v) in wall)
                row("encode (MB/s) 1 thr", v, "spm-encode-" v, "ours-encode1-" v, 1,
                    "ratio >= 2", "tokenize_encode threads=1")
            s = val["spm-encode-" v ".pieces"]; o = val["ours-encode-" v ".pieces"]
            d = (s == "" || o == "") ? "" : 100 * (o - s) / s
            printf "%-22s %6s %9s %9s %9s %9s %8s %8s   %s\n", "pieces per line", v,
                f(s, "%.3f"), f(o, "%.3f"), "", "", f(d, "%+.2f%%"), "", "|diff| <= 2%"
            if (d != "")
                machine = machine sprintf("tokenize_pieces vocab=%s spm=%.3f ours=%.3f diff_pct=%+.2f\n",
                                          v, s, o, d)
        }
        printf "\n%s", machine
    }' "$RESULTS" | tee "$OUTDIR/summary.txt"
