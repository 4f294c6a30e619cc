#!/bin/sh
# test_score_model.sh - score -m: the log-probability of targets given their
# sources under a model (tiny, untrained, made here with tokenize learn and
# $BUILD/tools/mkmodel), as marian-scorer prints it.  Checks the columns
# against each other (total = sum of --per-token values, average = total /
# (ids + 1)), against an independent computation (decode's greedy search
# scores its own hypothesis incrementally; score -m must give the same
# log-prob from the training forward pass), against batching (a pair alone
# = in a big batch), the perplexity on stderr, n-best rescoring in Marian's
# form, --text, and the edges: mismatched line counts, ids outside the
# vocabulary, <pad>, empty lines, over-long lines, usage errors, and an
# answer per line in an interactive pipe.
. "$ROOT/tests/cli/lib.sh"

SCORE="$BIN/score" ENC="$BIN/encode" DEC="$BIN/decode" TOK="$BIN/tokenize" MK="$BUILD/tools/mkmodel"
TMO=60
for p in "$SCORE" "$ENC" "$DEC" "$TOK" "$MK"; do
    [ -x "$p" ] || { fail "$p is not built"; exit 0; }
done
sc() { timeout "$TMO" "$SCORE" "$@"; }

# ---- set-up: a vocabulary, a tiny model, 30 source and target id lines ---------------

"$TOK" learn --vocab-size 600 --soft-vocab-limit -q "$ROOT/tests/data/corpus-small.txt" -o v.vocab ||
    { fail "tokenize learn"; exit 0; }
V=$(wc -l <v.vocab | tr -d ' ')
"$MK" --preset tiny --vocab v.vocab --seed 1 -o m.st || { fail "mkmodel tiny"; exit 0; }
sed -n 1,30p "$ROOT/tests/data/corpus-small.txt" >src.txt
sed -n 31,60p "$ROOT/tests/data/corpus-small.txt" >tgt.txt
"$TOK" -m m.st <src.txt >src.ids
"$TOK" -m m.st <tgt.txt >tgt.ids
N=$(wc -l <src.ids | tr -d ' ')

# near A B TOL: |A - B| <= TOL.
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

# ---- the columns ----------------------------------------------------------------------

expect_status 0 "score -m: exit 0" sc -m m.st --src src.ids --tgt tgt.ids --per-token
cp out.txt pt.txt
cp err.txt pt.err
check "one line per pair ($N)" test "$(wc -l <pt.txt | tr -d ' ')" -eq "$N"
check "every line: TOTAL<TAB>AVERAGE<TAB>per-token, log-probs <= 0" awk -F'\t' '
    NF != 3 || $1 > 0 || $2 > 0 { exit 1 }' pt.txt
check "the total is the sum of the --per-token values" awk -F'\t' '
    { n = split($3, v, " "); s = 0; for (i = 1; i <= n; i++) s += v[i]; d = s - $1; if (d < 0) d = -d
      if (d > 1e-3) { print "line " NR ": " $1 " vs " s; exit 1 } }' pt.txt
# Per-token values: the target's ids and then </s>; average = total / (ids + 1).
check "--per-token: ids + 1 values (the last for </s>); average = total / (ids + 1)" awk -F'\t' '
    NR == FNR { len[NR] = split($0, w, " "); next }
    { n = split($3, v, " "); if (n != len[FNR] + 1) { print "line " FNR ": " n " values"; exit 1 }
      d = $1 / n - $2; if (d < 0) d = -d; if (d > 1e-5) { print "line " FNR; exit 1 } }' \
    tgt.ids pt.txt
sc -m m.st --src src.ids --tgt tgt.ids >plain.txt 2>/dev/null
check "without --per-token: the first two columns alone" sh -c 'cut -f1,2 pt.txt | cmp -s - plain.txt'
sc -m m.st --src src.ids --tgt tgt.ids -n >norm.txt 2>/dev/null
check "-n: the average alone, one column" sh -c 'cut -f2 plain.txt | cmp -s - norm.txt'

# ---- the perplexity ---------------------------------------------------------------------

if grep -qE '^score: perplexity [0-9]+\.[0-9]+ over [0-9]+ target tokens' pt.err; then
    pass "the perplexity on stderr"
else fail "no perplexity line: $(cat pt.err)"; fi
ppl=$(sed -n 's/^score: perplexity \([0-9.]*\) over.*/\1/p' pt.err)
want=$(awk -F'\t' '{ s += $1; n += split($3, v, " ") } END { printf "%.4f", exp(-s / n) }' pt.txt)
check "perplexity = exp(-sum of totals / target tokens with </s>) ($ppl)" near "$ppl" "$want" 0.01
sc -q -m m.st --src src.ids --tgt tgt.ids >/dev/null 2>err.txt
check "-q: no perplexity line" test ! -s err.txt

# ---- batching -----------------------------------------------------------------------------

sc -m m.st --src src.ids --tgt tgt.ids --batch-size 1 >one.txt 2>/dev/null
check "each pair alone = in a batch of $N (within 1e-4)" awk -F'\t' '
    NR == FNR { t[NR] = $1; next }
    { d = t[FNR] - $1; if (d < 0) d = -d; if (d > 1e-4) { print FNR ": " t[FNR] " " $1; exit 1 } }' one.txt plain.txt
sed -n 7p src.ids >s7.ids; sed -n 7p tgt.ids >t7.ids
alone=$(sc -m m.st --src s7.ids --tgt t7.ids 2>/dev/null | cut -f1)
inbatch=$(sed -n 7p plain.txt | cut -f1)
check "pair 7 scored alone = in the batch ($alone, $inbatch)" near "$alone" "$inbatch" 1e-4
sc -m m.st --src src.ids --tgt tgt.ids --batch-tokens 50 --threads 2 >bt.txt 2>/dev/null
check "--batch-tokens 50 --threads 2: the same scores (within 1e-4)" awk -F'\t' '
    NR == FNR { t[NR] = $1; next }
    { d = t[FNR] - $1; if (d < 0) d = -d; if (d > 1e-4) exit 1 } END { if (FNR != NR / 2) exit 1 }' bt.txt plain.txt
sc -m m.st --src src.ids --tgt tgt.ids >again.txt 2>/dev/null
check "the same input gives the same bytes" cmp -s plain.txt again.txt

# ---- an independent computation: decode's greedy search -----------------------------------

# decode --scores prints log_prob / lp(n + 1): by default lp(m) = m^alpha
# with alpha 1 (the average log-prob per token); with --length-rule gnmt,
# lp(m) = ((5 + m) / 6)^alpha; with --length-penalty 0 the log-prob itself.
timeout $TMO "$ENC" -m m.st src.ids >src.npy
timeout $TMO "$DEC" -m m.st --beam 1 --scores --max-length 12 src.npy >greedy.txt
cut -f1 greedy.txt >greedy.ids
sc -m m.st --src src.ids --tgt greedy.ids >gs.txt 2>/dev/null
# lp_check FORMULA DECODED: decode's scores in DECODED = score -m's totals / lp
# (FORMULA in awk, of m = n + 1), within 1e-3.
lp_check() {
    awk -F'\t' -v f="$1" '
    NR == FNR { n[NR] = split($1, w, " "); s[NR] = $2; next }
    { m = n[FNR] + 1; lp = f == "power1" ? m : f == "gnmt0.6" ? ((5 + m) / 6) ^ 0.6 : m ^ 0.5
      d = $1 / lp - s[FNR]; if (d < 0) d = -d
      if (d > 1e-3) { print FNR ": " $1 / lp " vs " s[FNR]; exit 1 } }
    END { if (FNR != NR / 2) exit 1 }' "$2" gs.txt
}
check "the greedy hypotheses: decode's score (default: power, alpha 1) = score -m's total / (n + 1) (within 1e-3)" \
    lp_check power1 greedy.txt
timeout $TMO "$DEC" -m m.st --beam 1 --scores --max-length 12 --length-rule gnmt --length-penalty 0.6 \
    src.npy >greedyg.txt
cut -f1 greedyg.txt >greedyg.ids
check "--length-rule gnmt: greedy search's hypotheses do not depend on the rule" \
    cmp -s greedy.ids greedyg.ids
check "--length-rule gnmt: decode's score = score -m's total / ((5 + n + 1) / 6)^0.6 (within 1e-3)" \
    lp_check gnmt0.6 greedyg.txt
timeout $TMO "$DEC" -m m.st --beam 1 --scores --max-length 12 --length-rule power --length-penalty 0.5 \
    src.npy >greedyp.txt
check "--length-rule power --length-penalty 0.5: score = total / (n + 1)^0.5 (within 1e-3)" \
    lp_check power0.5 greedyp.txt
expect_status 2 "--length-rule bogus: a usage error" "$DEC" -m m.st --length-rule bogus src.npy
expect_stderr "power, gnmt" "--length-rule bogus: the error names the valid rules"
timeout $TMO "$DEC" -m m.st --beam 1 --scores --length-penalty 0 --max-length 12 src.npy >greedy0.txt
check "the greedy hypotheses: decode's log-prob (alpha 0) = score -m's total (within 1e-3)" awk -F'\t' '
    NR == FNR { s[NR] = $2; next }
    { d = $1 - s[FNR]; if (d < 0) d = -d; if (d > 1e-3) { print FNR ": " $1 " vs " s[FNR]; exit 1 } }
    END { if (FNR != NR / 2) exit 1 }' greedy0.txt gs.txt
# encode --no-eos and score --no-eos are the same convention.
timeout $TMO "$ENC" -m m.st --no-eos src.ids | timeout $TMO "$DEC" -m m.st --beam 1 --scores \
    --length-penalty 0 --max-length 12 >greedyne.txt
cut -f1 greedyne.txt >greedyne.ids
sc -m m.st --no-eos --src src.ids --tgt greedyne.ids >gsne.txt 2>/dev/null
check "--no-eos: agrees with encode --no-eos | decode (within 1e-3)" awk -F'\t' '
    NR == FNR { s[NR] = $2; next }
    { d = $1 - s[FNR]; if (d < 0) d = -d; if (d > 1e-3) exit 1 } END { if (FNR != NR / 2) exit 1 }' greedyne.txt gsne.txt
sc -m m.st --src src.ids --tgt greedyne.ids >gseos.txt 2>/dev/null
check "--no-eos changes the scores" sh -c '! cmp -s gsne.txt gseos.txt'
# A model marked as trained without </s> (train --no-eos): encode and score
# -m read it back, so it scores as --no-eos does with the unmarked model.
"$MK" --preset tiny --vocab v.vocab --seed 1 --no-eos -o noeos.st || fail "mkmodel --no-eos"
sc -m noeos.st --src src.ids --tgt greedyne.ids >gsne2.txt 2>/dev/null
check "a model trained with --no-eos: score -m reads it back" cmp -s gsne.txt gsne2.txt
timeout $TMO "$ENC" -m m.st --no-eos src.ids >ne1.npy
timeout $TMO "$ENC" -m noeos.st src.ids >ne2.npy
check "a model trained with --no-eos: encode reads it back" cmp -s ne1.npy ne2.npy

# ---- n-best lists (Marian's form) ----------------------------------------------------------

timeout $TMO "$DEC" -m m.st --beam 3 --nbest 3 --length-penalty 0 --max-length 10 src.npy >nb.txt
expect_status 0 "--nbest: exit 0" sc -m m.st --src src.ids --nbest nb.txt
cp out.txt nbs.txt
check "--nbest: a line per hypothesis" test "$(wc -l <nbs.txt)" -eq "$(wc -l <nb.txt)"
check "--nbest: ' Score= X' appended to the features, the rest unchanged" awk '
    NR == FNR { l[NR] = $0; next }
    { x = l[FNR]; sub(/ \|\|\| [^|]*$/, "", x); y = $0; sub(/ Score= -?[0-9.]+ \|\|\| [^|]*$/, "", y)
      if (x != y) { print "line " FNR; exit 1 } }' nb.txt nbs.txt
check "--nbest: Score (score -m) = F0 (decode's log-prob) within 1e-3" awk '
    { for (i = 1; i <= NF; i++) { if ($i == "F0=") f = $(i + 1); if ($i == "Score=") s = $(i + 1) }
      d = f - s; if (d < 0) d = -d; if (d > 1e-3) { print NR ": " f " vs " s; exit 1 } }' nbs.txt
sc -m m.st --src src.ids --nbest nb.txt -n --nbest-feature LM >nbn.txt 2>/dev/null
check "--nbest -n --nbest-feature LM: the average, named LM" awk '
    { for (i = 1; i <= NF; i++) { if ($i == "F0=") f = $(i + 1); if ($i == "LM=") s = $(i + 1) }
      split($0, p, " \\|\\|\\| "); n = split(p[2], w, " ") + 1
      d = f / n - s; if (d < 0) d = -d; if (d > 1e-3) exit 1 }' nbn.txt
printf '0 ||| 5 6 7 |||  ||| -1\n1 ||| 8 |||\n' >nbmin.txt
sc -m m.st --src src.ids --nbest nbmin.txt >got.txt 2>err.txt
# The list covers 2 of 30 sources: an error after the lines.
if [ "$(sed -n 1p got.txt | sed 's/-[0-9.]*/X/')" = "0 ||| 5 6 7 ||| Score= X ||| -1" ] &&
    [ "$(sed -n 2p got.txt | sed 's/-[0-9.]*/X/')" = "1 ||| 8 ||| Score= X" ] &&
    grep -q "^score: the n-best list in nbmin.txt covers 2 sentences but the sources in src.ids have $N lines" err.txt; then
    pass "--nbest: empty and missing fields; a list shorter than the sources is an error"
else fail "--nbest minimal: $(cat got.txt err.txt)"; fi
printf '1 ||| 5 |||\n0 ||| 5 |||\n' >nbbad.txt
expect_status 1 "--nbest out of order: exit 1" sc -m m.st --src src.ids --nbest nbbad.txt
expect_stderr '^score: nbbad\.txt:2: sentence 0 comes after sentence 1' "names the line"
printf '0 ||| 5 |||\n99 ||| 5 |||\n' >nbfar.txt
expect_status 1 "--nbest beyond the sources: exit 1" sc -m m.st --src src.ids --nbest nbfar.txt
expect_stderr "^score: nbfar\\.txt:2: sentence 99, but the sources in src\\.ids have $N lines" "names both"
printf 'zero ||| 5 |||\n' >nbword.txt
expect_status 1 "--nbest: a bad index" sc -m m.st --src src.ids --nbest nbword.txt
printf '0 5 6\n' >nbform.txt
expect_status 1 "--nbest: not an n-best line" sc -m m.st --src src.ids --nbest nbform.txt
expect_stderr "^score: nbform\\.txt:1: not an n-best line" "says so"

# ---- --text ---------------------------------------------------------------------------------

sc -m m.st --text --src src.txt --tgt tgt.txt >text.txt 2>/dev/null
check "--text: the same as tokenize -m then id lines" cmp -s text.txt plain.txt
sc -m m.st --src src.txt --tgt tgt.txt >auto.txt 2>auto.err
check "without --text, text files are read as text: what --text gives" cmp -s auto.txt text.txt
# strings that start with an empty line and numbers, as real catalogs do
{ echo; echo 42; echo 2026; sed -n 4,30p src.txt; } >num-src.txt
{ echo; echo 42; echo 2026; sed -n 4,30p tgt.txt; } >num-tgt.txt
sc -m m.st --text --src num-src.txt --tgt num-tgt.txt >num-text.txt 2>/dev/null
expect_status 0 "without --text, strings that start with an empty line and numbers: scored" \
    sc -m m.st --src num-src.txt --tgt num-tgt.txt
check "... as text, as --text scores them" cmp -s out.txt num-text.txt

# ---- edges ----------------------------------------------------------------------------------

head -29 tgt.ids >tgt29.ids
expect_status 1 "mismatched line counts: exit 1" sc -m m.st --src src.ids --tgt tgt29.ids
expect_stderr "^score: sources in src\\.ids have $N lines but targets in tgt29\\.ids have 29 lines\$" \
    "the message names both counts"
check "... after the 29 pairs that can be scored" test "$(wc -l <out.txt)" -eq 29
{ head -2 tgt.ids; echo "5 $V 7"; tail -n +4 tgt.ids; } >badtgt.ids
expect_status 1 "an id outside the vocabulary: exit 1" sc -m m.st --src src.ids --tgt badtgt.ids
expect_stderr "^score: badtgt\\.ids:3: column 3: id $V is outside the vocabulary" "names the file and line"
check "... after the lines before it" test "$(wc -l <out.txt)" -eq 2
{ echo "1 x 2"; tail -n +2 src.ids; } >badsrc.ids
expect_status 1 "a malformed source line: exit 1" sc -m m.st --src badsrc.ids --tgt tgt.ids
expect_stderr "^score: badsrc\\.ids:1: column 3: expected a token id" "names the source file and line"
expect_stderr "\\(the file was read as id lines: 29 of its first 30 non-empty lines are\\)" \
    "... and says why the file was read as ids"
printf '5 0 7\n' >padtgt.ids
expect_status 1 "<pad> in a target: exit 1" sc -m m.st --src s7.ids --tgt padtgt.ids
expect_stderr "^score: padtgt\\.ids:1: token 2: id 0 is <pad>" "says <pad> cannot be scored"

printf '\n' >empty1.ids
expect_status 0 "an empty target line: exit 0" sc -m m.st --src s7.ids --tgt empty1.ids --per-token
if awk -F'\t' 'NF == 3 && $1 == $2 && $1 == $3 && $1 < 0 { ok = 1 } END { exit !ok }' out.txt; then
    pass "an empty target: the score of </s> alone (total = average = its one per-token value)"
else fail "empty target: $(cat out.txt)"; fi
expect_status 0 "an empty source line: exit 0" sc -m m.st --src empty1.ids --tgt t7.ids
check "... and a score" grep -qE '^-[0-9]+\.[0-9]+	-[0-9]+\.[0-9]+$' out.txt
: >empty.ids
expect_status 0 "empty files: exit 0" sc -m m.st --src empty.ids --tgt empty.ids
check "... no output" test ! -s out.txt

# A model of 16 positions: longer sources are cropped (as encode crops them);
# a longer target gets an empty line and a warning.
"$MK" --preset tiny --vocab v.vocab --seed 1 --max-positions 16 -o m16.st || fail "mkmodel --max-positions 16"
printf '5 6 7\n' >short.ids
awk 'BEGIN { for (i = 0; i < 20; i++) printf "%d ", 10 + i; print "" }' >long.ids
cat short.ids long.ids short.ids >tgtlong.ids
cat short.ids short.ids short.ids >src3.ids
expect_status 0 "a target too long for the model: exit 0" sc -m m16.st --src src3.ids --tgt tgtlong.ids
if [ "$(wc -l <out.txt)" -eq 3 ] && [ -z "$(sed -n 2p out.txt)" ] && [ -n "$(sed -n 3p out.txt)" ] &&
    grep -q '^score: tgtlong\.ids:2: warning: the target has 20 ids; the model scores at most 15' err.txt; then
    pass "... an empty line for it and a warning naming the line"
else fail "over-long target: $(cat out.txt err.txt)"; fi
expect_status 0 "a source too long: cropped" sc -m m16.st --src long.ids --tgt short.ids
expect_stderr '^score: long\.ids:1: warning: 20 ids are more than the 16 tokens the model takes' "with a warning"

# ---- usage errors -----------------------------------------------------------------------------

expect_status 2 "-m without --src" sc -m m.st --tgt tgt.ids
expect_stderr '^score: the sources are required' "says --src is required"
expect_status 2 "-m without --tgt or --nbest" sc -m m.st --src src.ids
expect_status 2 "--tgt and --nbest together" sc -m m.st --src src.ids --tgt tgt.ids --nbest nb.txt
expect_status 2 "a metric and -m" sc bleu -m m.st --src src.ids --tgt tgt.ids
expect_stderr "^score: -m is for scoring with a model" "says the metric does not go with -m"
expect_status 2 "a metric option with -m" sc -m m.st -r tgt.txt --src src.ids --tgt tgt.ids
expect_stderr "^score: -r is an option of the metrics" "names the option"
expect_status 2 "--src without -m" sc --src src.ids --tgt tgt.ids
expect_status 2 "--per-token with --nbest" sc -m m.st --src src.ids --nbest nb.txt --per-token
expect_status 2 "--nbest-feature with a space" sc -m m.st --src src.ids --nbest nb.txt --nbest-feature 'a b'
expect_status 2 "FILE operands with -m" sc -m m.st --src src.ids --tgt tgt.ids tgt.ids
expect_status 1 "a missing model file" sc -m nothere.st --src src.ids --tgt tgt.ids

# ---- an interactive pipe: each pair is answered before the next comes ---------------------------

rm -f fifo; mkfifo fifo
( timeout "$TMO" "$SCORE" -m m.st --src src.ids --tgt - <fifo >live.txt 2>live.err; echo $? >live.rc ) &
pid=$!
exec 3>fifo
sed -n 1p tgt.ids >&3
n=0; while [ $n -lt 100 ] && [ ! -s live.txt ]; do sleep 0.1; n=$((n + 1)); done
if [ -s live.txt ] && near "$(cut -f1 live.txt)" "$(sed -n 1p plain.txt | cut -f1)" 1e-4; then
    pass "the first pair is answered at once"
else fail "the first pair was held back ($(cat live.txt live.err))"; fi
tail -n +2 tgt.ids >&3
exec 3>&-
wait $pid
check "... then the rest, exit 0" sh -c "[ \"\$(cat live.rc)\" = 0 ] && awk -F'\t' 'NR == FNR { t[NR] = \$1; next } { d = t[FNR] - \$1; if (d < 0) d = -d; if (d > 1e-4) exit 1 }' live.txt plain.txt && [ \$(wc -l <live.txt) -eq $N ]"
