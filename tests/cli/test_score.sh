#!/bin/sh
# test_score.sh - end-to-end tests of score(1): the exact lines and JSON
# sacreBLEU 2.3.1 prints for its README example (mjpost/sacrebleu README.md,
# "Using SacreBLEU from Python": BLEU = 48.53 82.4/50.0/45.5/37.5 ..., chrF2 =
# 59.73, and nrefs:var with an empty reference: BLEU = 29.44 ...), sentence
# scores, several references, tokenizers on Unicode punctuation, confidence
# intervals and the paired bootstrap, and the edges: empty lines, empty and
# mismatched files, CRLF, invalid UTF-8, usage errors, line-by-line answers
# in an interactive pipe, and the same output whatever the thread count.
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_score.sh
. "$ROOT/tests/cli/lib.sh"

SCORE="$BIN/score"
TMO=${SCORE_TEST_TIMEOUT:-60}
if [ ! -x "$SCORE" ]; then fail "no $SCORE"; exit 0; fi

sc() { timeout "$TMO" "$SCORE" "$@"; }

# same NAME EXPECTED-TEXT COMMAND...: passes when the command exits 0 and
# prints exactly EXPECTED-TEXT (plus the final newline).
same() {
    name=$1 want=$2; shift 2
    "$@" >got.txt 2>err.txt; rc=$?
    printf '%s\n' "$want" >want.txt
    if [ "$rc" -eq 0 ] && cmp -s want.txt got.txt; then pass "$name"; else
        fail "$name (exit $rc)"
        diff want.txt got.txt | head -10 | sed 's/^/    /'
        sed 's/^/    stderr: /' err.txt | head -5
    fi
}

# The README example: three hypotheses, two reference files.
printf '%s\n' 'The dog bit the man.' "It wasn't surprising." 'The man had just bitten him.' >hyp.txt
printf '%s\n' 'The dog bit the man.' 'It was not unexpected.' 'The man bit him first.' >ref1.txt
printf '%s\n' 'The dog had bit the man.' 'No one was surprised.' 'The man had bitten the dog.' >ref2.txt

SIG='nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1'
same "bleu, two references: sacreBLEU's line" \
    "BLEU|$SIG = 48.5 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)" \
    sc bleu -r ref1.txt -r ref2.txt hyp.txt
same "bleu from standard input, 2 decimals" \
    "BLEU|$SIG = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)" \
    sc bleu -r ref1.txt -r ref2.txt -w 2 - <hyp.txt
same "bleu -b: the number alone" "48.53" sc bleu -r ref1.txt --ref=ref2.txt -b -w 2 hyp.txt
same "chrf: sacreBLEU's line" \
    "chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.3.1 = 59.73" \
    sc chrf -r ref1.txt -r ref2.txt -w 2 hyp.txt
# 6 edits (0 + 3 + 3, counted by hand) over mean reference lengths 5.5 + 4 + 5.5.
same "ter: hand-computed" \
    "TER|nrefs:2|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.3.1 = 40.0" \
    sc ter -r ref1.txt -r ref2.txt hyp.txt
sc chrf++ -r ref1.txt -r ref2.txt hyp.txt >got.txt 2>err.txt
check "chrf++: chrF2++ with nw:2" grep -q '^chrF2++|nrefs:2|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.3.1 = [0-9]*\.[0-9]$' got.txt

same "bleu -f json: sacreBLEU's JSON" '{
 "name": "BLEU",
 "score": 48.5,
 "signature": "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1",
 "verbose_score": "82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)",
 "nrefs": "2",
 "case": "mixed",
 "eff": "no",
 "tok": "13a",
 "smooth": "exp",
 "version": "2.3.1"
}' sc bleu -r ref1.txt -r ref2.txt -f json hyp.txt

# README, variable number of references: the first reference of line 1 is
# empty.  sacreBLEU 2.3.1's command line (and its API given '') keeps it as
# a reference of no words: nrefs:2, the README's score.
printf '%s\n' '' 'It was not unexpected.' 'The man bit him first.' >ref1var.txt
same "an empty reference among two: scored as sacreBLEU 2.3.1 scores it (README)" \
    "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1 = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)" \
    sc bleu -r ref1var.txt -r ref2.txt -w 2 hyp.txt

# CRLF references and trailing spaces are stripped as sacreBLEU strips them.
sed 's/$/  \r/' ref1.txt >ref1crlf.txt
sed 's/$/  \r/' ref2.txt >ref2crlf.txt
same "CRLF and trailing spaces change nothing" \
    "BLEU|$SIG = 48.5 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)" \
    sc bleu -r ref1crlf.txt -r ref2crlf.txt hyp.txt

# --lowercase and sacreBLEU's spelling -lc.
sc bleu -lc -r ref1.txt hyp.txt >got.txt 2>err.txt
check "-lc: case:lc in the signature" grep -q '^BLEU|nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|' got.txt
sc bleu --smooth floor --smooth-value 0.5 -r ref1.txt hyp.txt >got.txt 2>err.txt
check "--smooth floor: smooth:floor[0.50]" grep -q '|smooth:floor\[0.50\]|version:2.3.1 = ' got.txt
sc ter --case-sensitive --no-punct -r ref1.txt hyp.txt >got.txt 2>err.txt
check "ter options in the signature" grep -q '^TER|nrefs:1|case:mixed|tok:tercom|norm:no|punct:no|asian:no|' got.txt

# --sentence: one line out per line in, eff:yes, sacreBLEU's per-line format.
sc bleu -r ref1.txt --sentence hyp.txt >got.txt 2>err.txt
if [ "$(wc -l <got.txt)" -eq 3 ] && [ "$(grep -c '^BLEU|nrefs:1|case:mixed|eff:yes|' got.txt)" -eq 3 ] &&
    head -1 got.txt | grep -q ' = 100.0 100.0/100.0/100.0/100.0 ' &&
    sed -n 2p got.txt | grep -q ' = 14.8 50.0/16.7/12.5/12.5 (BP = 0.779 ratio = 0.800 hyp_len = 4 ref_len = 5)$'; then
    pass "--sentence: one sentence BLEU per line (hand-checked)"
else fail "--sentence: $(head -c 300 got.txt)"; fi
# A line that cannot be taken (invalid UTF-8 with --strict): the lines
# before it are scored and printed first, then the error names it.
printf 'a b c\nd e f\n\377\376\ng\n' >bad8.txt
sc bleu -r bad8.txt --sentence --strict bad8.txt >got.txt 2>err.txt
check "--sentence --strict, invalid UTF-8 on line 3: the two lines before it are printed" \
    test "$(wc -l <got.txt | tr -d ' ')" -eq 2
check "--sentence --strict, invalid UTF-8 on line 3: the error names bad8.txt:3" \
    grep -q '^score: bad8.txt:3: invalid UTF-8' err.txt
sc chrf -r ref1.txt --sentence -f json hyp.txt >got.txt 2>err.txt
if [ "$(wc -l <got.txt)" -eq 3 ] && [ "$(grep -c '^{"name": "chrF2", "score": [0-9.]*, "signature": ' got.txt)" -eq 3 ]; then
    pass "--sentence -f json: one JSON object per line"
else fail "--sentence -f json: $(head -c 300 got.txt)"; fi
py=$(python_numpy)
if [ -n "$py" ]; then
    if "$py" -c 'import json,sys; [json.loads(l) for l in open("got.txt")]' 2>/dev/null; then
        pass "--sentence -f json parses as JSON"
    else fail "--sentence -f json does not parse"; fi
else skip "no python3 to parse JSON"; fi

# Empty lines: an empty hypothesis is scored (as sacreBLEU: not removed),
# and so is an empty reference, or one of spaces.
printf '%s\n' 'The dog bit the man.' '' 'The man had just bitten him.' >hypempty.txt
expect_status 0 "an empty hypothesis line is scored" sc bleu -r ref1.txt hypempty.txt
grep -q 'hyp_len = 13 ref_len = ' out.txt && pass "the empty hypothesis counts 0 words" || fail "empty hypothesis: $(cat out.txt)"
# The values sacreBLEU 2.3.1 prints for these files (its command line, -w 2):
# references empty, of spaces, and empty against an empty hypothesis.
printf '%s\n' 'The dog bit the man.' 'foo bar' 'baz' '' '' 'It was not unexpected.' >hypsp.txt
printf '%s\n' 'The dog bit the man.' '' '   ' '' 'x y' 'It was not unexpected at all.' >refsp1.txt
printf '%s\n' 'The dog bit the man!' 'a foo' '' '  ' 'x' '' >refsp2.txt
for case in \
    "bleu|-r refsp1.txt|BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1 = 75.44 78.6/80.0/85.7/80.0 (BP = 0.931 ratio = 0.933 hyp_len = 14 ref_len = 15)" \
    "bleu|-r refsp1.txt -r refsp2.txt|BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1 = 71.78 85.7/80.0/85.7/80.0 (BP = 0.867 ratio = 0.875 hyp_len = 14 ref_len = 16)" \
    "chrf|-r refsp1.txt|chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.3.1 = 84.68" \
    "chrf|-r refsp1.txt -r refsp2.txt|chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.3.1 = 83.37" \
    "chrf++|-r refsp1.txt|chrF2++|nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.3.1 = 82.00" \
    "chrf++|-r refsp1.txt -r refsp2.txt|chrF2++|nrefs:2|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.3.1 = 79.89" \
    "ter|-r refsp1.txt|TER|nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.3.1 = 61.54" \
    "ter|-r refsp1.txt -r refsp2.txt|TER|nrefs:2|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.3.1 = 66.67"; do
    metric=${case%%|*}; rest=${case#*|}; refs=${rest%%|*}; want=${rest#*|}
    # shellcheck disable=SC2086 # refs is a list of options
    same "empty and blank references, $metric $refs: sacreBLEU 2.3.1's numbers" "$want" \
        sc "$metric" $refs -w 2 hypsp.txt
done
sc ter --sentence -b -w 2 -r refsp1.txt hypsp.txt >got.txt 2>err.txt
check "TER --sentence: 100 against a reference of no words, the empty hypothesis too" \
    test "$(tr '\n' ' ' <got.txt)" = "0.00 100.00 100.00 100.00 100.00 50.00 " -a ! -s err.txt
sc chrf --sentence -b -w 2 -r refsp1.txt hypsp.txt >got.txt 2>err.txt
check "chrF --sentence: 0 against a reference of no words" \
    test "$(tr '\n' ' ' <got.txt)" = "100.00 0.00 0.00 0.00 0.00 76.17 " -a ! -s err.txt

# Files of different lengths: both counts and both names.
head -2 hyp.txt >hyp2.txt
expect_status 1 "fewer hypotheses than references: exit 1" sc bleu -r ref1.txt hyp2.txt
expect_stderr '^score: hypotheses in hyp2\.txt have 2 lines but ref1\.txt has 3 lines$' "the message gives both counts"
printf 'x\n' >>ref2long.txt; cat ref2.txt ref2long.txt >ref2plus.txt
expect_status 1 "a longer second reference: exit 1" sc bleu -r ref1.txt -r ref2plus.txt hyp.txt
expect_stderr '^score: hypotheses in hyp\.txt have 3 lines but ref2plus\.txt has 4 lines$' "names the reference that differs"
expect_status 1 "hypotheses from standard input, one line short" sh -c "head -2 hyp.txt | timeout $TMO '$SCORE' chrf -r ref1.txt"
expect_stderr '^score: hypotheses in standard input have 2 lines but ref1\.txt has 3 lines$' "standard input is named"

# Empty files.
: >empty.txt
expect_status 1 "empty hypotheses and references: exit 1" sc bleu -r empty.txt empty.txt
expect_stderr '^score: no lines to score' "says there is nothing to score"
expect_status 1 "empty hypotheses, non-empty references" sc bleu -r ref1.txt empty.txt
expect_stderr 'have 0 lines but ref1\.txt has 3 lines' "0 lines against 3"

# Unicode punctuation: 13a leaves « » — attached, intl splits them (Unicode
# category P), so intl matches a reference that spells them apart.
printf '%s\n' '«Hallo», sagte er — und ging.' >uhyp.txt
printf '%s\n' '« Hallo » , sagte er — und ging .' >uref.txt
same "intl splits Unicode punctuation" "100.0" sc bleu --tokenize intl -b -r uref.txt uhyp.txt
sc bleu -b -r uref.txt uhyp.txt >got.txt 2>err.txt
if [ "$(cat got.txt)" != "100.0" ] && grep -qE '^[0-9]+\.[0-9]$' got.txt; then pass "13a does not split « »"
else fail "13a on « »: $(cat got.txt)"; fi
printf '%s\n' '价格是3.5元。' >zhhyp.txt
printf '%s\n' '价 格 是 3.5 元 。' >zhref.txt
same "zh splits CJK characters" "100.0" sc bleu --tokenize zh -b -r zhref.txt zhhyp.txt

# Invalid UTF-8: replaced with a warning naming the line, or an error with --strict.
printf 'The dog bit the man.\nIt was\377 surprising.\nThe man had just bitten him.\n' >badhyp.txt
expect_status 0 "invalid UTF-8 is repaired" sc bleu -r ref1.txt badhyp.txt
expect_stderr '^score: badhyp\.txt:2: warning: invalid UTF-8' "the warning names the line"
expect_status 1 "--strict: invalid UTF-8 is an error" sc bleu --strict -r ref1.txt badhyp.txt
expect_stderr '^score: badhyp\.txt:2: ' "the error names the line"

# A bigger corpus: references from tests/data, hypotheses perturbed.
awk 'NR <= 1500 { n = split($0, w, " "); s = "";
       for (i = 1; i <= n; i++) { if ((i + NR) % 7 == 0) continue; if ((i * NR) % 11 == 0) w[i] = "x" w[i]; s = s (s == "" ? "" : " ") w[i] }
       print s }' "$ROOT/tests/data/corpus-small.txt" >bhyp.txt
head -1500 "$ROOT/tests/data/corpus-small.txt" >bref.txt
awk 'NR <= 1500 { n = split($0, w, " "); s = "";
       for (i = 1; i <= n; i++) { if ((i + NR) % 5 == 0) continue; s = s (s == "" ? "" : " ") w[i] } print s }' \
    "$ROOT/tests/data/corpus-small.txt" >bhyp2.txt
for metric in bleu chrf ter; do
    sc $metric -r bref.txt --threads 1 --confidence bhyp.txt >t1.txt 2>err.txt
    sc $metric -r bref.txt --threads 3 --confidence bhyp.txt >t3.txt 2>>err.txt
    if [ -s t1.txt ] && cmp -s t1.txt t3.txt; then pass "$metric --confidence: the same with 1 and 3 threads"
    else fail "$metric: threads change the output: $(cat t1.txt t3.txt err.txt | head -c 400)"; fi
done
if grep -q '^TER|nrefs:1|bs:1000|seed:12345|case:lc|tok:tercom|.* = [0-9.]* (μ = [0-9.]* ± [0-9.]*)$' t1.txt; then
    pass "--confidence: sacreBLEU's (μ = mean ± ci) and bs/seed in the signature"
else fail "--confidence format: $(cat t1.txt)"; fi
sc bleu -r bref.txt --confidence --seed 7 bhyp.txt >t7.txt 2>err.txt
sc bleu -r bref.txt --confidence bhyp.txt >t12345.txt 2>>err.txt
if grep -q 'seed:7|' t7.txt && ! cmp -s t7.txt t12345.txt; then pass "--seed changes the resamples"
else fail "--seed: $(cat t7.txt t12345.txt)"; fi
# The corpus score does not depend on the batching of lines.
sc bleu -r bref.txt -b -w 6 bhyp.txt >whole.txt 2>err.txt
cat bhyp.txt | sc bleu -r bref.txt -b -w 6 >piped.txt 2>>err.txt
if [ -s whole.txt ] && cmp -s whole.txt piped.txt; then pass "file and pipe give the same score"
else fail "file vs pipe: $(cat whole.txt piped.txt)"; fi

# The paired bootstrap: signature, then a row per system.  As in sacreBLEU,
# the baseline given again is left out, while an identical copy under another
# name gets p = 1/(N+1): no resample differs by more than the real 0.
cp bhyp.txt bcopy.txt
expect_status 0 "--paired-bs: exit 0" sc bleu -r bref.txt --paired-bs bhyp.txt bhyp2.txt bhyp.txt bcopy.txt
if [ "$(wc -l <out.txt)" -eq 4 ] &&
    head -1 out.txt | grep -q '^BLEU|nrefs:1|bs:1000|seed:12345|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1$' &&
    sed -n 2p out.txt | grep -qP '^baseline\t[0-9.]+ \(μ = [0-9.]+ ± [0-9.]+\)\t\tbhyp\.txt$' &&
    sed -n 3p out.txt | grep -qP '^system\t[0-9.]+ \(μ = [0-9.]+ ± [0-9.]+\)\t\(p = 0\.[0-9]{4}\)\*?\tbhyp2\.txt$' &&
    sed -n 4p out.txt | grep -qP '^system\t.*\t\(p = 0\.0010\)\*\tbcopy\.txt$'; then
    pass "--paired-bs: a row per system; the baseline repeated is left out; a copy gets p = 1/1001"
else fail "--paired-bs output: $(head -c 500 out.txt)"; fi
base=$(sed -n 2p out.txt | cut -f2); copy=$(sed -n 4p out.txt | cut -f2)
if [ -n "$base" ] && [ "$base" = "$copy" ]; then pass "--paired-bs: the same resamples for every system"
else fail "--paired-bs: baseline '$base' vs its copy '$copy'"; fi
sc bleu -r bref.txt --paired-bs --paired-bs-n 100 -b bhyp.txt bhyp2.txt >got.txt 2>err.txt
if [ "$(wc -l <got.txt)" -eq 2 ] && sed -n 1p got.txt | grep -qE '^[0-9]+\.[0-9]$' &&
    sed -n 2p got.txt | grep -qP '^[0-9]+\.[0-9]\t0\.[0-9]{4}$'; then pass "--paired-bs -b: scores and the p-value"
else fail "--paired-bs -b: $(cat got.txt err.txt)"; fi
expect_status 2 "--paired-bs: a system given twice" sc bleu -r bref.txt --paired-bs bhyp.txt bhyp2.txt bhyp2.txt
if [ -n "$py" ]; then
    sc ter -r bref.txt --paired-bs --paired-bs-n 200 -f json bhyp.txt bhyp2.txt >got.txt 2>err.txt
    if "$py" -c 'import json; d = json.load(open("got.txt")); s = d["systems"]; assert d["n_samples"] == 200 and s[0]["baseline"] and 0 < s[1]["p_value"] <= 1' 2>err.txt; then
        pass "--paired-bs -f json parses, with a p-value"
    else fail "--paired-bs -f json: $(head -c 300 got.txt) $(cat err.txt)"; fi
fi

# The tokenized-period warning (sacreBLEU's), and --force.
i=0; while [ $i -lt 120 ]; do echo "a tokenized line ."; i=$((i + 1)); done >tok.txt
expect_status 0 "tokenized hypotheses: scored" sc bleu -r tok.txt tok.txt
expect_stderr "120 lines end in a tokenized period" "a warning about the tokenized period"
expect_status 0 "--force: scored" sc bleu --force -r tok.txt tok.txt
if [ ! -s err.txt ]; then pass "--force: no warning"; else fail "--force still warns: $(cat err.txt)"; fi

# Usage errors: exit 2 with a message.
expect_status 2 "no metric" sc -r ref1.txt hyp.txt
expect_stderr '^score: a metric is required' "says a metric is required"
expect_status 2 "no reference" sc bleu hyp.txt
expect_stderr 'a reference is required' "says a reference is required"
expect_status 2 "a chrF option for BLEU" sc bleu --beta 3 -r ref1.txt hyp.txt
expect_stderr "^score: --beta is an option of 'score chrf'" "names the option and its metric"
expect_status 2 "--lowercase for TER" sc ter --lowercase -r ref1.txt hyp.txt
expect_status 2 "--smooth-value without floor or add-k" sc bleu --smooth-value 0.5 -r ref1.txt hyp.txt
expect_status 2 "an unknown tokenizer" sc bleu --tokenize 13b -r ref1.txt hyp.txt
expect_stderr "'13b' is not one of: 13a, intl, zh, char, none" "lists the tokenizers"
expect_status 2 "--sentence with --confidence" sc bleu --sentence --confidence -r ref1.txt hyp.txt
expect_status 2 "two hypothesis files without --paired-bs" sc bleu -r ref1.txt hyp.txt hyp.txt
expect_status 2 "--paired-bs with one file" sc bleu --paired-bs -r ref1.txt hyp.txt
expect_status 2 "standard input twice" sc bleu -r - -
expect_status 2 "--width out of range" sc bleu -w 99 -r ref1.txt hyp.txt
expect_status 1 "a missing reference file" sc bleu -r nothere.txt hyp.txt
expect_stderr '^score: nothere\.txt: No such file or directory$' "names the missing file"

# --version names the sacreBLEU release the numbers follow.
sc --version >got.txt 2>err.txt
check "--version names sacreBLEU 2.3.1" grep -q 'sacreBLEU 2.3.1' got.txt

# An interactive pipe: --sentence answers each line before the next comes.
head -2 ref1.txt >ref1two.txt
rm -f fifo; mkfifo fifo
( timeout "$TMO" "$SCORE" bleu --sentence -b -r ref1two.txt <fifo >live.txt 2>live.err; echo $? >live.rc ) &
pid=$!
exec 3>fifo
echo 'The dog bit the man.' >&3
n=0; while [ $n -lt 100 ] && [ ! -s live.txt ]; do sleep 0.1; n=$((n + 1)); done
if [ -s live.txt ] && [ "$(cat live.txt)" = "100.0" ]; then pass "--sentence answers a line at once"
else fail "--sentence held the line back ($(cat live.txt live.err))"; fi
echo 'It was not unexpected.' >&3
exec 3>&-
wait $pid
if [ "$(cat live.rc)" = 0 ] && [ "$(sed -n 2p live.txt)" = "100.0" ]; then pass "... and the next one, then exits 0"
else fail "interactive run: exit $(cat live.rc), output $(cat live.txt live.err)"; fi
