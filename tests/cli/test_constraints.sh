#!/bin/sh
# test_constraints.sh - lexically constrained decoding end to end
# (decode --constraints), on a tiny model trained on the demo's dates:
# every constraint appears in its output (one id, several ids, several
# constraints in either order, alternatives), lines without constraints and
# empty sources are as without --constraints, a batch of 64 gives the bytes
# of batches of one, greedy search, n-best lists, scores and int8 keep them,
# a constraint that cannot fit in the length limit gives the unconstrained
# translation and a warning naming the record, and bad constraint files get
# errors that name FILE:LINE.  Placeholders: hostile lines (nothing but
# placeholders, unbalanced tags, %%, a % at the end, placeholders inside
# words) keep exactly their placeholders through the whole pipeline, printf
# conversions in order (msgfmt --check-format accepts them), with a model
# that never saw a placeholder token.
#
# Run through tests/run.sh, or by hand:
#   BUILD=build/release BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_constraints.sh
. "$ROOT/tests/cli/lib.sh"

DEMO="$ROOT/tests/data/demo"
for p in tokenize train encode decode; do
    if [ ! -x "$BIN/$p" ]; then fail "no $BIN/$p"; exit 0; fi
done
export PATH="$BIN:$PATH"
lines() { awk 'END { print NR }' "$1"; }

# ---- a model and its states ----------------------------------------------------------

# The shared fixture 'dates' (tests/fixtures.sh: 300 updates, trained once
# per run by the optimised build, which trains bit for bit as the sanitizer
# build does): its vocabulary has the placeholder tokens (for the
# placeholders below); the dates have no placeholders, so the model never
# sees them.  Its first 60 test dates are the sources.
fixture dates || { fail "train: a model (the fixture 'dates')"; exit 0; }
head -n 60 test.src >t.src && mv t.src test.src
cp dates.st m.st
check "train: a model" test -s m.st

# the sources, with an empty line as line 5
awk 'NR == 5 { print "" } { print }' test.src >src.txt
n=$(lines src.txt)
tokenize -m m.st <src.txt | encode -m m.st >src.npy
decode -m m.st <src.npy >plain.ids

# The constraints: pieces of years and days that the model would not write
# for these sources.  ids FILE TEXT: the ids of TEXT as the output spells it.
y1999=$(echo "01/01/1999" | tokenize -m m.st | cut -d' ' -f6-)
y2024=$(echo "01/01/2024" | tokenize -m m.st | cut -d' ' -f6-)
d13=$(echo "13/01/2000" | tokenize -m m.st | cut -d' ' -f1)
check "the constraint ids ($y1999; $y2024; $d13)" test -n "$y1999" -a -n "$y2024" -a -n "$d13"
awk -v a="$y1999" -v b="$y2024" -v d="$d13" '{
    k = NR % 6
    if (k == 0) print ""                      # nothing
    else if (k == 1) print a                  # a year: several ids
    else if (k == 2) print d                  # one id
    else if (k == 3) print a "\t" d           # two constraints
    else if (k == 4) print d "\t" a           # the same in the other order
    else print b " | " a                      # alternatives
}' src.txt >cons.txt

decode -m m.st --constraints cons.txt <src.npy >cons.ids 2>cons.err
check "decode --constraints: exit 0, a line per record" test "$(lines cons.ids)" -eq "$n"
# met CONS IDS: every constraint of each line (some alternative) is in its
# ids, but for line 5, the empty source, whose output stays empty
met() {
    awk -F'\t' 'NR == FNR { c[NR] = $0; next }
    FNR == 5 { if ($0 != "") { print "line 5: not empty"; bad = 1 }; next }
    { line = " " $0 " "; k = split(c[FNR], parts, "\t")
      for (i = 1; i <= k; i++) { m = split(parts[i], alts, " [|] "); ok = 0
          for (a = 1; a <= m; a++) if (index(line, " " alts[a] " ")) ok = 1
          if (!ok) { print "line " FNR ": \"" parts[i] "\" missing in \"" $0 "\""; bad = 1 } } }
    END { exit bad }' "$1" "$2"
}
check "every constraint is in its output (one id, several, two in either order, alternatives)" met cons.txt cons.ids
check "an empty source gives an empty line" test -z "$(sed -n 5p cons.ids)"
awk -F'\t' 'NR == FNR { c[NR] = $0; next } c[FNR] == "" { print }' cons.txt plain.ids >free.want
awk -F'\t' 'NR == FNR { c[NR] = $0; next } c[FNR] == "" { print }' cons.txt cons.ids >free.got
check "lines without constraints are translated as without --constraints" cmp -s free.want free.got
check "no warning when every constraint fits" test ! -s cons.err

decode -m m.st --constraints cons.txt --batch-size 1 --threads 1 <src.npy >b1.ids
check "batch 1 == batch 64, byte for byte" cmp -s cons.ids b1.ids
decode -m m.st --constraints cons.txt --threads 2 --batch-size 7 <src.npy >b7.ids
check "batches of 7 on 2 threads: the same bytes" cmp -s cons.ids b7.ids

decode -m m.st --constraints cons.txt --greedy <src.npy >greedy.ids
check "greedy search (beam 1 with banks) meets them too" met cons.txt greedy.ids
decode -m m.st --constraints cons.txt --nbest 3 --scores <src.npy >nbest.txt
check "n-best lists: 3 hypotheses per record (1 for the empty source)" \
    test "$(lines nbest.txt)" -eq "$((3 * (n - 1) + 1))"
awk -F' [|][|][|] ' '!seen[$1]++ { print $2 }' nbest.txt | head -4 >nb0.ids
head -4 cons.ids | cut -f1 >c4.ids
check "the best of the n-best list is the 1-best line" cmp -s nb0.ids c4.ids
decode -m m.st --constraints cons.txt --scores <src.npy | cut -f1 >scores.ids
check "--scores: the same ids before the TAB" cmp -s scores.ids cons.ids
decode -m m.st --constraints cons.txt --compute-type int8 <src.npy >int8.ids
check "int8 meets them too" met cons.txt int8.ids

# a constraint longer than the length limit: the unconstrained translation
awk -v a="$y1999 $y1999 $y1999" 'NR == 2 { print a; next } { print "" }' src.txt >long.txt
decode -m m.st --max-length 5 --constraints long.txt <src.npy >long.ids 2>long.err
decode -m m.st --max-length 5 <src.npy >short.ids
check "an unmeetable constraint: the unconstrained translation" cmp -s long.ids short.ids
check "... and a warning naming the record" grep -q "record 2: its constraints cannot all be met" long.err
check "... and only that record" test "$(grep -c 'cannot all be met' long.err)" -eq 1

# ---- bad constraint files --------------------------------------------------------------

head -3 cons.txt >short.txt
expect_status 1 "a constraints file with fewer lines than records" decode -m m.st --constraints short.txt <src.npy
expect_stderr "short.txt.*has 3 lines" "... names the file and its lines"
{ cat cons.txt; echo "$d13"; } >extra.txt
expect_status 1 "a constraints file with more lines than records" decode -m m.st --constraints extra.txt <src.npy
expect_stderr "extra.txt:$((n + 1)): has more lines" "... names the first line left over"
awk -v d="$d13" 'NR == 4 { print d " 99999"; next } { print }' cons.txt >badid.txt
expect_status 1 "an id beyond the vocabulary" decode -m m.st --constraints badid.txt <src.npy
expect_stderr "badid.txt:4: constraint 1" "... names FILE:LINE and the constraint"
awk 'NR == 3 { print "3"; next } { print }' cons.txt >eos.txt
expect_status 1 "</s> as a constraint" decode -m m.st --constraints eos.txt <src.npy
expect_stderr "eos.txt:3: constraint 1: id 3 is <pad>, <s> or </s>" "... says why"
awk -v d="$d13" 'NR == 2 { print d "\t\t" d; next } { print }' cons.txt >empty.txt
expect_status 1 "an empty constraint between two TABs" decode -m m.st --constraints empty.txt <src.npy
expect_stderr "empty.txt:2: constraint 2: an empty alternative" "... says which"
expect_status 2 "constraints with sampling: a usage error" decode -m m.st --constraints cons.txt --sample <src.npy
expect_status 1 "a constraints file that does not exist" decode -m m.st --constraints nothere.txt <src.npy

# ---- placeholders through the whole pipeline ------------------------------------------
# The model was trained on dates alone: it never saw a placeholder token,
# yet decode --placeholders keeps every placeholder of hostile lines exactly.

cp m.st ph.st
cat >hostile.txt <<'LINES'
%s
%s%d{0}<b></b>&amp;%%
<b>le 12 juin 1999
100%% of %s on 2024-01-05
it ends with %
file%sname 2024-01-05

%2$s of %1$s in 1999
{{escaped}} {name} ${HOME} &lt;%d&gt;
%s %d %s and %u, %lu, %.2f, %-10s
<a href="x.html">12 juin 1999</a> <br/> <br/>
1999-06-12
%1 and %2 and %1
LINES
ph_pipeline() { # OUT [DECODE OPTION]...
    out=$1; shift
    tokenize -m ph.st --placeholders <hostile.txt | encode -m ph.st |
        decode -m ph.st "$@" | tokenize -d -m ph.st --placeholders=hostile.txt >"$out" 2>>ph.err
}
ph_pipeline steered.txt --placeholders hostile.txt
ph_pipeline unsteered.txt
check "a line per source line" test "$(lines steered.txt)" -eq "$(lines hostile.txt)"
check "the empty line stays empty" test -z "$(sed -n 7p steered.txt)"
# multisets FILE: each line's placeholders, sorted
multisets() { tokenize placeholders "$1" | awk -F'\t' '{ n = split($0, a, "\t"); s = ""
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    for (i = 1; i <= n; i++) s = s (i > 1 ? "\t" : "") a[i]; print s }'; }
multisets hostile.txt >want.ms
multisets steered.txt >got.ms
check "every line keeps exactly its placeholders (hostile lines, a model that never saw them)" \
    cmp -s want.ms got.ms
multisets unsteered.txt >free.ms
check "... which the same model does not without decode --placeholders" sh -c '! cmp -s want.ms free.ms'
# printf conversions that take arguments in order keep the source's order
check "printf conversions in the source's order" sh -c "tokenize placeholders hostile.txt |
    awk -F'\t' '{ s = \"\"; for (i = 1; i <= NF; i++) if (\$i ~ /^%[-+#0.*a-zA-Z]/ && \$i != \"%%\") s = s \$i \" \"; print s }' >want.ord &&
    tokenize placeholders steered.txt |
    awk -F'\t' '{ s = \"\"; for (i = 1; i <= NF; i++) if (\$i ~ /^%[-+#0.*a-zA-Z]/ && \$i != \"%%\") s = s \$i \" \"; print s }' >got.ord &&
    cmp -s want.ord got.ord"
tokenize -m ph.st --placeholders <hostile.txt | encode -m ph.st >ph.npy
decode -m ph.st --placeholders hostile.txt <ph.npy >b64.ids
decode -m ph.st --placeholders hostile.txt --batch-size 1 --threads 1 <ph.npy >b1.ids
check "placeholders: batch 1 == batch 64" cmp -s b64.ids b1.ids
if command -v msgfmt >/dev/null 2>&1; then
    awk 'NR == FNR { t[FNR] = $0; next }
        /%/ && $0 !~ /%[0-9][^$0-9]|%[0-9]$/ { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); s = $0
            h = t[FNR]; gsub(/\\/, "\\\\", h); gsub(/"/, "\\\"", h)
            printf "#, c-format\nmsgctxt \"%d\"\nmsgid \"%s\"\nmsgstr \"%s\"\n\n", FNR, s, h }' \
        steered.txt hostile.txt >c.po
    check "msgfmt --check-format accepts the c-format lines" msgfmt --check-format -o /dev/null c.po
else
    skip "msgfmt --check-format (no gettext)"
fi
tokenize learn -q --vocab-size 400 train.src train.tgt -o plain.vocab
"$BUILD/tools/mkmodel" --preset tiny --vocab plain.vocab --seed 1 -o plain.st
expect_status 1 "--placeholders with a model without placeholder tokens" \
    decode -m plain.st --placeholders hostile.txt <src.npy
expect_stderr "no placeholder tokens" "... says what to do"

# ---- a glossary in one pipeline ------------------------------------------------------
# tokenize writes the constraints file as it goes and decode opens it at its
# first record: one pipeline works, even over a stale file of that name.
printf 'septembre\t1999\nDecember\t2024\n' >terms.tsv
echo "stale" >c.txt
tokenize -m m.st --glossary terms.tsv --constraints c.txt <src.txt | encode -m m.st |
    decode -m m.st --constraints c.txt >gloss.ids 2>gloss.err
check "a glossary in one pipeline: a line per record" test "$(lines gloss.ids)" -eq "$n"
tokenize -d -m m.st <gloss.ids | paste -d '\t' src.txt - >gloss.txt
check "... every source with a term has its target in the output" awk -F'\t' '
    $1 ~ /septembre/ && $2 !~ /1999/ { bad = 1 } $1 ~ /December/ && $2 !~ /2024/ { bad = 1 }
    END { exit bad }' gloss.txt
check "... and the glossary was used ($(grep -c 'septembre\|December' src.txt) lines with a term)" \
    grep -q 'septembre\|December' src.txt
