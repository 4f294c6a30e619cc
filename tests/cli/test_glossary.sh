#!/bin/sh
# test_glossary.sh - tokenize --glossary=FILE --constraints=OUT, which writes
# for each input line the constraints (decode --constraints) that ask for the
# target terms of the glossary's source terms found in it; and 'tokenize
# placeholders', which lists the placeholders of each line.
#
# Checked: OUT has a line per input line, empty for lines without a term;
# its constraints parse and every id is inside the vocabulary; each
# alternative decodes to one of the term's targets; whole words only; the
# same bytes with 1 and 2 threads, and over several input files; with
# --placeholders; written through a FIFO line by line; the usage errors
# (exit 2); a malformed glossary named FILE:LINE (exit 1) leaving no OUT;
# and the placeholders of hostile lines.
#
# Run through tests/run.sh, or by hand:
#   BIN=$PWD/build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_glossary.sh
. "$ROOT/tests/cli/lib.sh"

TOKENIZE="$BIN/tokenize"
DATA="$ROOT/tests/data"
TMO=${TOKENIZE_TEST_TIMEOUT:-60}

if [ ! -x "$TOKENIZE" ]; then fail "no $TOKENIZE"; exit 0; fi

tok() { timeout "$TMO" "$TOKENIZE" "$@"; }

tok learn -q --vocab-size 3000 --soft-vocab-limit "$DATA/corpus-small.txt" -o v.vocab
check "learn a vocabulary" [ -s v.vocab ]
VS=$(sed -n '1s/.*pieces=\([0-9]*\).*/\1/p' v.vocab)

printf '%s\n' \
    '# a glossary of words of the corpus' \
    '' \
    'file	fichier' \
    'files	fichiers' \
    'user	utilisateur' \
    'user	usager' \
    'the file	le fichier' \
    'werden	sont' \
    'system	système' >terms.tsv

printf '%s\n' \
    'Open the file, then the files.' \
    '' \
    'nothing of the glossary here' \
    'The user (user) opens a file' \
    'profile filesystem Users' \
    'Die Dateien werden geschrieben.' \
    'the system file and the file' >in.txt
cat in.txt "$DATA/corpus-small.txt" >big.txt

# ---- the constraints file ------------------------------------------------------------

tok -m v.vocab --glossary terms.tsv --constraints c.txt in.txt >ids.txt 2>err.txt
check "--glossary --constraints exits 0" [ $? -eq 0 ]
check "no warning" [ ! -s err.txt ]
tok -m v.vocab in.txt >plain-ids.txt
same_files "the ids are those without --glossary" plain-ids.txt ids.txt
check "OUT has a line per input line ($(lines_of c.txt))" [ "$(lines_of c.txt)" -eq "$(lines_of in.txt)" ]
check "an empty input line gives an empty line" [ -z "$(sed -n 2p c.txt)" ]
check "a line without a term gives an empty line" [ -z "$(sed -n 3p c.txt)" ]
check "no term inside a longer word, nor of another case (profile filesystem Users)" \
    [ -z "$(sed -n 5p c.txt)" ]
# constraints per line: TABs + 1
ncons() { sed -n "${1}p" c.txt | awk -F'\t' '{ print NF }'; }
check "Open the file, then the files.: the file, files ($(ncons 1))" [ "$(ncons 1)" = 2 ]
check "The user (user) opens a file: user once, file ($(ncons 4))" [ "$(ncons 4)" = 2 ]
check "werden: one constraint ($(ncons 6))" [ "$(ncons 6)" = 1 ]
# "file" in "system file" is not part of "the file": both are found.
check "the system file and the file: system, file, the file ($(ncons 7))" [ "$(ncons 7)" = 3 ]

# Every alternative: ids inside the vocabulary, decoding to a target term.
tr '\t' '\n' <c.txt | grep -v '^$' | awk -F' [|] ' '{ for (i = 1; i <= NF; i++) print $i }' >alts.txt
check "the constraints have alternatives ($(lines_of alts.txt))" [ "$(lines_of alts.txt)" -ge 9 ]
bad=$(awk -v vs="$VS" '{ for (i = 1; i <= NF; i++) if ($i !~ /^[0-9]+$/ || $i + 0 >= vs) n++ }
                       END { print n + 0 }' alts.txt)
check "every id is a number below the vocabulary size $VS ($bad bad)" [ "$bad" -eq 0 ]
tok -d -m v.vocab alts.txt >alts-text.txt
cut -f2 terms.tsv | grep -v '^$' | grep -v '^#' | sort -u >targets.txt
bad=$(sort -u alts-text.txt | comm -23 - targets.txt | wc -l)
check "each alternative decodes to a target term ($bad not)" [ "$bad" -eq 0 ]
check "the targets of 'user' are alternatives of one constraint" \
    [ "$(sed -n 4p c.txt | tr '\t' '\n' | grep -c ' | ')" -eq 1 ]

# The same bytes whatever the thread count, and over several files.
tok -m v.vocab --threads 1 --glossary terms.tsv --constraints c1.txt big.txt >ids1.txt
tok -m v.vocab --threads 2 --glossary terms.tsv --constraints c2.txt big.txt >ids2.txt
same_files "--threads 1 and 2: the same constraints" c1.txt c2.txt
same_files "--threads 1 and 2: the same ids" ids1.txt ids2.txt
check "a line of OUT per line of a big input" [ "$(lines_of c2.txt)" -eq "$(lines_of big.txt)" ]
check "many lines have terms ($(grep -c . c2.txt))" [ "$(grep -c . c2.txt)" -gt 300 ]
tok -m v.vocab --threads 2 --glossary terms.tsv --constraints c3.txt in.txt - <"$DATA/corpus-small.txt" >/dev/null
same_files "several input files: one OUT, in order" c1.txt c3.txt

# Through a FIFO, line by line.
if mkfifo fifo 2>/dev/null; then
    # Both ends under timeout: a failure cannot leave the other end waiting.
    timeout "$TMO" cat fifo >fifo-out.txt &
    reader=$!
    tok -m v.vocab --threads 2 --glossary terms.tsv --constraints fifo big.txt >/dev/null
    rc=$?
    [ $rc -eq 0 ] || timeout 5 sh -c ': >fifo' 2>/dev/null
    wait $reader
    check "--constraints=FIFO exits 0" [ $rc -eq 0 ]
    same_files "--constraints=FIFO writes the same lines" c1.txt fifo-out.txt
    check "the FIFO is still a FIFO" [ -p fifo ]
else
    skip "mkfifo is not available"
fi

# With placeholders: terms are plain words, found next to placeholders.
tok learn -q --placeholders --vocab-size 3000 --soft-vocab-limit "$DATA/corpus-small.txt" -o ph.vocab
printf '%s\n' '<b>file</b> of %s user' 'no terms %s' '{0}files' >ph.txt
tok -m ph.vocab --placeholders --glossary terms.tsv --constraints ph-c.txt ph.txt >ph-ids.txt
check "--placeholders --glossary exits 0" [ $? -eq 0 ]
tok -m ph.vocab --placeholders ph.txt >ph-plain.txt
same_files "--placeholders --glossary: the ids are those of --placeholders" ph-plain.txt ph-ids.txt
check "<b>file</b> of %s user: file, user" [ "$(sed -n 1p ph-c.txt | awk -F'\t' '{ print NF }')" = 2 ]
check "no terms %s: empty" [ -z "$(sed -n 2p ph-c.txt)" ]
check "{0}files: files" [ "$(sed -n 3p ph-c.txt | awk -F'\t' '{ print NF }')" = 1 ]

# ---- errors ----------------------------------------------------------------------------

expect_status 2 "--constraints without --glossary: usage error" tok -m v.vocab --constraints x.txt in.txt
expect_stderr "needs --glossary" "... saying --glossary is needed"
expect_status 2 "--glossary without --constraints: usage error" tok -m v.vocab --glossary terms.tsv in.txt
expect_stderr "needs --constraints" "... saying --constraints is needed"
expect_status 2 "--glossary with -d: usage error" \
    tok -d -m v.vocab --glossary terms.tsv --constraints x.txt ids.txt
expect_status 2 "--glossary with learn: usage error" \
    tok learn --vocab-size 500 --glossary terms.tsv --constraints x.txt in.txt
expect_status 2 "--glossary with normalize: usage error" \
    tok normalize --glossary terms.tsv --constraints x.txt in.txt
expect_status 2 "--glossary with --dropout: usage error" \
    tok -m v.vocab --dropout 0.1 --glossary terms.tsv --constraints x.txt in.txt
expect_status 2 "--constraints=-: usage error" tok -m v.vocab --glossary terms.tsv --constraints - in.txt
check "no OUT written on usage errors" [ ! -e x.txt ]

printf 'file\tfichier\n# fine\nuser utilisateur\n' >bad1.tsv
printf 'file\tfichier\n\tfichier\n' >bad2.tsv
printf 'file\tfichier\tnote\n' >bad3.tsv
printf 'file\t\n' >bad4.tsv
echo "previous" >kept.txt
expect_status 1 "a line without a TAB: exit 1" tok -m v.vocab --glossary bad1.tsv --constraints kept.txt in.txt
expect_stderr "^tokenize: bad1.tsv:3: no TAB" "... naming bad1.tsv:3"
check "a failed run leaves OUT as it was" [ "$(cat kept.txt)" = previous ]
expect_status 1 "an empty source term: exit 1" tok -m v.vocab --glossary bad2.tsv --constraints x.txt in.txt
expect_stderr "^tokenize: bad2.tsv:2: empty source term" "... naming bad2.tsv:2"
expect_status 1 "two TABs: exit 1" tok -m v.vocab --glossary bad3.tsv --constraints x.txt in.txt
expect_stderr "^tokenize: bad3.tsv:1: more than one TAB" "... naming bad3.tsv:1"
expect_status 1 "an empty target term: exit 1" tok -m v.vocab --glossary bad4.tsv --constraints x.txt in.txt
expect_stderr "^tokenize: bad4.tsv:1: empty target term" "... naming bad4.tsv:1"
expect_status 1 "a missing glossary: exit 1" tok -m v.vocab --glossary nothere.tsv --constraints x.txt in.txt
expect_stderr "^tokenize: nothere.tsv: No such file" "... naming it"
check "no OUT, no temporary file left" [ -z "$(ls x.txt* 2>/dev/null)" ]
# A line that fails (--strict) after OUT was opened: OUT holds the lines
# before it, as standard output does (OUT is written as it goes, so that
# decode can read it in the same pipeline).
printf 'the file\nbad \377 file\n' >bad-utf8.txt
expect_status 1 "invalid UTF-8 with --strict: exit 1" \
    tok -m v.vocab --strict --glossary terms.tsv --constraints x.txt bad-utf8.txt
check "... OUT holds the lines before the bad one, as standard output does" \
    [ "$(wc -l <x.txt)" -eq "$(wc -l <out.txt)" ]

# More than 64 terms on a line: 64 constraints and one warning naming the line.
awk 'BEGIN { for (i = 1; i <= 70; i++) printf "w%d\tv%d\n", i, i }' >many.tsv
awk 'BEGIN { s = ""; for (i = 1; i <= 70; i++) s = s sprintf("w%d ", i); print "none"; print s }' >many.txt
tok -m v.vocab --glossary many.tsv --constraints many-c.txt many.txt >/dev/null 2>err.txt
check "70 terms on a line: exit 0" [ $? -eq 0 ]
check "... 64 constraints" [ "$(sed -n 2p many-c.txt | awk -F'\t' '{ print NF }')" = 64 ]
check "... one warning naming many.txt:2" \
    [ "$(grep -c '^tokenize: many.txt:2: warning: 6 more glossary terms' err.txt)" -eq 1 ]

# ---- tokenize placeholders -------------------------------------------------------------

printf '%s\n' \
    '%s%d{0}<b></b>&amp;${x}%1%%' \
    '100%% sure' \
    'ends with %' \
    '<b>unbalanced <i>tags</b>' \
    '' \
    'Open %s of %d files' \
    'nothing at all, 50% of it' >hostile.txt
printf '%s\n' \
    '%s	%d	{0}	<b>	</b>	&amp;	${x}	%1	%%' \
    '%%' \
    '' \
    '<b>	<i>	</b>' \
    '' \
    '%s	%d' \
    '' >hostile-want.txt
tok placeholders hostile.txt >hostile-got.txt 2>err.txt
check "placeholders exits 0" [ $? -eq 0 ]
same_files "placeholders: each line's placeholders, TAB-separated" hostile-want.txt hostile-got.txt
tok placeholders <hostile.txt >hostile-stdin.txt
same_files "placeholders: from standard input too" hostile-want.txt hostile-stdin.txt
tok placeholders --placeholder-classes=tags hostile.txt | sed -n 1p >tags.txt
check "--placeholder-classes=tags: tags only" [ "$(cat tags.txt)" = "<b>	</b>" ]
tok placeholders hostile.txt hostile.txt >twice.txt
check "placeholders: two files, a line each" [ "$(lines_of twice.txt)" -eq 14 ]
printf 'no newline %%s' | tok placeholders >last.txt
check "a last line without a newline" [ "$(cat last.txt)" = "%s" ]
expect_status 2 "placeholders -m: usage error" tok placeholders -m v.vocab hostile.txt
expect_status 2 "placeholders --placeholder-classes=nope: usage error" \
    tok placeholders --placeholder-classes=nope hostile.txt
expect_status 1 "placeholders of a missing file: exit 1" tok placeholders nothere.txt
expect_stderr "^tokenize: nothere.txt: No such file" "... naming it"
