#!/bin/sh
# test_tokenize.sh - end-to-end tests of tokenize(1): learning a vocabulary,
# the round-trip contract decode(encode(x)) == normalize(x) on hostile text
# (tests/data/mixed.txt, invalid UTF-8, megabyte lines, tiny vocabularies),
# the vocabulary file format and what a corrupt one gives, errors that name
# FILE:LINE, BPE-dropout, determinism across runs and threads, several inputs,
# and answering each line of an interactive pipe at once.
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_tokenize.sh
. "$ROOT/tests/cli/lib.sh"

TOKENIZE="$BIN/tokenize"
DATA="$ROOT/tests/data"
# Every call that could hang runs under timeout, so a hang is a failure, not a
# stuck test run.  Generous because the sanitizer build is several times slower.
TMO=${TOKENIZE_TEST_TIMEOUT:-60}

if [ ! -x "$TOKENIZE" ]; then fail "no $TOKENIZE"; exit 0; fi

tok() { timeout "$TMO" "$TOKENIZE" "$@"; }

lines_of() { wc -l <"$1" | tr -d ' '; }

# ends_with_newline FILE: true for an empty file or one whose last byte is '\n'.
ends_with_newline() {
    [ ! -s "$1" ] || [ "$(tail -c 1 "$1" | od -An -tx1 | tr -d ' \n')" = 0a ]
}

# empty_lines FILE: the numbers of its empty lines, sorted for comm.
empty_lines() { grep -an '^$' "$1" | cut -d: -f1 | LC_ALL=C sort; }

# same NAME EXPECTED GOT: passes when the two files are equal byte for byte;
# otherwise shows where they first differ.
same() {
    if cmp -s "$2" "$3"; then pass "$1"; else
        fail "$1 ($3 differs from $2)"
        cmp "$2" "$3" 2>&1 | sed 's/^/    /' | head -2
        at=$(cmp "$2" "$3" 2>/dev/null | sed -n 's/.*line \([0-9]*\).*/\1/p')
        if [ -n "$at" ]; then
            printf '    expected: '; sed -n "${at}p" "$2" | head -c 120 | od -An -c | head -2
            printf '    got:      '; sed -n "${at}p" "$3" | head -c 120 | od -An -c | head -2
        fi
    fi
}

# differ NAME A B: passes when the two files are not equal.
differ() { if cmp -s "$2" "$3"; then fail "$1 ($2 and $3 are identical)"; else pass "$1"; fi; }

# reference IN: prints the name of the file holding 'tokenize normalize' of
# IN (computed once; the default vocabulary normalisation, NFKC).
reference() {
    if [ ! -f "$1.norm" ]; then tok normalize <"$1" >"$1.norm" 2>/dev/null; fi
    echo "$1.norm"
}

# roundtrip NAME VOCAB IN REF [ENCODE-OPTION...]: encodes IN with VOCAB, decodes
# the result, and checks: both exit 0, the decoded text equals REF byte for
# byte, the line count is kept in both steps, the output ends with a newline,
# and every empty input line is an empty line in both outputs.
roundtrip() {
    rt_name=$1 rt_voc=$2 rt_in=$3 rt_ref=$4; shift 4
    rt=rt.$(printf '%s' "$rt_name" | tr -c 'A-Za-z0-9' '_')
    tok -m "$rt_voc" "$@" <"$rt_in" >"$rt.enc" 2>"$rt.err1"; rc1=$?
    tok -d -m "$rt_voc" <"$rt.enc" >"$rt.dec" 2>"$rt.err2"; rc2=$?
    if [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ]; then
        fail "round trip $rt_name (encode exit $rc1, decode exit $rc2; 124 is a timeout after ${TMO}s)"
        cat "$rt.err1" "$rt.err2" | head -5 | sed 's/^/    stderr: /'
        return
    fi
    same "round trip $rt_name: decode(encode(x)) == normalize(x)" "$rt_ref" "$rt.dec"
    n_in=$(lines_of "$rt_in") n_enc=$(lines_of "$rt.enc") n_dec=$(lines_of "$rt.dec")
    if [ "$n_in" -eq "$n_enc" ] && [ "$n_in" -eq "$n_dec" ] && ends_with_newline "$rt.enc" \
        && ends_with_newline "$rt.dec"; then
        pass "round trip $rt_name: $n_in lines in, $n_enc encoded, $n_dec decoded"
    else
        fail "round trip $rt_name: line counts $n_in in, $n_enc encoded, $n_dec decoded (or no final newline)"
    fi
    empty_lines "$rt_in" >"$rt.e0"; empty_lines "$rt.enc" >"$rt.e1"; empty_lines "$rt.dec" >"$rt.e2"
    if [ -z "$(LC_ALL=C comm -23 "$rt.e0" "$rt.e1")" ] && [ -z "$(LC_ALL=C comm -23 "$rt.e0" "$rt.e2")" ]; then
        pass "round trip $rt_name: $(wc -l <"$rt.e0" | tr -d ' ') empty lines stay in place"
    else
        fail "round trip $rt_name: an empty input line is not empty in the output"
    fi
}

# vocab_ok NAME FILE SIZE: the vocabulary file is plain text: a header with
# the piece count, then exactly SIZE lines of PIECE<TAB>SCORE<TAB>TYPE.
vocab_ok() {
    head -n 1 "$2" >vh.txt
    bad=$(awk -F'\t' 'NR > 1 && (NF != 3 || $1 == "" || $2 !~ /^-?[0-9][0-9.eE+-]*$/ ||
                       $3 !~ /^(normal|control|user|byte)$/) { print NR; exit }' "$2")
    if grep -q "^#tfm-vocab 1 .*pieces=$3\( \|\$\)" vh.txt && [ "$(lines_of "$2")" -eq $(($3 + 1)) ] \
        && [ -z "$bad" ]; then
        pass "$1: plain-text vocabulary, header and $3 PIECE<TAB>SCORE<TAB>TYPE lines"
    else
        fail "$1: not a well-formed vocabulary of $3 pieces (header '$(cat vh.txt)', $(lines_of "$2") lines, first bad line '$bad')"
    fi
}

# pieces_of VOCAB TEXT: prints TEXT encoded as pieces, one per line.
pieces_of() { printf '%s\n' "$2" | tok -m "$1" --output pieces 2>/dev/null | tr ' ' '\n'; }

# ---- test data ------------------------------------------------------------------

cp "$DATA/mixed.txt" mixed.txt
cp "$DATA/corpus-small.txt" corpus.txt
# The plain-ASCII lines: a small alphabet, so that a few hundred pieces hold merges.
LC_ALL=C grep -v '[^ -~]' corpus.txt >ascii.txt
printf 'a b c\nabc abc\nbca\n' >tiny.txt

# Invalid UTF-8, one kind per line (octal escapes: POSIX printf has no \x).
{
    printf 'a valid line first\n'
    printf 'overlong: \300\257 \340\200\257 \360\200\200\257 and an overlong NUL \300\200\n'
    printf 'truncated: \343\201 in the middle and at the end \360\237\230\n'
    printf '\200 lone continuation bytes \277\277 x \200\n'
    printf 'bytes FF and FE: \377 \376 \377\377\n'
    printf 'surrogates: \355\240\200 \355\277\277 and a CESU-8 pair \355\240\275\355\262\251\n'
    printf 'beyond U+10FFFF: \364\220\200\200 and five/six-byte forms \370\210\200\200\200 \374\204\200\200\200\200\n'
    printf '\n'
    printf 'latin-1 caf\351 na\357ve next to UTF-8 caf\303\251, then a lone lead \303\n'
    printf '\303\n'
    printf '\377\n'
    printf '\n'
    printf 'NUL inside: a\000b, and valid \342\226\201 marker\n'
    printf 'CR LF line\r\n'
    printf '\t\001\033[0m\177 controls then invalid \300\n'
    printf 'last line\n'
} >bad.txt

# Three valid lines then one invalid on line 3, for the FILE:LINE checks.
printf 'first line\nsecond line\nthird \377 line\nfourth line\n' >warn.txt

# ---- learning ---------------------------------------------------------------------

# The shared vocabulary of a translation task: learnt from the source and the
# target side at once.  mixed.txt has thousands of rare characters, which the
# default character coverage (0.9995) puts in the alphabet: the size must be
# well above that for the vocabulary to hold merges.
VS=8000
tok learn --vocab-size $VS --threads 2 corpus.txt mixed.txt -o voc.txt 2>learn.err; rc=$?
if [ "$rc" -ne 0 ] || [ ! -s voc.txt ]; then
    fail "learn --vocab-size $VS from two files (exit $rc)"; sed 's/^/    stderr: /' learn.err | head -5
    exit 1
fi
pass "learn --vocab-size $VS from two files"
V=voc.txt
vocab_ok "learn" $V $VS
check "vocab header records normalize=nfkc case-fold=no" \
    grep -q '^#tfm-vocab 1 .*normalize=nfkc.*case-fold=no' $V
check "vocab starts with the specials <pad> <unk> <s> </s> as control pieces" \
    [ "$(sed -n '2,5p' $V | cut -f1,3 | tr '\t\n' ':,')" = "<pad>:control,<unk>:control,<s>:control,</s>:control," ]
check "vocab holds the 256 byte pieces <0x00>..<0xFF>, grep-able" \
    [ "$(grep -c '^<0x[0-9A-F][0-9A-F]>	.*	byte$' $V)" -eq 256 ]
check "vocab is grep-able: <0x41> is a byte piece" grep -q '^<0x41>	[^	]*	byte$' $V
check "vocab has learnt merges (normal pieces of two or more characters)" \
    [ -n "$(grep '	normal$' $V | cut -f1 | grep -E '^..' | head -1)" ]

# Learning twice, through -o and through standard output, gives the same file;
# one thread gives what two give; two files give what their concatenation on
# standard input gives.
tok learn --vocab-size $VS --threads 2 corpus.txt mixed.txt >voc.again 2>/dev/null
same "learning twice gives identical vocabularies (-o FILE and stdout)" $V voc.again
tok learn --vocab-size $VS --threads 1 corpus.txt mixed.txt -o voc.t1 2>/dev/null
same "learn: --threads 1 and --threads 2 give identical vocabularies" $V voc.t1
cat corpus.txt mixed.txt | tok learn --vocab-size $VS - -o voc.stdin 2>/dev/null
same "learn: two files give what their concatenation on '-' gives" $V voc.stdin

# ---- the round trip ---------------------------------------------------------------

REF=$(reference mixed.txt)
check "valid text: normalize keeps the line count" [ "$(lines_of "$REF")" -eq "$(lines_of mixed.txt)" ]
roundtrip "mixed.txt" $V mixed.txt "$REF"
check "valid text gives no warnings" [ ! -s rt.mixed_txt.err1 ]
cp rt.mixed_txt.enc mixed.ids
check "id lines are decimal ids separated by single spaces" \
    [ -z "$(grep -anvE '^([0-9]+( [0-9]+)*)?$' mixed.ids | head -1)" ]
check "encoding never emits the control pieces <pad> <unk> <s> </s> (ids 0-3)" \
    [ -z "$(tr ' ' '\n' <mixed.ids | grep -xE '[0-3]' | head -1)" ]
roundtrip "invalid UTF-8" $V bad.txt "$(reference bad.txt)"
roundtrip "pieces" $V mixed.txt "$REF" --output pieces
cp rt.pieces.enc mixed.pieces
tok -d -m $V --input pieces <mixed.pieces >pieces.forced.dec 2>/dev/null
same "decode --input pieces (forced) gives normalize(x)" "$REF" pieces.forced.dec
tok -d -m $V --input ids <mixed.ids >ids.forced.dec 2>/dev/null
same "decode --input ids (forced) gives normalize(x)" "$REF" ids.forced.dec
awk '{ print NF }' mixed.ids >nf.ids; awk '{ print NF }' mixed.pieces >nf.pieces
same "--output pieces gives as many pieces as ids on every line" nf.ids nf.pieces

printf 'no newline at the end' >nonl.txt
tok -m $V <nonl.txt | tok -d -m $V >nonl.dec 2>/dev/null
printf 'no newline at the end\n' >nonl.want
same "a last line without newline is still a line" nonl.want nonl.dec
tok -m $V </dev/null >empty.out 2>&1
check "empty input gives empty output" [ ! -s empty.out ]

# What the header promises: a literal U+2581 and unseen characters are spelled
# with byte pieces; text that looks like a piece stays text.
check "a literal ▁ (U+2581) is spelled with byte pieces" \
    [ "$(pieces_of $V 'a▁b' | grep -c '^<0x\(E2\|96\|81\)>$')" -eq 3 ]
check "an unseen character (U+10FFFD) is spelled with its 4 byte pieces, never <unk>" \
    [ "$(pieces_of $V "$(printf 'x \364\217\277\275 y')" | grep -c '^<0x\(F4\|8F\|BF\|BD\)>$')" -eq 4 ]
printf '<s> </s> <unk> <pad> <0x41>\n' >lookalike.txt
tok -m $V <lookalike.txt >lookalike.ids 2>/dev/null
no_control_ids() { [ -s "$1" ] && [ -z "$(tr ' ' '\n' <"$1" | grep -xE '[0-3]' | head -1)" ]; }
check "text that looks like <s> </s> <unk> <pad> is not encoded as control ids" no_control_ids lookalike.ids
tok -d -m $V <lookalike.ids >lookalike.dec 2>/dev/null
same "text that looks like pieces survives the round trip" lookalike.txt lookalike.dec

# ---- normalisation ----------------------------------------------------------------

printf 'Ｈｅｌｌｏ ﬁne ① ½\n' | tok normalize >nfkc.out 2>/dev/null
printf 'Hello fine 1 1⁄2\n' >nfkc.want
same "normalize: NFKC by default (full-width, ligature, circled digit, fraction)" nfkc.want nfkc.out
printf 'e\314\201 ﬁ\n' | tok normalize --normalize nfc >nfc.out 2>/dev/null
printf '\303\251 ﬁ\n' >nfc.want
same "normalize --normalize nfc composes but keeps compatibility forms" nfc.want nfc.out
printf 'ÉCOLE Straße\n' | tok normalize --case-fold >fold.out 2>/dev/null
printf 'école strasse\n' >fold.want
same "normalize --case-fold" fold.want fold.out
tok normalize --normalize none <mixed.txt >none.out 2>/dev/null
same "normalize --normalize none leaves valid UTF-8 alone" mixed.txt none.out
printf 'a\377b\n' | tok normalize >fffd.out 2>/dev/null
printf 'a\357\277\275b\n' >fffd.want
same "normalize: an invalid byte becomes U+FFFD" fffd.want fffd.out

# ---- invalid UTF-8: warnings and --strict ----------------------------------------------

expect_status 0 "invalid UTF-8 in a file: exit 0" tok -m $V warn.txt
expect_stderr '^tokenize: warn\.txt:3: warning: .*invalid UTF-8' "invalid UTF-8 warning names warn.txt:3"
check "no warning for the valid lines 1, 2 and 4" [ -z "$(grep -E ':(1|2|4): ' err.txt)" ]
check "the line with invalid UTF-8 is still encoded in place" [ "$(lines_of out.txt)" -eq 4 ]
expect_status 0 "invalid UTF-8 on stdin: exit 0" sh -c 'timeout "$1" "$2" -m "$3" <warn.txt' sh "$TMO" "$TOKENIZE" $V
expect_stderr '^tokenize: -:3: warning: .*invalid UTF-8' "invalid UTF-8 warning on stdin names -:3"
expect_status 1 "--strict: invalid UTF-8 is an error (exit 1)" tok -m $V --strict warn.txt
expect_stderr '^tokenize: warn\.txt:3: ' "--strict error names warn.txt:3"
expect_status 1 "normalize --strict: invalid UTF-8 is an error (exit 1)" tok normalize --strict warn.txt
expect_stderr '^tokenize: warn\.txt:3: ' "normalize --strict error names warn.txt:3"
expect_status 0 "--strict accepts valid text" tok -m $V --strict mixed.txt
# learn reads in batches of 8,192 lines: the line named is the file's, not the batch's
awk 'BEGIN { for (i = 1; i <= 9000; i++) print "word" i % 50 " and more"; print "bad \377 line" }' >late.txt
expect_status 1 "learn --strict: invalid UTF-8 on line 9,001 is an error" tok learn --strict --vocab-size 300 late.txt
expect_stderr '^tokenize: late\.txt: line 9001: ' "learn --strict names the line of the file (9001), past the first batch"
expect_status 0 "-q: invalid UTF-8 still exits 0" tok -q -m $V warn.txt
check "-q silences the warning" [ ! -s err.txt ]
i=0; while [ $i -lt 150 ]; do printf 'bad \377 line\n'; i=$((i + 1)); done >many.txt
tok -m $V many.txt >/dev/null 2>many.err
n=$(lines_of many.err)
between() { [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
check "150 invalid lines: the first 100 warnings and a line saying the rest are not shown ($n lines)" \
    between "$n" 100 102

# ---- lines longer than 1 MB ---------------------------------------------------------

# 1.7 MB of mixed text on one line, between two short lines.
{ echo "before the long line"; cat mixed.txt mixed.txt mixed.txt mixed.txt mixed.txt | tr '\n' ' '
  echo; echo "after the long line"; } >long1.txt
roundtrip "a 1.7 MB line of mixed text" $V long1.txt "$(reference long1.txt)"
# 1.5 MB of one character, no spaces: one huge word for the merge loop.
{ echo "before"; head -c 1500000 /dev/zero | tr '\0' 'e'; echo; echo "after"; } >long2.txt
roundtrip "a 1.5 MB word of one repeated character" $V long2.txt "$(reference long2.txt)"

# 1.6 MB of Chinese and Thai, which put no spaces between words: one huge word
# of many different pieces.
{ echo "before"; yes '我们今天去公园散步。学习中文需要很多耐心。ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ' | head -n 10000 | tr -d '\n'
  echo; echo "after"; } >long3.txt
roundtrip "a 1.6 MB line of Chinese and Thai without spaces" $V long3.txt "$(reference long3.txt)"
# 1 MB: one letter and 500,000 combining marks whose canonical order (classes
# 230, 220, 230, 220, ...) needs reordering everywhere; canonical reordering
# done by pairwise swaps takes quadratic time here.  A shorter timeout, as a
# linear pass takes well under a second.
{ printf 'before\na'; yes "$(printf '\314\201\314\226')" | head -n 250000 | tr -d '\n'; printf '\nafter\n'; } >long4.txt
tmo_saved=$TMO; TMO=10
roundtrip "a 1 MB line of 500,000 combining marks out of canonical order" $V long4.txt "$(reference long4.txt)"
TMO=$tmo_saved

# ---- a vocabulary smaller than the alphabet -------------------------------------------

tok learn --vocab-size 300 mixed.txt -o v300.txt 2>learn300.err; rc=$?
if [ "$rc" -eq 0 ]; then
    pass "learn --vocab-size 300 (fewer pieces than characters in mixed.txt)"
    vocab_ok "learn 300" v300.txt 300
    roundtrip "vocabulary of 300, mixed.txt" v300.txt mixed.txt "$REF"
    roundtrip "vocabulary of 300, invalid UTF-8" v300.txt bad.txt "$(reference bad.txt)"
else
    fail "learn --vocab-size 300 (exit $rc)"; sed 's/^/    stderr: /' learn300.err | head -5
fi

# ---- sizes the corpus cannot give ---------------------------------------------------

expect_status 1 "learn: a size below the minimum (specials + 256 bytes) is an error" \
    tok learn --vocab-size 100 tiny.txt -o small.vocab
expect_stderr '^tokenize: .*(26[0-9]|minimum|at least|too small)' "learn: the message says the minimum"
expect_status 1 "learn: --vocab-size 100000 on a tiny corpus is an error" \
    tok learn --vocab-size 100000 tiny.txt -o huge.vocab
expect_stderr '^tokenize: .*[0-9]' "learn: the message says what size the corpus supports"
check "learn: a failed learn writes no -o file" [ ! -e huge.vocab ]
echo "old contents" >keep.vocab
tok learn --vocab-size 100000 tiny.txt -o keep.vocab 2>/dev/null
check "learn: a failed learn leaves an existing -o file untouched" [ "$(cat keep.vocab)" = "old contents" ]
expect_status 0 "learn --soft-vocab-limit: a too large size gives fewer pieces" \
    tok learn --vocab-size 100000 --soft-vocab-limit tiny.txt -o soft.vocab
tok learn -q --vocab-size 100000 --soft-vocab-limit tiny.txt -o softq.vocab 2>softq.err
check "learn -q: nothing on stderr" [ ! -s softq.err ]
same "learn -q: the same vocabulary" soft.vocab softq.vocab
n=$(sed -n '1s/.*pieces=\([0-9]*\).*/\1/p' soft.vocab)
if [ -n "$n" ] && [ "$n" -gt 260 ] && [ "$n" -lt 100000 ]; then
    pass "learn --soft-vocab-limit: $n pieces"
    vocab_ok "soft limit" soft.vocab "$n"
    roundtrip "soft-limit vocabulary, invalid UTF-8" soft.vocab bad.txt "$(reference bad.txt)"
else
    fail "learn --soft-vocab-limit: header says '$n' pieces"
fi

# ---- corrupt vocabularies -------------------------------------------------------------

head -n 20 mixed.txt >short.txt
# corrupt NAME FILE LINE-PATTERN: encoding with FILE fails with exit 1 and a
# "tokenize: FILE:LINE: ..." message.
corrupt() {
    expect_status 1 "corrupt vocabulary ($1): exit 1" tok -m "$2" short.txt
    expect_stderr "^tokenize: $2:$3: " "corrupt vocabulary ($1): message names $2:$3"
}
{ head -n 500 $V; sed -n 501p $V | cut -f1 | tr -d '\n'; printf '\t'; } >trunc.vocab
corrupt "truncated inside line 501" trunc.vocab 501
head -n 500 $V >short.vocab
expect_status 1 "corrupt vocabulary (fewer pieces than the header says): exit 1" tok -m short.vocab short.txt
expect_stderr '^tokenize: short\.vocab(:[0-9]+)?: ' "corrupt vocabulary (fewer pieces than the header says): message names it"
gzip -9nc $V >gz.vocab
corrupt "gzip-compressed, binary garbage" gz.vocab 1
sed '1s/^#tfm-vocab 1 /#tfm-vocab 9 /' $V >ver.vocab
corrupt "unknown format version" ver.vocab 1
{ echo "#sentencepiece vocab"; tail -n +2 $V; } >hdr.vocab
corrupt "wrong header" hdr.vocab 1
tail -n +2 $V >nohdr.vocab
corrupt "no header" nohdr.vocab 1
awk 'NR == 400 { print prev; prev = $0; next } { print; prev = $0 }' $V >dup.vocab
corrupt "duplicate piece" dup.vocab 400
awk 'NR == 500 { gsub(/\t/, " ") } { print }' $V >notab.vocab
corrupt "missing tab" notab.vocab 500
awk -F'\t' 'BEGIN { OFS = "\t" } NR == 600 { $2 = "abc" } { print }' $V >score.vocab
corrupt "bad score" score.vocab 600
awk -F'\t' 'BEGIN { OFS = "\t" } NR == 700 { $3 = "weird" } { print }' $V >type.vocab
corrupt "unknown piece type" type.vocab 700
: >empty.vocab
expect_status 1 "corrupt vocabulary (empty file): exit 1" tok -m empty.vocab short.txt
expect_stderr '^tokenize: empty\.vocab(:[0-9]+)?: ' "corrupt vocabulary (empty file): message names empty.vocab"
expect_status 1 "decode with a corrupt vocabulary: exit 1" tok -d -m dup.vocab mixed.ids
expect_stderr '^tokenize: dup\.vocab:400: ' "decode with a corrupt vocabulary: message names dup.vocab:400"
expect_status 1 "a missing vocabulary file: exit 1" tok -m nothere.vocab short.txt
expect_stderr '^tokenize: nothere\.vocab: .*No such file' "a missing vocabulary file: message names it"

# ---- decoding bad input ----------------------------------------------------------------

printf '5 6 7\n5 %d 7\n' $VS >range.ids
expect_status 1 "decode: id $VS in a vocabulary of $VS is an error" tok -d -m $V range.ids
expect_stderr '^tokenize: range\.ids:2: ' "decode: the out-of-range id error names range.ids:2"
printf '5\n-1\n' | tok -d -m $V --input ids >/dev/null 2>neg.err; rc=$?
check "decode: a negative id is an error naming -:2 (exit $rc)" \
    sh -c '[ "$1" -eq 1 ] && grep -q "^tokenize: -:2: " neg.err' sh "$rc"
printf '%d %d\n' $((VS - 1)) $((VS - 2)) | tok -d -m $V >/dev/null 2>&1
check "decode: the largest id ($((VS - 1))) is fine" [ $? -eq 0 ]
printf 'this-is-no-piece-at-all\n' | tok -d -m $V --input pieces >/dev/null 2>unk.err; rc=$?
check "decode --input pieces: an unknown piece is an error naming -:1 (exit $rc)" \
    sh -c '[ "$1" -eq 1 ] && grep -q "^tokenize: -:1: " unk.err' sh "$rc"
printf '▁He llo\n' | tok -d -m $V --input ids >/dev/null 2>nonum.err; rc=$?
check "decode --input ids: a piece line is an error naming -:1 (exit $rc)" \
    sh -c '[ "$1" -eq 1 ] && grep -q "^tokenize: -:1: " nonum.err' sh "$rc"
# Digits are pieces too: "1 2 3" is ids by default, pieces when forced.
if grep -q '^1	.*	normal$' $V && grep -q '^2	.*	normal$' $V && grep -q '^3	.*	normal$' $V; then
    printf '1 2 3\n' | tok -d -m $V --input pieces >digits.pieces 2>/dev/null
    printf '1 2 3\n' | tok -d -m $V >digits.auto 2>/dev/null
    check "decode --input pieces reads '1 2 3' as the pieces 1, 2, 3" [ "$(cat digits.pieces)" = "123" ]
    check "decode reads '1 2 3' as ids by default" [ "$(cat digits.auto)" != "123" ]
else
    skip "decode --input pieces on digit pieces (no digit pieces in the vocabulary)"
fi

# ---- BPE-dropout ----------------------------------------------------------------------

tok -m $V --dropout 0.1 --seed 1 mixed.txt >drop1.a 2>/dev/null
tok -m $V --dropout 0.1 --seed 1 mixed.txt >drop1.b 2>/dev/null
tok -m $V --dropout 0.1 --seed 2 mixed.txt >drop2 2>/dev/null
same "--dropout 0.1 --seed 1 twice gives identical output" drop1.a drop1.b
differ "--dropout 0.1 differs from no dropout" mixed.ids drop1.a
differ "--dropout 0.1: seeds 1 and 2 differ" drop1.a drop2
check "--dropout 0.1 gives more pieces than no dropout" [ "$(wc -w <drop1.a)" -gt "$(wc -w <mixed.ids)" ]
tok -d -m $V drop1.a >drop1.dec 2>/dev/null
same "--dropout 0.1 still round-trips" "$REF" drop1.dec
check "--dropout 0.1 keeps the line count" [ "$(lines_of drop1.a)" -eq "$(lines_of mixed.txt)" ]
tok -m $V --dropout 0 mixed.txt >drop0 2>/dev/null
same "--dropout 0 is the deterministic segmentation" mixed.ids drop0
# each line draws from its own generator, numbered over all the inputs: two
# files give what their concatenation gives, on any number of threads
cat mixed.txt mixed.txt >mixed2.txt
tok -m $V --dropout 0.1 --seed 1 --threads 1 mixed2.txt >drop.cat 2>/dev/null
tok -m $V --dropout 0.1 --seed 1 --threads 2 mixed.txt mixed.txt >drop.two 2>/dev/null
same "--dropout: two files give what their concatenation gives (threads 1 and 2)" drop.cat drop.two
tail -n "$(lines_of mixed.txt)" drop.two >drop.second
differ "--dropout: the second copy of a file draws other merges than the first" drop1.a drop.second

# ---- determinism across threads, sampling -------------------------------------------------

tok -m $V --threads 1 mixed.txt >t1.ids 2>/dev/null
tok -m $V --threads 2 mixed.txt >t2.ids 2>/dev/null
same "encode: --threads 1 and --threads 2 give identical ids" t1.ids t2.ids
same "encode: file argument and stdin give identical ids" mixed.ids t2.ids

tok learn --vocab-size 500 --input-sentence-size 400 --seed 3 ascii.txt -o iss.a 2>/dev/null
tok learn --vocab-size 500 --input-sentence-size 400 --seed 3 ascii.txt -o iss.b 2>/dev/null
tok learn --vocab-size 500 --input-sentence-size 400 --seed 4 ascii.txt -o iss.c 2>/dev/null
if [ -s iss.a ]; then
    same "learn --input-sentence-size 400 --seed 3 twice: identical" iss.a iss.b
    differ "learn --input-sentence-size 400: seeds 3 and 4 sample differently" iss.a iss.c
else
    fail "learn --input-sentence-size 400 --seed 3 gave no vocabulary"
fi

# ---- options of learn -----------------------------------------------------------------

tok learn --vocab-size 600 --user-symbols '<sep>,[MASK]' ascii.txt -o user.vocab 2>user.err; rc=$?
if [ "$rc" -eq 0 ]; then
    check "--user-symbols: the symbols are user pieces right after the specials" \
        [ "$(sed -n '6,7p' user.vocab | cut -f1,3 | tr '\t\n' ':,')" = "<sep>:user,[MASK]:user," ]
    pieces_of user.vocab 'left <sep> right[MASK]end' >user.pieces
    check "--user-symbols: <sep> is one piece" grep -qx '<sep>' user.pieces
    check "--user-symbols: [MASK] is one piece, even inside a word" grep -qx '\[MASK\]' user.pieces
    printf 'left <sep> right[MASK]end\n' >user.txt
    roundtrip "user symbols" user.vocab user.txt user.txt
else
    fail "learn --user-symbols (exit $rc)"; sed 's/^/    stderr: /' user.err | head -5
fi

tok learn --vocab-size 400 --normalize none mixed.txt -o none.vocab 2>/dev/null
check "learn --normalize none records it in the header" grep -q '^#tfm-vocab 1 .*normalize=none' none.vocab
roundtrip "--normalize none vocabulary gives the text back unchanged" none.vocab mixed.txt mixed.txt

tok learn --vocab-size 400 --case-fold --max-piece-length 3 ascii.txt -o fold.vocab 2>/dev/null
check "learn --case-fold records it in the header" grep -q '^#tfm-vocab 1 .*case-fold=yes' fold.vocab
short_pieces() { [ -n "$(grep '	normal$' "$1" | cut -f1 | grep -E '^...$' | head -1)" ] &&
                 [ -z "$(grep '	normal$' "$1" | cut -f1 | grep -E '^.{4,}$' | head -1)" ]; }
check "learn --max-piece-length 3: pieces of 3 characters, none longer" short_pieces fold.vocab
tok normalize -m fold.vocab mixed.txt >fold.ref 2>/dev/null
folded() { grep -q 'die strasse ist nass' "$1" && ! grep -q 'Die Straße' "$1"; }
check "normalize -m VOCAB folds case as the vocabulary does" folded fold.ref
roundtrip "case-folding vocabulary" fold.vocab mixed.txt fold.ref

# ---- several inputs, '-' ------------------------------------------------------------------

sed -n '1,1000p' mixed.txt >part1.txt
sed -n '1001,2000p' mixed.txt >part2.txt
sed -n '2001,$p' mixed.txt >part3.txt
tok -m $V part1.txt - part3.txt <part2.txt >parts.ids 2>/dev/null
same "several inputs in order, '-' as stdin: same ids as the whole file" mixed.ids parts.ids
printf 'good\n' >good.txt
expect_status 0 "warnings in the second of two files" tok -m $V good.txt warn.txt
expect_stderr '^tokenize: warn\.txt:3: warning' "warnings count lines per file (warn.txt:3)"

# ---- usage errors ---------------------------------------------------------------------

expect_status 2 "learn without --vocab-size is a usage error" tok learn tiny.txt
expect_status 2 "--vocab-size abc is a usage error" tok learn --vocab-size abc tiny.txt
expect_status 2 "--output bogus is a usage error" tok -m $V --output bogus short.txt
expect_status 2 "decode without -m is a usage error" tok -d short.txt

# ---- pipes ---------------------------------------------------------------------------

cat mixed.txt mixed.txt mixed.txt mixed.txt mixed.txt >big.txt
{ tok -m $V big.txt 2>pipe1.err; } | head -n 1 >/dev/null
check "encode into a pipe closed early ends quietly" [ ! -s pipe1.err ]
cat mixed.ids mixed.ids mixed.ids mixed.ids mixed.ids >big.ids
{ tok -d -m $V big.ids 2>pipe2.err; } | head -n 1 >/dev/null
check "decode into a pipe closed early ends quietly" [ ! -s pipe2.err ]

# interactive NAME LINE1 LINE2 ARGS...: tokenize ARGS reads a FIFO that stays
# open; each line written must be answered before the input ends.
interactive() {
    i_name=$1 i_l1=$2 i_l2=$3; shift 3
    rm -f fifo; mkfifo fifo || { fail "$i_name: mkfifo"; return; }
    : >i.out
    timeout "$TMO" "$TOKENIZE" "$@" <fifo >i.out 2>i.err &
    i_pid=$!
    exec 3>fifo
    trap '' PIPE # should tokenize die, a write to the FIFO fails instead of killing this shell
    printf '%s\n' "$i_l1" >&3
    i=0; while [ "$i" -lt 150 ] && [ "$(lines_of i.out)" -lt 1 ]; do sleep 0.1; i=$((i + 1)); done
    got1=$(lines_of i.out)
    printf '%s\n' "$i_l2" >&3
    i=0; while [ "$i" -lt 150 ] && [ "$(lines_of i.out)" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
    got2=$(lines_of i.out)
    exec 3>&-
    trap - PIPE
    wait "$i_pid"; i_rc=$?
    if [ "$got1" -eq 1 ] && [ "$got2" -eq 2 ]; then pass "$i_name: each line answered at once"
    else fail "$i_name: $got1 then $got2 lines out before the input was closed (want 1, 2)"; fi
    check "$i_name: exit 0 when the input closes" [ "$i_rc" -eq 0 ]
}
interactive "interactive encode" "Hello, world!" "Grüß Gott, 世界" -m $V
interactive "interactive decode" "$(sed -n 2p mixed.ids)" "$(sed -n 3p mixed.ids)" -d -m $V
interactive "interactive normalize" "ｆｕｌｌ" "ﬁne" normalize
