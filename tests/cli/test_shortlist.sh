#!/bin/sh
# test_shortlist.sh - lexical shortlists: 'train shortlist' learns one from a
# parallel corpus, 'decode --shortlist --source' decodes each batch over its
# candidates.  On a tiny random model (tools/mkmodel): a shortlist holding
# every target piece gives the translations and scores of no shortlist,
# byte for byte (greedy, beam, n-best); a narrow one (one candidate per
# source piece, no frequent ones) gives each sentence at most as many
# distinct ids as its source has pieces, and keeps forced prefixes; bad
# input (a shortlist of another model, a short or missing source, a cut
# file, corpora of different lengths, ids beyond the vocabulary) is refused
# with a message that names the file.
. "$ROOT/tests/cli/lib.sh"

TOK="$BIN/tokenize" ENC="$BIN/encode" DEC="$BIN/decode" TRAIN="$BIN/train"
MK="$BUILD/tools/mkmodel"
for p in "$TOK" "$ENC" "$DEC" "$TRAIN" "$MK"; do
    [ -x "$p" ] || { fail "$p is not built"; exit 0; }
done
CORPUS="$ROOT/tests/data/corpus-small.txt"

"$TOK" learn --vocab-size 2000 --soft-vocab-limit -q "$CORPUS" -o v.vocab ||
    { fail "tokenize learn"; exit 0; }
"$MK" --preset tiny --vocab v.vocab --seed 3 -o m.st || { fail "mkmodel"; exit 0; }
# a corpus whose target is its source reversed, word by word
head -400 "$CORPUS" >train.src
reverse <train.src >train.tgt
"$TOK" -m m.st <train.src >train.src.ids
"$TOK" -m m.st <train.tgt >train.tgt.ids
sed -n '401,440p' "$CORPUS" >test.txt
"$TOK" -m m.st <test.txt >test.ids
"$ENC" -q -m m.st <test.ids >test.npy

# ---- learning -------------------------------------------------------------------------

expect_status 0 "train shortlist: learns from id lines" \
    "$TRAIN" shortlist -m m.st --src train.src.ids --tgt train.tgt.ids -o sl.st
check "train shortlist: the file is safetensors marked tfm-shortlist" \
    grep -aq '"format":"tfm-shortlist"' sl.st
expect_status 0 "train shortlist --text: learns from the text itself" \
    "$TRAIN" shortlist -m m.st --text --src train.src --tgt train.tgt -o sl-text.st
check "--text and id lines give the same file" cmp -s sl.st sl-text.st
expect_status 0 "train shortlist --help" "$TRAIN" shortlist --help
check "--help names its defaults" grep -q 'default 50' out.txt
expect_status 2 "train shortlist without -o: usage error" \
    "$TRAIN" shortlist -m m.st --src train.src.ids --tgt train.tgt.ids
head -10 train.tgt.ids >short.ids
expect_status 1 "corpora of different lengths: refused" \
    "$TRAIN" shortlist -m m.st --src train.src.ids --tgt short.ids -o bad.st
expect_stderr "short.ids.*ends before" "... naming the file that ended first"
{ head -4 train.src.ids; echo "5 99999 6"; } >beyond.ids
head -5 train.tgt.ids >five.ids
expect_status 1 "an id beyond the vocabulary: refused" \
    "$TRAIN" shortlist -m m.st --src beyond.ids --tgt five.ids -o bad.st
expect_stderr "beyond.ids:5:" "... naming the file and the line"
check "nothing is written on a failure" test ! -e bad.st

# ---- decoding ------------------------------------------------------------------------------

# every target piece a candidate: the same search as without a shortlist
"$TRAIN" shortlist -q -m m.st --src train.src.ids --tgt train.tgt.ids --frequent 100000 \
    -o all.st
for opts in "--greedy" "--beam 4" "--beam 3 --nbest 3"; do
    "$DEC" -q -m m.st $opts --scores --max-length 12 <test.npy >full.txt
    "$DEC" -q -m m.st $opts --scores --max-length 12 --shortlist all.st --source test.txt \
        <test.npy >wide.txt
    check "a shortlist of every piece, $opts: the same lines and scores, byte for byte" \
        cmp -s full.txt wide.txt
done

# one candidate per source piece, no frequent ones, a batch per sentence:
# a line holds at most as many distinct ids as its source has pieces
"$TRAIN" shortlist -q -m m.st --src train.src.ids --tgt train.tgt.ids --frequent 0 \
    --per-source 1 -o one.st
"$DEC" -q -m m.st --beam 4 --max-length 12 --batch-size 1 --shortlist one.st --source test.txt \
    <test.npy >narrow.txt
check "a narrow shortlist: one line per record" test "$(lines_of narrow.txt)" -eq "$(lines_of test.txt)"
paste -d '|' test.ids narrow.txt | awk -F'|' '{
        ns = split($1, s, " "); delete seen; n = 0
        for (i = 1; i <= ns; i++) if (!(s[i] in seen)) { seen[s[i]] = 1; n++ }
        nt = split($2, t, " "); delete out; m = 0
        for (i = 1; i <= nt; i++) if (!(t[i] in out)) { out[t[i]] = 1; m++ }
        if (m > n) bad++
    } END { exit bad > 0 }'
check "a narrow shortlist: no line has more distinct ids than its source has pieces" test $? -eq 0
# the file read by hand (safetensors: a length, a JSON header, the data):
# every output id of a line is a candidate of one of its source pieces
py=$(python_any)
if [ -n "$py" ]; then
    "$py" - one.st test.ids narrow.txt <<'PY' >outside.txt
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), raw[8 + n:]
def ints(name):
    a, b = head[name]["data_offsets"]
    return struct.unpack("<%di" % ((b - a) // 4), data[a:b])
rows, per = head["candidates"]["shape"]
cand, frequent = ints("candidates"), set(ints("frequent"))
for src, out in zip(open(sys.argv[2]), open(sys.argv[3])):
    ok = set(frequent)
    for s in src.split():
        ok.update(c for c in cand[int(s) * per:(int(s) + 1) * per] if c >= 0)
    print(sum(1 for t in out.split() if int(t) not in ok))
PY
    check "a narrow shortlist: every output id is a candidate of its source's pieces" \
        test "$(awk '{ n += $1 } END { print n + 0 }' outside.txt)" -eq 0
    check "... and the check sees something: ids came out" test -s narrow.txt
else
    skip "the narrow shortlist's candidates read by hand: no python3"
fi
awk '{ print "5 6 7" }' test.ids >prefix.txt
"$DEC" -q -m m.st --greedy --max-length 12 --shortlist one.st --source test.txt \
    --prefix prefix.txt <test.npy >prefixed.txt
check "a narrow shortlist keeps every forced prefix" \
    test "$(grep -c '^5 6 7' prefixed.txt)" -eq "$(lines_of test.txt)"
expect_status 0 "decode -v says what the shortlist holds" \
    "$DEC" -v -m m.st --greedy --shortlist one.st --source test.txt test.npy
expect_stderr "shortlist: the 0 most frequent target pieces and the 1 best" "... in one line"
expect_stderr "decoded over [0-9]+ of the [0-9]+ target pieces on average" \
    "... and how many pieces the batches were decoded over"
"$TRAIN" shortlist -q -m m.st --src train.src.ids --tgt train.tgt.ids --per-source 1 -o one100.st
"$DEC" -q -m m.st --beam 4 --max-length 12 --scores --shortlist one100.st --source test.txt \
    <test.npy >one100.txt
"$DEC" -q -m m.st --beam 4 --max-length 12 --scores --shortlist sl.st --shortlist-best 1 \
    --source test.txt <test.npy >best1.txt
check "--shortlist-best 1 of a shortlist of 50: the shortlist of 1, byte for byte" \
    cmp -s one100.txt best1.txt

# ---- bad input ------------------------------------------------------------------------------

expect_status 2 "--shortlist without --source: usage error" \
    "$DEC" -m m.st --shortlist sl.st test.npy
expect_stderr "needs the source text: --source" "... saying what is missing"
expect_status 2 "--source without --shortlist: usage error" "$DEC" -m m.st --source test.txt test.npy
head -5 test.txt >five.txt
expect_status 1 "a source with fewer lines than records: refused" \
    "$DEC" -m m.st --shortlist sl.st --source five.txt test.npy
expect_stderr "five.txt.*has 5 lines" "... naming the source file"
"$TOK" learn --vocab-size 300 --soft-vocab-limit -q "$CORPUS" -o small.vocab
"$MK" --preset tiny --vocab small.vocab --seed 3 -o other.st
expect_status 1 "a shortlist of another model: refused" \
    "$DEC" -m other.st --shortlist sl.st --source test.txt test.npy
expect_stderr "the shortlist is for vocabularies of [0-9]+ source and [0-9]+ target pieces" \
    "... with both sizes"
head -c 300 sl.st >cut.st
expect_status 1 "a cut shortlist file: refused" \
    "$DEC" -m m.st --shortlist cut.st --source test.txt test.npy
expect_status 1 "a model file given as a shortlist: refused" \
    "$DEC" -m m.st --shortlist m.st --source test.txt test.npy
expect_stderr "not a shortlist" "... saying what it is not"
