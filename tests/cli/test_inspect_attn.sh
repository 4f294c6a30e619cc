#!/bin/sh
# test_inspect_attn.sh - inspect-attn end to end on a tiny untrained model
# (tokenize learn on text holding < & " ' so that pieces need escaping, then
# $BUILD/tools/mkmodel): .npy records as numpy reads them (shapes, rows that
# sum to 1, the decoder's future exactly 0), TSV tables, well-formed SVG
# (xmllint) with escaped labels, terminal heatmaps with and without colour,
# hard and soft alignments, sources alone (translated first), one record per
# pair in order, truncation of long sentences, and must-fail cases: a layer
# or head the model lacks, mismatched files, bad ids.  The unit test
# tests/unit/test_attention.c checks a hand-built model whose alignment is
# known.
. "$ROOT/tests/cli/lib.sh"

IA="$BIN/inspect-attn" TOK="$BIN/tokenize" MK="$BUILD/tools/mkmodel"
TMO=60
for p in "$IA" "$TOK" "$MK"; do
    [ -x "$p" ] || { fail "$p is not built"; exit 0; }
done
PY=$(python_numpy)

# ---- set-up: a vocabulary with < & " ', a model, pairs -------------------------------

{
    head -300 "$ROOT/tests/data/corpus-small.txt"
    i=0
    while [ $i -lt 40 ]; do
        echo "if a < b && c > \"d\" then 'e' & <f> \"quoted\" it's"
        i=$((i + 1))
    done
} >learn.txt
"$TOK" learn --vocab-size 600 --soft-vocab-limit -q learn.txt -o v.vocab ||
    { fail "tokenize learn"; exit 0; }
"$MK" --preset tiny --vocab v.vocab --seed 1 -o m.st || { fail "mkmodel tiny"; exit 0; }
# heads 4, layers 2 (the tiny preset)

cat >src.txt <<'EOF'
Die Katze sitzt auf der Matte.
if a < b && c > "d" then 'e'
Ein kurzer Satz.

Noch ein Satz mit <Zeichen> & "Anführungen".
EOF
cat >tgt.txt <<'EOF'
The cat sits on the mat.
wenn a < b && c > "d" dann 'e'
A short sentence.
Empty source, but a target.
Another sentence with <signs> & "quotes".
EOF
"$TOK" -m m.st src.txt >src.ids
"$TOK" -m m.st tgt.txt >tgt.ids
npairs=$(wc -l <src.ids | tr -d ' ')

# ia OUT OPTION...: runs inspect-attn with the model into OUT (stderr to
# ia.err); a failure or a sanitizer's report is a test failure.
ia() {
    out=$1; shift
    timeout $TMO "$IA" -m m.st "$@" >"$out" 2>ia.err; rc=$?
    if [ "$rc" -ne 0 ] || grep -qE 'Sanitizer|runtime error' ia.err; then
        fail "inspect-attn $*: exit $rc"; sed 's/^/    stderr: /' ia.err | head -5
    fi
}

# ---- npy ---------------------------------------------------------------------------------

ia all.npy --src src.ids --tgt tgt.ids -f npy --layer all --head all --tokens all.tok
check "npy: exit 0" test -s all.npy
ia cross.npy --src src.ids --tgt tgt.ids -f npy
ia self.npy --src src.ids --tgt tgt.ids -f npy --kind self --layer 0 --head 2
ia dec.npy --src src.ids --tgt tgt.ids -f npy --kind dec-self --layer all --head all
if [ -n "$PY" ]; then
    check "npy: records (2, 4, target+1, source+1) per pair; rows sum to 1" "$PY" -c '
import numpy as np
src = [len(l.split()) for l in open("src.ids")]
tgt = [len(l.split()) for l in open("tgt.ids")]
f = open("all.npy", "rb")
for s, t in zip(src, tgt):
    a = np.load(f)
    S = s + 1 if s else 0      # </s> ends every non-empty source
    assert a.dtype == np.float32 and a.shape == (2, 4, t + 1, S), (a.shape, s, t)
    assert (a >= 0).all() and (a <= 1).all()
    if S: assert np.abs(a.sum(-1) - 1).max() < 1e-5
assert f.read() == b"", "bytes after the last record"
'
    check "npy: the default is the mean of the last layer's heads" "$PY" -c '
import numpy as np
fa, fc = open("all.npy", "rb"), open("cross.npy", "rb")
for l in open("src.ids"):
    a, c = np.load(fa), np.load(fc)
    assert c.shape == (1, 1) + a.shape[2:]
    assert np.allclose(c[0, 0], a[1].mean(0), atol=1e-6)
'
    check "npy --kind self --layer 0 --head 2: (1, 1, source+1, source+1)" "$PY" -c '
import numpy as np
f = open("self.npy", "rb")
for l in open("src.ids"):
    s = len(l.split()); S = s + 1 if s else 0
    a = np.load(f)
    assert a.shape == (1, 1, S, S), a.shape
    if S: assert np.abs(a.sum(-1) - 1).max() < 1e-5
'
    check "npy --kind dec-self: causal, the future exactly 0" "$PY" -c '
import numpy as np
f = open("dec.npy", "rb")
for l in open("tgt.ids"):
    T = len(l.split()) + 1
    a = np.load(f)
    assert a.shape == (2, 4, T, T), a.shape
    assert np.abs(a.sum(-1) - 1).max() < 1e-5
    assert (a[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0).all()
    assert (a[..., np.tril_indices(T)[0], np.tril_indices(T)[1]] > 0).all()
'
else
    skip "numpy not available: .npy records not checked"
fi

# A model with relative positions and a window of 2: the workspace keeps each
# self-attention's band alone; the records are whole matrices, exactly 0
# outside the band (|i - j| > 2 in the encoder, j < i - 2 or j > i in the
# decoder) and distributions inside it.
"$MK" --preset tiny --vocab v.vocab --seed 2 --relative-positions 3 --attention-window 2 \
    -o band.st || fail "mkmodel --relative-positions 3 --attention-window 2"
timeout $TMO "$IA" -m band.st --src src.ids --tgt tgt.ids -f npy --kind self --layer all \
    --head all >band-self.npy 2>ia.err || fail "inspect-attn --kind self, a window: exit $?"
timeout $TMO "$IA" -m band.st --src src.ids --tgt tgt.ids -f npy --kind dec-self --layer all \
    --head all >band-dec.npy 2>ia.err || fail "inspect-attn --kind dec-self, a window: exit $?"
if [ -n "$PY" ]; then
    check "npy, a window of 2: whole matrices, 0 outside the band, distributions inside" "$PY" -c '
import numpy as np
fs, fd = open("band-self.npy", "rb"), open("band-dec.npy", "rb")
for s, t in zip(open("src.ids"), open("tgt.ids")):
    n = len(s.split()); S = n + 1 if n else 0; T = len(t.split()) + 1
    for a, L, causal in ((np.load(fs), S, False), (np.load(fd), T, True)):
        assert a.shape == (2, 4, L, L), a.shape
        if not L: continue
        i, j = np.indices((L, L))
        band = (j <= i) & (j >= i - 2) if causal else abs(i - j) <= 2
        assert (a[..., ~band] == 0).all() and (a[..., band] > 0).all()
        assert np.abs(a.sum(-1) - 1).max() < 1e-5
'
fi
check "npy --tokens: a line per record" test "$(wc -l <all.tok | tr -d ' ')" -eq "$npairs"
check "npy --tokens: target+1 query labels (the last </s>), source+1 key labels" awk -F'\t' '
    NR == FNR { s[FNR] = split($0, x, " "); next }
    FILENAME == ARGV[2] { t[FNR] = split($0, x, " "); next }
    { nq = split($1, q, " "); nk = split($2, k, " ")
      if (nq != t[FNR] + 1 || q[nq] != "</s>") exit 1
      if (nk != (s[FNR] ? s[FNR] + 1 : 0)) exit 1 }' src.ids tgt.ids all.tok
if command -v script >/dev/null 2>&1; then
    script -qec "$IA -m m.st -f npy --src src.ids --tgt tgt.ids" /dev/null >tty.txt 2>&1
    check "npy: refuses to write to a terminal" grep -q "refusing to write binary tensors" tty.txt
else
    skip "no script(1): the terminal check is not run"
fi

# ---- tsv ---------------------------------------------------------------------------------

ia pairs.tsv --src src.ids --tgt tgt.ids -f tsv
check "tsv: a table per pair, in order" sh -c "
    grep -o '^sentence [0-9]*' pairs.tsv | tr '\n' ' ' | grep -qx 'sentence 1 sentence 2 sentence 3 sentence 4 sentence 5 '"
check "tsv: every row of weights sums to 1" awk -F'\t' '
    /^sentence / || NF == 0 { next }
    NF > 1 { s = 0; for (i = 2; i <= NF; i++) s += $i; if (s < 0.9999 || s > 1.0001) exit 1; n++ }
    END { exit !(n > 0) }' pairs.tsv
check "tsv: labels beside the weights (pieces, </s> last)" grep -q '^</s>	' pairs.tsv
ia text.tsv --text --src src.txt --tgt tgt.txt -f tsv
check "--text gives what tokenize gives" cmp -s text.tsv pairs.tsv
ia again.tsv --src src.ids --tgt tgt.ids -f tsv
check "the same input gives the same bytes" cmp -s pairs.tsv again.tsv

# ---- svg ---------------------------------------------------------------------------------

ia two.svg --src src.ids --tgt tgt.ids -f svg --sentence 2 --layer all --head all
check "svg: a standalone document" grep -q '^<svg xmlns="http://www.w3.org/2000/svg"' two.svg
check "svg: sentence 2, 2 x 4 panels" test "$(grep -c 'font-weight="bold">layer [01], head [0-3]<' two.svg)" -eq 8
check "svg: labels with < & \" ' are escaped" sh -c \
    "grep -q '>&lt;<' two.svg && grep -q '>&amp;<' two.svg && grep -q '&quot;' two.svg && grep -q '&apos;' two.svg"
if command -v xmllint >/dev/null 2>&1; then
    check "svg: well-formed XML (xmllint)" xmllint --noout two.svg
    ia five.svg --text --src src.txt --tgt tgt.txt -f svg --sentence 5 --label-width 3
    check "svg --label-width 3: well-formed, labels shortened with an ellipsis" sh -c \
        "xmllint --noout five.svg && grep -q '…</text>' five.svg"
else
    skip "xmllint is not installed ('make deps' installs libxml2-utils): SVG not validated"
fi
ia first.svg --src src.ids --tgt tgt.ids -f svg
check "svg without --sentence: the first sentence, a warning about the rest" sh -c \
    "grep -q 'sentence 1: cross-attention' first.svg && grep -q 'svg draws one sentence' ia.err"

# ---- term --------------------------------------------------------------------------------

ia plain.txt --src src.ids --tgt tgt.ids --sentence 1
check "term: plain when not a terminal (no escape sequences)" sh -c "! grep -q \"$(printf '\033')\" plain.txt"
check "term: a title, the layer, a legend" sh -c \
    "grep -q '^sentence 1: cross-attention' plain.txt && grep -q '^layer 1, mean of 4 heads' plain.txt && grep -q '\[  \.\.::--==++\*\*##%%@@@@\] 1' plain.txt"
ia c256.txt --src src.ids --tgt tgt.ids --sentence 1 --color always
check "term --color always: xterm 256 colours" grep -q "$(printf '\033')\[48;5;" c256.txt
COLORTERM=truecolor ia c24.txt --src src.ids --tgt tgt.ids --sentence 1 --color=always
check "term --color always, COLORTERM=truecolor: 24-bit colour" grep -q "$(printf '\033')\[48;2;" c24.txt
NO_COLOR=1 ia nc.txt --src src.ids --tgt tgt.ids --sentence 1 --color auto
check "term: NO_COLOR gives no colour" sh -c "! grep -q \"$(printf '\033')\" nc.txt"
ia allterm.txt --src src.ids --tgt tgt.ids --layer all
check "term: every sentence, in order, each layer" test \
    "$(grep -c '^sentence [1-5]: cross-attention' allterm.txt)" -eq "$npairs"

# A long pair: truncated for legibility, with a note.
awk 'BEGIN { for (i = 0; i < 150; i++) printf "%d ", 300 + i % 200; print "" }' >long.src
awk 'BEGIN { for (i = 0; i < 130; i++) printf "%d ", 310 + i % 190; print "" }' >long.tgt
ia long.txt --src long.src --tgt long.tgt --max-tokens 12
check "term --max-tokens 12: a note says what is shown" \
    grep -q 'showing 12 of 131 queries and 12 of 151 keys' long.txt
check "term --max-tokens 12: 12 rows of 12 cells" test \
    "$(grep -cE '^ *[^ ]+ .{24}$' long.txt)" -ge 12
ia long.tsv --src long.src --tgt long.tgt -f tsv
check "tsv is never truncated: 131 rows of 151 weights" awk -F'\t' '
    NR > 1 && NF > 0 { n++; if (NF != 152) exit 1 } END { exit n != 131 }' long.tsv

# ---- alignments ----------------------------------------------------------------------------

ia pairs.align --src src.ids --tgt tgt.ids -f align
check "align: a line per pair" test "$(wc -l <pairs.align | tr -d ' ')" -eq "$npairs"
check "align: 'i-j' pairs, j each target token once at most, i a source word" awk '
    NR == FNR { s[FNR] = NF; next }
    FILENAME == ARGV[2] { t[FNR] = NF; next }
    { for (k = 1; k <= NF; k++) {
          if ($k !~ /^[0-9]+-[0-9]+$/) exit 1
          split($k, p, "-"); if (p[1] >= s[FNR] || p[2] >= t[FNR] || seen[FNR, p[2]]++) exit 1 } }
    ' src.ids tgt.ids pairs.align
ia pairs.soft --src src.ids --tgt tgt.ids -f soft
check "soft: the target pieces, ' ||| ', target+1 distributions over source+1 tokens" awk -F' [|][|][|] ' '
    NR == FNR { s[FNR] = split($0, x, " "); next }
    FILENAME == ARGV[2] { t[FNR] = split($0, x, " "); next }
    { if (NF != 2 || split($1, pieces, " ") != t[FNR]) exit 1
      if (s[FNR] == 0) next   # an empty source: empty distributions
      n = split($2, rows, " "); if (n != t[FNR] + 1) exit 1
      for (r = 1; r <= n; r++) {
          m = split(rows[r], w, ","); if (m != s[FNR] + 1) exit 1
          sum = 0; for (i = 1; i <= m; i++) sum += w[i]
          if (sum < 0.9999 || sum > 1.0001) exit 1 } }' src.ids tgt.ids pairs.soft

# ---- sources alone ---------------------------------------------------------------------------

head -3 src.ids >three.ids
ia alone.soft -f soft three.ids
check "sources alone: translated, a record per source" test "$(wc -l <alone.soft | tr -d ' ')" -eq 3
ia alone2.soft -f soft <three.ids
check "sources alone from standard input: the same" cmp -s alone.soft alone2.soft
ia beam.align -f align --beam 3 three.ids
check "sources alone --beam 3: a line per source" test "$(wc -l <beam.align | tr -d ' ')" -eq 3
printf '5 6\n\n7\n' >with_empty.ids
for beam in 1 3; do
    ia with_empty.soft -f soft --beam $beam with_empty.ids
    check "sources alone --beam $beam: an empty source is translated into the empty sentence" \
        awk -F' [|][|][|] ' 'NR == 2 && $1 != "" { exit 1 } END { exit NR != 3 }' with_empty.soft
done
ia selfonly.tsv -f tsv --kind self three.ids
check "sources alone --kind self: no translation needed" test \
    "$(grep -c '^sentence [1-3]: encoder self-attention' selfonly.tsv)" -eq 3
# Sources alone show the attention of the pair (source, greedy translation):
# the translation made by encode | decode --greedy gives the same weights.
if [ -x "$BIN/encode" ] && [ -x "$BIN/decode" ]; then
    timeout $TMO "$BIN/encode" -m m.st three.ids | timeout $TMO "$BIN/decode" -m m.st --greedy >hyp.ids
    ia hyp.soft -f soft --src three.ids --tgt hyp.ids
    check "sources alone: the weights of the pair (source, greedy translation)" awk -F' [|][|][|] ' '
        NR == FNR { a[FNR] = $0; next }
        { split(a[FNR], x, / [|][|][|] /); if (x[1] != $1) exit 1
          n = split(x[2], p, /[ ,]/); if (split($2, q, /[ ,]/) != n) exit 1
          for (i = 1; i <= n; i++) if (p[i] - q[i] > 1e-4 || q[i] - p[i] > 1e-4) exit 1 }
        END { exit NR != 6 }' alone.soft hyp.soft
else
    fail "encode or decode is not built: sources alone not compared with decode"
fi
expect_status 1 "--tgt with fewer lines than --src fails" "$IA" -m m.st --src three.ids --tgt /dev/null
expect_stderr "fewer than three.ids" "--tgt with fewer lines: the message names the files"

# ---- must-fail cases ------------------------------------------------------------------------

expect_status 2 "--layer 2 on a 2-layer model is a usage error" "$IA" -m m.st --src src.ids --tgt tgt.ids --layer 2
expect_stderr "layers 0 to 1" "--layer 2: the message names the valid range"
expect_status 2 "--head 4 on a 4-head model is a usage error" "$IA" -m m.st --src src.ids --tgt tgt.ids --head 4
expect_stderr "heads 0 to 3" "--head 4: the message names the valid range"
expect_status 2 "--head -1 is a usage error" "$IA" -m m.st --src src.ids --tgt tgt.ids --head -1
expect_stderr "--head: '-1' is not a number \\(0, 1, \\.\\.\\.\\), 'mean' or 'all'" "--head -1: the message names the words"
expect_status 2 "--layer mean is a usage error" "$IA" -m m.st --src src.ids --tgt tgt.ids --layer mean
expect_stderr "--layer: 'mean' is not a number \\(0, 1, \\.\\.\\.\\), 'last' or 'all'" "--layer mean: the message names the words"
expect_status 2 "--kind self --layer 2 is a usage error" "$IA" -m m.st --src src.ids --kind self --layer 2
expect_stderr "^inspect-attn: --layer 2: the model's encoder has layers 0 to 1 \\(or 'last', 'all'\\)$" "--kind self --layer 2: the message names the encoder"
expect_status 2 "--kind self with --format align is a usage error" "$IA" -m m.st --src src.ids --tgt tgt.ids --kind self -f align
expect_status 2 "--beam with --tgt is a usage error" "$IA" -m m.st --src src.ids --tgt tgt.ids --beam 2
expect_status 2 "no model is a usage error" "$IA" --src src.ids --tgt tgt.ids
printf '5 6\n' >short.ids
printf '5 6\n7 8\n' >two.ids
expect_status 1 "--tgt with more lines than --src fails" "$IA" -m m.st --src short.ids --tgt two.ids
printf '5 6\n5 999999\n5\n' >bad.ids
expect_status 1 "an id outside the vocabulary fails" "$IA" -m m.st --src bad.ids --tgt bad.ids -f align
expect_stderr "^inspect-attn: bad.ids:2: " "an id outside the vocabulary: FILE:LINE"
check "an id outside the vocabulary: the pairs before it are written" test "$(wc -l <out.txt | tr -d ' ')" -eq 1
{ printf '5 6\n'; head -c 17000000 /dev/zero | tr '\0' '5'; printf '\n5\n'; } >huge.ids
expect_status 1 "a line over the reader's limit fails" "$IA" -m m.st --src huge.ids --tgt huge.ids -f align
expect_stderr "^inspect-attn: huge.ids:2: " "a line over the reader's limit: FILE:LINE"
check "a line over the reader's limit: the pair before it is written" test "$(wc -l <out.txt | tr -d ' ')" -eq 1
# A model marked as trained without </s> (train --no-eos) is read as such:
# the same weights give what --no-eos gives with the unmarked model.
"$MK" --preset tiny --vocab v.vocab --seed 1 --no-eos -o noeos.st || fail "mkmodel --no-eos"
timeout $TMO "$IA" -m m.st --no-eos --src src.ids --tgt tgt.ids -f soft >want-noeos.txt 2>/dev/null
timeout $TMO "$IA" -m noeos.st --src src.ids --tgt tgt.ids -f soft >got-noeos.txt 2>/dev/null
check "a model trained with --no-eos: inspect-attn reads it back" cmp -s want-noeos.txt got-noeos.txt
timeout $TMO "$IA" -m m.st --src src.ids --tgt tgt.ids -f soft >eos.txt 2>/dev/null
check "a model trained with --no-eos: not what the default gives" sh -c '! cmp -s eos.txt got-noeos.txt'
expect_status 1 "--sentence beyond the input fails" "$IA" -m m.st --src src.ids --tgt tgt.ids --sentence 9
expect_stderr "only 5 lines" "--sentence beyond the input: the message says how many"
# Without --text, each file is ids or text as its first lines show.
ia auto.tsv --src src.txt --tgt tgt.txt -f tsv
check "text without --text is read as text: what --text gives" cmp -s auto.tsv text.tsv
check "... with nothing said of the guess" sh -c "! grep -q 'read as' ia.err"
ia auto-ids.tsv --src src.ids --tgt tgt.ids -f tsv
check "id lines without --text are ids: what they give" cmp -s auto-ids.tsv pairs.tsv
check "... and the guess is said in one line per file, thin evidence as it is" sh -c \
    "grep -q '^inspect-attn: src.ids: warning: read as id lines: it has only 4 non-empty lines of ids; give --text if it is text' ia.err && [ \$(grep -c 'read as id lines' ia.err) -eq 2 ]"
{ head -3 src.ids; echo "5 x 7"; tail -n +5 src.ids; } >mostly.ids
expect_status 1 "a file of ids with a bad line fails at that line" "$IA" -m m.st --src mostly.ids --tgt tgt.ids
expect_stderr "^inspect-attn: mostly.ids:4: .*\(the file was read as id lines: 4 of its first 5 non-empty lines are\)" \
    "... naming it, and why the file was read as ids"
expect_status 1 "a missing input file fails" "$IA" -m m.st nothere-9f3a.txt
expect_stderr "^inspect-attn: nothere-9f3a\.txt: No such file or directory$" "a missing input file: named"

# A reader that goes away ends the program quietly (-q: the empty sources warn).
i=0; while [ $i -lt 30 ]; do cat src.ids; i=$((i + 1)); done >many.ids
i=0; while [ $i -lt 30 ]; do cat tgt.ids; i=$((i + 1)); done >many.tgt
{ timeout $TMO "$IA" -m m.st -q --src many.ids --tgt many.tgt -f tsv 2>pipe.err; echo $? >pipe.rc; } | head -n 1 >/dev/null
check "inspect-attn | head -1: ends quietly" sh -c "[ ! -s pipe.err ] && [ \"\$(cat pipe.rc)\" -ne 124 ]"
