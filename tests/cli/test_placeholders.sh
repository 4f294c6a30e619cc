#!/bin/sh
# test_placeholders.sh - placeholders kept whole by tokenize(1): learning a
# vocabulary with --placeholders (the 32 reserved pieces <ph1>..<ph32>, no
# merges spent on %s), encoding each placeholder as its token, and decoding
# with --placeholders=SRC, which puts back the source line's placeholders
# byte for byte; the round trip on tests/data and on hostile placeholder
# lines; empty lines and line counts kept; tokens the source lacks dropped
# with a warning; the errors (a vocabulary without the tokens, SRC shorter or
# longer than the input, bad options); encoding without --placeholders
# unchanged.
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_placeholders.sh
. "$ROOT/tests/cli/lib.sh"

TOKENIZE="$BIN/tokenize"
DATA="$ROOT/tests/data"
TMO=${TOKENIZE_TEST_TIMEOUT:-60}

if [ ! -x "$TOKENIZE" ]; then fail "no $TOKENIZE"; exit 0; fi

tok() { timeout "$TMO" "$TOKENIZE" "$@"; }

# Hostile placeholder lines: nothing but placeholders, unbalanced tags, %%,
# a % at the end, "50% of", placeholders inside words, escaped braces,
# positional conversions, more than 32 distinct ones, empty lines, literal
# <phN>, invalid UTF-8 around placeholders.
printf '%s\n' \
    'Open %s of %d files' \
    'Copy %2$s to %1$s' \
    '%s%d{0}<b></b>&amp;${x}%1%%' \
    '<b>unbalanced text' \
    '' \
    '100%% sure, 50% of them, ends with %' \
    'file%sname a{0}b {{escaped}} {{0}}' \
    'Saved <a href="http://x.org/?a=1&amp;b=2">the %(name)s</a> in {dir:>10}.' \
    '  leading and trailing spaces %s  ' \
    'a literal <ph1> and <ph33> in the text %s' \
    '%qs expected, found %qE' \
    'Straße %s café naïve' \
    '' \
    '%1 of %2 items' >hostile.txt
# More than 32 distinct placeholders on one line.
awk 'BEGIN { s = ""; for (i = 40; i >= 1; i--) s = s sprintf("{%02d} ", i); print s "end" }' >>hostile.txt
printf 'bad \377%%s\303 <b>\200</b> <i title="\342\202">x</i>\n' >>hostile.txt
cat "$DATA/corpus-small.txt" hostile.txt >corpus.txt

# ---- learning --------------------------------------------------------------------

tok learn --placeholders --vocab-size 1200 --soft-vocab-limit corpus.txt -o ph.vocab 2>err.txt
check "learn --placeholders exits 0" [ $? -eq 0 ]
n=$(grep -c '^<ph[0-9]*>	0	user$' ph.vocab)
check "learn --placeholders reserves <ph1>..<ph32> as user pieces ($n)" [ "$n" -eq 32 ]
check "the tokens come first, <ph1> as id 4" [ "$(sed -n 6p ph.vocab)" = "<ph1>	0	user" ]
if grep -q '^%s	' ph.vocab || grep -q '^▁%s	' ph.vocab; then fail "a merge was spent on %s"
else pass "no merge spent on %s"; fi
tok learn --vocab-size 1200 --soft-vocab-limit corpus.txt -o plain.vocab 2>/dev/null
check "learn without --placeholders has no <ph1>" [ "$(grep -c '^<ph1>' plain.vocab)" -eq 0 ]
tok learn --placeholders --placeholder-classes=printf,tags --vocab-size 1200 --soft-vocab-limit \
    corpus.txt -o ph2.vocab 2>/dev/null
check "learn --placeholder-classes exits 0" [ $? -eq 0 ]

# ---- encoding ----------------------------------------------------------------------

tok --placeholders -m ph.vocab --output=pieces hostile.txt >pieces.txt 2>err.txt
check "encode --placeholders exits 0" [ $? -eq 0 ]
check "Open %s of %d files: %d is <ph1>, %s <ph2>" \
    [ "$(sed -n 1p pieces.txt | grep -o '<ph[0-9]*>' | tr '\n' ' ')" = "<ph2> <ph1> " ]
check "positional %2\$s %1\$s keep their numbers" \
    [ "$(sed -n 2p pieces.txt | grep -o '<ph[0-9]*>' | tr '\n' ' ')" = "<ph2> <ph1> " ]
check "a line of placeholders only: 9 tokens" \
    [ "$(sed -n 3p pieces.txt | grep -o '<ph[0-9]*>' | wc -l)" -eq 9 ]
check "a literal <ph1> is a placeholder too" \
    [ "$(sed -n 10p pieces.txt | grep -o '<ph[0-9]*>' | tr '\n' ' ')" = "<ph2> <ph3> <ph1> " ]
check "above 32 distinct placeholders, the rest is text" \
    [ "$(sed -n 15p pieces.txt | grep -o '<ph[0-9]*>' | sort -u | wc -l)" -eq 32 ]
check "empty lines stay empty" [ -z "$(sed -n 5p pieces.txt)" ] && [ -z "$(sed -n 13p pieces.txt)" ]
check "encoding keeps the line count" [ "$(lines_of pieces.txt)" -eq "$(lines_of hostile.txt)" ]
# The source and its translation number the same placeholders alike.
printf 'Open %%s of %%d files\n' | tok --placeholders -m ph.vocab --output=pieces >src.p
printf '%%d Dateien von %%s öffnen\n' | tok --placeholders -m ph.vocab --output=pieces >tgt.p
check "a translation with the same placeholders gets the same numbers" \
    [ "$(grep -o '<ph[0-9]*>' src.p | sort | tr '\n' ' ')" = "$(grep -o '<ph[0-9]*>' tgt.p | sort | tr '\n' ' ')" ]
# Deterministic across thread counts.
tok --placeholders -m ph.vocab --threads=1 corpus.txt >ids1.txt 2>/dev/null
tok --placeholders -m ph.vocab --threads=3 corpus.txt >ids3.txt 2>/dev/null
same_files "encode --placeholders: the same ids for 1 and 3 threads" ids1.txt ids3.txt

# ---- the round trip ---------------------------------------------------------------

tok --placeholders -m ph.vocab hostile.txt >h.ids 2>/dev/null

# roundtrip NAME VOCAB FILE [CLASSES]: tokenize -d --placeholders=FILE of
# tokenize --placeholders of FILE equals tokenize normalize of FILE (these
# lines change nothing under NFKC around their placeholders).
roundtrip() {
    rt_name=$1 rt_voc=$2 rt_in=$3; shift 3
    tok --placeholders "$@" -m "$rt_voc" "$rt_in" >rt.ids 2>rt.err1; rc1=$?
    tok -d --placeholders="$rt_in" "$@" -m "$rt_voc" rt.ids >rt.out 2>rt.err2; rc2=$?
    tok normalize "$rt_in" >rt.norm 2>/dev/null
    if [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ]; then
        fail "round trip $rt_name (exits $rc1, $rc2)"; cat rt.err1 rt.err2 | head -4 | sed 's/^/    /'
        return
    fi
    same_files "round trip $rt_name: the placeholders come back byte for byte" rt.norm rt.out
    check "round trip $rt_name: no warning" [ ! -s rt.err2 ]
    check "round trip $rt_name: the line count kept" \
        [ "$(lines_of rt.ids)" -eq "$(lines_of "$rt_in")" ] && [ "$(lines_of rt.out)" -eq "$(lines_of "$rt_in")" ]
}
roundtrip hostile ph.vocab hostile.txt
roundtrip corpus-small ph.vocab "$DATA/corpus-small.txt"
roundtrip mixed ph.vocab "$DATA/mixed.txt"
roundtrip "printf,tags" ph2.vocab hostile.txt --placeholder-classes=printf,tags
# The invalid UTF-8 line: repaired around the placeholders, which come back.
check "invalid UTF-8 around placeholders: repaired, placeholders intact" \
    [ "$(tail -n 1 rt.out)" = "bad �%s� <b>�</b> <i title=\"�\">x</i>" ]
# Pieces decode as ids do.
tok -d --placeholders=hostile.txt -m ph.vocab pieces.txt >from_pieces.txt 2>/dev/null
tok normalize hostile.txt >hostile.norm 2>/dev/null
same_files "decoding piece lines puts the placeholders back too" hostile.norm from_pieces.txt
# Several inputs go on through SRC.
head -n 6 pieces.txt >part1.txt; tail -n +7 pieces.txt >part2.txt
tok -d --placeholders=hostile.txt -m ph.vocab part1.txt part2.txt >parts.txt 2>/dev/null
same_files "SRC runs on over several inputs" hostile.norm parts.txt
# "-d --placeholders SRC", SRC as the next argument, also with -d after it.
tok -d --placeholders hostile.txt -m ph.vocab h.ids >space1.txt 2>/dev/null
same_files "-d --placeholders SRC FILE" hostile.norm space1.txt
tok --placeholders hostile.txt -d -m ph.vocab <h.ids >space2.txt 2>/dev/null
same_files "--placeholders SRC -d, the ids on standard input" hostile.norm space2.txt
# Through the whole pipeline's last step, from standard input.
tok --placeholders -m ph.vocab <hostile.txt 2>/dev/null | tok -d -m ph.vocab --placeholders=hostile.txt >stdin.txt 2>/dev/null
same_files "the pipe form gives the same" hostile.norm stdin.txt

# ---- tokens the source lacks ------------------------------------------------------

printf 'Open %%s of %%d files\nplain\n%%s\n' >src3.txt
{ printf 'Open %%s of %%d files\n' | tok --placeholders -m ph.vocab --output=pieces
  printf '<ph1> ▁ <0x78> ▁ <ph7>\n<ph1> ▁ <ph1> ▁ <ph3>\n'; } >crafted.txt
tok -d --placeholders=src3.txt -m ph.vocab --input=pieces crafted.txt >dropped.txt 2>err.txt
rc=$?
check "tokens the source lacks: exit 0" [ "$rc" -eq 0 ]
check "the tokens the source line has come back" [ "$(sed -n 1p dropped.txt)" = "Open %s of %d files" ]
check "a token the source line lacks is dropped" [ "$(sed -n 2p dropped.txt)" = "x " ]
check "a token repeated comes back each time" [ "$(sed -n 3p dropped.txt)" = "%s %s " ]
expect_stderr 'crafted.txt:2: warning: 2 placeholder tokens that the source line does not have dropped' \
    "the warning names the line and counts the tokens dropped"
expect_stderr 'crafted.txt:3: warning: 1 placeholder token that the source line does not have dropped' \
    "a warning for each line"
check "two warnings in all" [ "$(wc -l <err.txt)" -eq 2 ]
# Without --placeholders a token decodes as its piece.
printf '4\n' | tok -d -m ph.vocab >asis.txt
check "without --placeholders, <ph1> decodes as the text <ph1>" [ "$(cat asis.txt)" = "<ph1>" ]

# ---- errors ------------------------------------------------------------------------

expect_status 1 "encode --placeholders with a vocabulary without the tokens fails" \
    tok --placeholders -m plain.vocab hostile.txt
expect_stderr "plain.vocab: .*no placeholder tokens: learn it with 'tokenize learn --placeholders'" \
    "the error names the vocabulary and says how to learn one"
expect_status 1 "decode --placeholders with a vocabulary without the tokens fails" \
    tok -d --placeholders=hostile.txt -m plain.vocab rt.ids
expect_stderr "no placeholder tokens" "and says so"
head -n 3 hostile.txt >short.txt
expect_status 1 "SRC shorter than the input fails" tok -d --placeholders=short.txt -m ph.vocab h.ids
expect_stderr "short.txt: has fewer lines than the input" "the error names SRC"
check "the lines before are written" [ "$(lines_of out.txt)" -eq 3 ]
cat hostile.txt hostile.txt >long.txt
expect_status 1 "SRC longer than the input fails" tok -d --placeholders=long.txt -m ph.vocab h.ids
expect_stderr "long.txt:17: .*more lines than the input" "the error names SRC and its line"
expect_status 1 "a missing SRC fails" tok -d --placeholders=nothere.txt -m ph.vocab h.ids
expect_stderr "nothere.txt" "naming it"
expect_status 2 "-d --placeholders without SRC is a usage error" tok -d --placeholders -m ph.vocab h.ids
expect_stderr "placeholders=SRC" "saying how"
expect_status 2 "--placeholders=SRC when encoding is a usage error" tok --placeholders=x -m ph.vocab hostile.txt
expect_status 2 "an unknown class is a usage error" tok --placeholders --placeholder-classes=printf,xml -m ph.vocab hostile.txt
expect_stderr "'xml'" "naming the class"
expect_status 2 "--placeholder-classes without --placeholders is a usage error" \
    tok --placeholder-classes=printf -m ph.vocab hostile.txt
expect_status 2 "normalize --placeholders is a usage error" tok normalize --placeholders hostile.txt
expect_status 2 "--placeholders=- with the input on standard input too is a usage error" \
    tok -d --placeholders=- -m ph.vocab
tok -d --placeholders=- -m ph.vocab h.ids <hostile.txt >fromstdin.txt 2>/dev/null
same_files "--placeholders=- reads the source text from standard input" hostile.norm fromstdin.txt

# ---- nothing else changed -------------------------------------------------------------

tok -m ph.vocab corpus.txt >noph.ids 2>/dev/null
tok -d -m ph.vocab noph.ids >noph.txt 2>/dev/null
tok normalize corpus.txt >corpus.norm 2>/dev/null
same_files "without --placeholders the usual round trip holds" corpus.norm noph.txt
if cmp -s noph.ids ids1.txt; then fail "--placeholders changed nothing"; else pass "--placeholders changes the ids"; fi
