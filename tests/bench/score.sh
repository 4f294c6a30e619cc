#!/bin/sh
# score.sh BUILD - how fast score(1) computes BLEU and chrF on 100,000 lines,
# in lines per second, beside sacreBLEU (the peer a user would pick) when a
# python3 here can import it.
#
# The references are sentences of the license texts and package documentation
# on this machine (/usr/share/common-licenses, /usr/share/doc/*/copyright),
# repeated to 100,000 lines; the hypotheses are the same lines perturbed
# deterministically (words dropped, replaced and swapped), so the scores are
# realistic (BLEU around 50) and the same in every run on a machine.
#
# Output: a line per measurement, then machine-readable lines
#   score_lines_per_s metric=bleu threads=T X
#   sacrebleu_lines_per_s metric=bleu X         (when sacreBLEU is installed)
BUILD=${1:?usage: sh tests/bench/score.sh BUILD}
SCORE="$BUILD/bin/score"
LINES=${SCORE_BENCH_LINES:-100000}
if [ ! -x "$SCORE" ]; then echo "score: $SCORE is not built; skipped"; exit 0; fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tfm-bench-score.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export LC_ALL=C.UTF-8

# Sentences of 5 to 60 words from the texts, one per line.
{
    cat /usr/share/common-licenses/* 2>/dev/null
    find /usr/share/doc -name copyright -type f 2>/dev/null | LC_ALL=C sort | head -400 | xargs cat 2>/dev/null
} | tr '\t\r' '  ' | awk '
    { text = text " " $0 }
    length(text) > 100000 { flush() }
    END { flush() }
    function flush(   n, i, s, words) {
        n = split(text, parts, /[.!?] +/)
        for (i = 1; i < n; i++) {
            s = parts[i]; gsub(/  +/, " ", s); sub(/^ /, "", s)
            words = split(s, tmp, " ")
            if (words >= 5 && words <= 60) print s "."
        }
        text = parts[n]
    }' >"$TMP/sentences.txt"
n_sent=$(wc -l <"$TMP/sentences.txt")
if [ "$n_sent" -lt 100 ]; then echo "score: too little text on this machine to build a corpus; skipped"; exit 0; fi

# References: the sentences again and again; hypotheses: perturbed copies.
awk -v want="$LINES" '{ s[NR] = $0 } END { for (i = 0; i < want; i++) print s[i % NR + 1] }' \
    "$TMP/sentences.txt" >"$TMP/ref.txt"
awk '{
    n = split($0, w, " "); out = ""
    for (i = 1; i <= n; i++) {
        h = (NR * 31 + i * 17) % 100
        if (h < 8) continue                        # dropped
        if (h < 14) w[i] = "the"                   # replaced
        else if (h < 18 && i < n) { t = w[i]; w[i] = w[i + 1]; w[i + 1] = t }   # swapped
        out = out (out == "" ? "" : " ") w[i]
    }
    print out
}' "$TMP/ref.txt" >"$TMP/hyp.txt"
bytes=$(wc -c <"$TMP/ref.txt")
echo "score: $LINES lines ($((bytes / 1024)) KiB of references, $n_sent distinct sentences)"

now() { date +%s.%N; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { t = b - a; if (t <= 0) t = 1e-9; printf "%.0f", n / t }'; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

cpus=$(nproc 2>/dev/null || echo 1)
results=""
for metric in bleu chrf; do
    # The hypotheses end in " ." where a sentence ended in a word: no warning.
    force=""; [ "$metric" = bleu ] && force=--force
    for threads in 1 "$cpus"; do
        t0=$(now)
        value=$("$SCORE" "$metric" $force --threads "$threads" -b -w 2 -r "$TMP/ref.txt" "$TMP/hyp.txt") || {
            echo "score $metric: failed"; exit 1; }
        t1=$(now)
        r=$(rate "$LINES" "$t0" "$t1")
        printf '  score %-5s threads=%s  %s = %s  %s s  %s lines/s\n' "$metric" "$threads" "$metric" \
            "$value" "$(secs "$t0" "$t1")" "$r"
        results="$results
score_lines_per_s metric=$metric threads=$threads $r"
        eval "tfm_$metric=\$r tfm_value_$metric=\$value"
        [ "$threads" = "$cpus" ] && break
    done
done

# sacreBLEU, if some python3 here has it (it is not a Debian package).
py=""
for cand in /usr/bin/python3 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sacrebleu' 2>/dev/null; then py=$cand; break; fi
done
if [ -n "$py" ]; then
    for metric in bleu chrf; do
        t0=$(now)
        value=$("$py" -m sacrebleu "$TMP/ref.txt" -i "$TMP/hyp.txt" -m "$metric" -b -w 2 2>/dev/null)
        t1=$(now)
        r=$(rate "$LINES" "$t0" "$t1")
        eval "ours=\$tfm_$metric oursv=\$tfm_value_$metric"
        same=$([ "$value" = "$oursv" ] && echo "same score" || echo "DIFFERENT SCORE: score says $oursv")
        printf '  sacrebleu %-5s  %s = %s  %s s  %s lines/s  (score is %sx faster; %s)\n' "$metric" "$metric" \
            "$value" "$(secs "$t0" "$t1")" "$r" "$(awk -v a="$ours" -v b="$r" 'BEGIN { printf "%.1f", a / b }')" "$same"
        results="$results
sacrebleu_lines_per_s metric=$metric $r"
    done
else
    echo "  sacrebleu: not importable by any python3 here (it is on PyPI, not in Debian): no comparison"
fi
echo "$results" | sed '/^$/d'
