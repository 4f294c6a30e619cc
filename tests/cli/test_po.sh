#!/bin/sh
# test_po.sh - tokenize po-strings and po-merge end to end on
# tests/data/po/app.pot (c-format, python-format, plural entries, msgctxt, a
# multi-line msgid, obsolete entries, comments, a fuzzy entry, one already
# translated): the strings printed, a translation by a fake translator (no
# model) merged back and checked with gettext's tools (msgfmt --check after
# msgattrib --clear-fuzzy, msgcmp), every plural form there, every line but
# the ones written kept byte for byte, the fuzzy marks, msgstr wrapped as
# msgcat wraps it, CR LF line ends kept, the entries left untranslated named
# with their line and the exit status 3; the hostile catalogs refused with
# FILE:LINE and no output file; and one run through a tiny random model,
# with and without placeholder tokens, and examples/Makefile's %.po rule.
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin BUILD=build/release ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_po.sh
. "$ROOT/tests/cli/lib.sh"

TOK="$BIN/tokenize"
POT="$ROOT/tests/data/po/app.pot"
[ -x "$TOK" ] || { fail "no $TOK"; exit 0; }
gettext=yes
for p in msgfmt msgattrib msgcmp msgcat; do command -v $p >/dev/null 2>&1 || gettext=; done
[ -n "$gettext" ] || skip "gettext's tools are missing (apt-get install gettext): their checks"

# ---- po-strings ----------------------------------------------------------------------

"$TOK" po-strings "$POT" >strings.txt
check "po-strings exits 0" [ $? -eq 0 ]
cat >want.txt <<'EOF'
Open a file
Cannot open %s: %s
%d file was copied to %s
%d files were copied to %s
File
File
Hello %(name)s, you have %(count)d new messages
Usage: %s [OPTION]... [FILE]...
Copy the FILEs to the folder given last, keeping their dates and their
modes.
-v, --verbose   say what is being done
Save the file as
%s
100% done
<b>Bold</b> &amp; {name} and ${HOME}
EOF
same_files "po-strings: a line per segment of each untranslated entry, msgid then msgid_plural" \
    want.txt strings.txt
"$TOK" po-strings <"$POT" >stdin.txt
same_files "po-strings reads standard input" strings.txt stdin.txt
"$TOK" po-strings --all "$POT" >all.txt
check "po-strings --all adds the translated entry" [ "$(lines_of all.txt)" -eq 16 ] &&
    grep -qx Quit all.txt

# ---- po-merge ------------------------------------------------------------------------

# The fake translator: "FR " before each line, placeholders kept.
sed 's/^/FR /' strings.txt >fr.txt
"$TOK" po-merge -o fr.po "$POT" fr.txt 2>merge.err
check "po-merge exits 0 when every entry is translated" [ $? -eq 0 ] && [ ! -s merge.err ]
ls fr.po.tmp.* >/dev/null 2>&1 && fail "po-merge -o left a temporary file"
"$TOK" po-merge "$POT" fr.txt >stdout.po
same_files "po-merge writes standard output without -o" fr.po stdout.po
if [ -n "$gettext" ]; then
    msgattrib --clear-fuzzy fr.po -o clear.po
    check "msgfmt --check accepts the catalog (fuzzy marks cleared)" msgfmt --check -o /dev/null clear.po
    check "msgcmp finds every msgid of the template" msgcmp clear.po "$POT"
    msgattrib --untranslated --no-obsolete clear.po >untranslated.po
    check "no entry left untranslated" [ "$(grep -c '^msgid ' untranslated.po)" -le 1 ]
    msgattrib --only-fuzzy --no-obsolete fr.po | grep -c '^msgid ' >n_fuzzy.txt
    check "every entry translated is fuzzy, the translated one is not (13 + header)" \
        [ "$(cat n_fuzzy.txt)" -eq 13 ]
    msgattrib --clear-fuzzy --no-fuzzy "$POT" 2>/dev/null | msgcat - 2>/dev/null >/dev/null
fi
check "the plural entry has both forms (nplurals=2)" \
    grep -qx 'msgstr\[1\] "FR %d files were copied to %s"' fr.po
check "msgstr[0] is the singular's translation" \
    grep -qx 'msgstr\[0\] "FR %d file was copied to %s"' fr.po
check "a multi-line msgid: its newlines and leading spaces kept" \
    grep -qx '"  FR -v, --verbose   say what is being done\\n"' fr.po
check "whitespace only: copied" grep -qx 'msgstr "   "' fr.po
check "the translated entry kept" grep -qx 'msgstr "Quitter"' fr.po
check "fuzzy added to a flags line" grep -qx '#, fuzzy, c-format' fr.po
check "new '#, fuzzy' lines, and the fuzzy entry keeps its one mark" \
    [ "$(grep -c '^#, fuzzy$' fr.po)" -eq 8 ] && [ "$(grep -c fuzzy fr.po)" -eq 13 ]

# Every line but the ones written: the same bytes.  Drop the msgstr lines
# (and their continuations) and the fuzzy marks from both files.
strip() {
    awk '/^msgstr/ { s = 1; next } s && /^"/ { next } { s = 0 }
         /^#, fuzzy$/ { next } { sub(/^#, fuzzy, /, "#, "); print }' "$1"
}
strip "$POT" >in.kept
strip fr.po >out.kept
same_files "every other line kept byte for byte" in.kept out.kept
check "the obsolete entries kept" grep -qx '#~ msgstr "Vieux"' fr.po

"$TOK" po-merge --no-fuzzy "$POT" fr.txt >nofuzzy.po
check "--no-fuzzy adds no mark" [ "$(grep -c 'fuzzy' nofuzzy.po)" -eq "$(grep -c 'fuzzy' "$POT")" ]
"$TOK" po-merge --all "$POT" all.txt >allsame.po
check "--all translates the translated entry again" grep -qx 'msgstr "Quit"' allsame.po

# msgcat's layout: a catalog made of the corpus' lines, each its own translation.
if [ -n "$gettext" ]; then
    { printf 'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n'
      head -600 "$ROOT/tests/data/corpus-small.txt" |
          sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' | awk '
          { if (NR % 5 == 0) s = s $0 "\\n"; else { print "\nmsgctxt \"" NR "\"\nmsgid \"" s $0 "\"\nmsgstr \"\""; s = "" } }'
    } >corpus.pot
    msgcat corpus.pot -o canon.pot 2>/dev/null
    "$TOK" po-strings canon.pot >corpus.txt
    "$TOK" po-merge --no-fuzzy canon.pot corpus.txt >corpus.po
    msgcat corpus.po -o corpus.msgcat.po 2>/dev/null
    same_files "the msgstr lines wrapped as msgcat wraps them ($(lines_of corpus.txt) strings)" \
        corpus.msgcat.po corpus.po
fi

# CR LF: kept, and the lines written end so too.
sed 's/$/\r/' "$POT" >crlf.pot
"$TOK" po-strings crlf.pot >crlf.txt
same_files "CR LF: the same strings" strings.txt crlf.txt
"$TOK" po-merge crlf.pot fr.txt | tr -d '\r' >crlf.po
same_files "CR LF: the same catalog but for the line ends" fr.po crlf.po
check "CR LF: every line of the output ends in CR LF" \
    [ "$("$TOK" po-merge crlf.pot fr.txt | grep -vc "$(printf '\r')\$")" -eq 0 ]

# ---- entries left untranslated ----------------------------------------------------

# tr a-z A-Z breaks %d, %(name)s (format strings): those stay untranslated.
tr a-z A-Z <strings.txt >upper.txt
expect_status 3 "po-merge exits 3 when entries stay untranslated" "$TOK" po-merge -o upper.po "$POT" upper.txt
expect_stderr "app.pot:31: not translated: the translation does not keep the placeholders of this format string \(%d %s; " \
    "a lost placeholder named with its msgid's line (the plural entry)"
expect_stderr "app.pot:26: not translated" "c-format: %s and %S are not the same"
expect_stderr "app.pot:48: not translated" "python-format: %(NAME)S is not %(name)s"
expect_stderr "app.pot: 4 entries left untranslated" "the count of entries left untranslated"
check "the catalog is written all the same" grep -qx 'msgstr "OPEN A FILE"' upper.po
check "... with the failed entries as they were" grep -qx 'msgid "Hello %(name)s, you have %(count)d new messages"' upper.po
if [ -n "$gettext" ]; then
    msgattrib --clear-fuzzy upper.po -o upper.clear.po
    check "msgfmt --check accepts it" msgfmt --check -o /dev/null upper.clear.po
fi

head -3 fr.txt >short.txt
expect_status 3 "a translations file too short" "$TOK" po-merge -o short.po "$POT" short.txt
expect_stderr "app.pot:31: not translated: the translations end at line 3 \(it needs lines 3-4\)" \
    "the entry cut short is named"
check "... and the entries before it translated" grep -qx 'msgstr "FR Open a file"' short.po
sed '2s/.*//' fr.txt >empty.txt
expect_status 3 "an empty translation" "$TOK" po-merge "$POT" empty.txt
expect_stderr "app.pot:26: not translated: line 2 of the translations is empty" "it is named"
{ cat fr.txt; echo extra; } >long.txt
expect_status 1 "a translations file too long" "$TOK" po-merge -o long.po "$POT" long.txt
expect_stderr "long.txt: has 16 lines, but the catalog has 15 strings" "it says how many"
check "... and writes nothing" [ ! -e long.po ]
: >none.txt
"$TOK" po-merge --no-fuzzy "$POT" none.txt >none.po 2>/dev/null
diff "$POT" none.po >none.diff
check "no translation: the catalog unchanged but the whitespace-only entry, which is copied" \
    [ "$(grep -c '^[<>]' none.diff)" -eq 2 ] && grep -qx '> msgstr "   "' none.diff

# ---- hostile catalogs ---------------------------------------------------------------

header='msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n > 1);\n"
'
# refused FILE WANT NAME: po-strings and po-merge -o fail, naming FILE:LINE, writing nothing.
refused() {
    expect_status 1 "$3: po-strings refuses it" "$TOK" po-strings "$1"
    expect_stderr "^tokenize: $2" "$3: the message names the line"
    printf 'x\ny\n' >tr.txt
    expect_status 1 "$3: po-merge refuses it" "$TOK" po-merge -o "$1.out" "$1" tr.txt
    check "$3: no output file" [ ! -e "$1.out" ]
}
printf '%s\nmsgid "abc\nmsgstr ""\n' "$header" >quote.po
refused quote.po 'quote.po:6: the string has no closing quote' "a missing closing quote"
printf '%s\nmsgid "abc"\n' "$header" >cut.po
refused cut.po 'cut.po:6: the file ends inside the entry of line 6' "a file that ends mid-entry"
printf '%s\nmsgid "caf\351"\nmsgstr ""\n' "$header" >latin.po
refused latin.po 'latin.po:6: invalid UTF-8' "invalid UTF-8 under a UTF-8 header"
printf 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=ISO-8859-1\\n"\n\nmsgid "x"\nmsgstr ""\n' >charset.po
refused charset.po "charset.po:3: the header's charset is ISO-8859-1" "a charset other than UTF-8"
printf '%s\nmsgid "a\\qb"\nmsgstr ""\n' "$header" >escape.po
refused escape.po "escape.po:6: unknown escape" "an unknown escape"
sed 's/nplurals=2; plural=(n > 1);/nplurals=INTEGER; plural=EXPRESSION;/' "$POT" >template.pot
expect_status 1 "a template's Plural-Forms with a plural entry: refused" "$TOK" po-merge -o t.po template.pot fr.txt
expect_stderr "template.pot:17: the header's Plural-Forms is broken: nplurals is not a number" \
    "it names the header's line"
check "... and writes nothing" [ ! -e t.po ]
grep -v Plural-Forms "$POT" >noplural.pot
expect_status 1 "no Plural-Forms with a plural entry: refused" "$TOK" po-merge noplural.pot fr.txt
expect_stderr "noplural.pot:30: a plural entry, but the header has no Plural-Forms" "it names the entry's line"
# handled: an empty msgid outside the header (left alone), placeholders
# only, whitespace only (copied), a 100 KB entry; a duplicate (passed through)
{ printf '%s\nmsgctxt "c"\nmsgid ""\nmsgstr ""\n\n#, c-format\nmsgid "%%s"\nmsgstr ""\n\n' "$header"
  printf 'msgid " \\n "\nmsgstr ""\n\nmsgid "'
  awk 'BEGIN { for (i = 0; i < 10000; i++) printf "word %04d ", i }'
  printf 'end"\nmsgstr ""\n'; } >odd.po
"$TOK" po-strings odd.po >odd.txt
check "odd entries: placeholders only and 100 KB printed; empty and blank not" \
    [ "$(lines_of odd.txt)" -eq 2 ] && [ "$(head -1 odd.txt)" = "%s" ]
"$TOK" po-merge -o odd.out.po odd.po odd.txt
check "odd entries merged" [ $? -eq 0 ] && grep -qx 'msgstr " \\n "' odd.out.po
[ -n "$gettext" ] && check "msgfmt --check accepts them (the 100 KB msgstr too)" \
    sh -c 'msgattrib --clear-fuzzy odd.out.po | msgfmt --check -o /dev/null -'
printf '%s\nmsgid "dup"\nmsgstr ""\n\nmsgid "dup"\nmsgstr ""\n' "$header" >dup.po
"$TOK" po-strings dup.po >dup.txt
"$TOK" po-merge dup.po dup.txt >dup.out.po
check "a duplicate msgid: passed through, both translated" [ "$(grep -c '^msgstr "dup"' dup.out.po)" -eq 2 ]

# ---- usage ------------------------------------------------------------------------------

expect_status 2 "po-merge needs two files" "$TOK" po-merge "$POT"
expect_status 2 "po-strings takes one catalog" "$TOK" po-strings "$POT" "$POT"
expect_status 2 "po-strings has no -o" "$TOK" po-strings -o x.po "$POT"
expect_status 2 "--all is an option of po-*" "$TOK" --all -m x
expect_status 2 "po-merge takes no -m" "$TOK" po-merge -m x "$POT" fr.txt
"$TOK" --help >help.txt
check "--help names both sub-commands and status 3" grep -q 'po-merge: 3 when' help.txt

# ---- through a model ---------------------------------------------------------------

MK="$BUILD/tools/mkmodel"
if [ -x "$MK" ]; then
    cat "$ROOT/tests/data/corpus-small.txt" strings.txt >corpus-ph.txt
    "$TOK" learn --placeholders --vocab-size 1200 --soft-vocab-limit -q corpus-ph.txt -o ph.vocab &&
        "$MK" --preset tiny --vocab ph.vocab --seed 3 -o ph.st
    "$TOK" --placeholders -m ph.st <strings.txt | "$BIN/encode" -m ph.st --threads 1 |
        "$BIN/decode" -m ph.st --threads 1 --max-length 12 --placeholders=strings.txt |
        "$TOK" -d -m ph.st --placeholders=strings.txt >model.txt 2>model.err
    check "a model with placeholder tokens: a line per string" [ "$(lines_of model.txt)" -eq 15 ]
    "$TOK" po-merge -o model.po "$POT" model.txt 2>model-merge.err
    st=$?
    check "po-merge of its output (exit $st: 0, or 3 for empty lines)" [ $st -eq 0 ] || [ $st -eq 3 ]
    [ -n "$gettext" ] && check "msgfmt --check accepts it" \
        sh -c 'msgattrib --clear-fuzzy model.po | msgfmt --check -o /dev/null -'
    "$TOK" learn --vocab-size 1200 --soft-vocab-limit -q corpus-ph.txt -o plain.vocab &&
        "$MK" --preset tiny --vocab plain.vocab --seed 3 -o plain.st
    # (decode --placeholders needs the tokens, or a SentencePiece vocabulary)
    "$TOK" -m plain.st <strings.txt | "$BIN/encode" -m plain.st --threads 1 |
        "$BIN/decode" -m plain.st --threads 1 --max-length 12 |
        "$TOK" -d -m plain.st >plain.txt 2>plain.err
    check "a model without placeholder tokens: a line per string" [ "$(lines_of plain.txt)" -eq 15 ]
    "$TOK" po-merge -o plain.po "$POT" plain.txt 2>/dev/null
    st=$?
    check "po-merge of its output (exit $st: 3, the format strings lost their placeholders)" \
        [ $st -eq 3 ]
    [ -n "$gettext" ] && check "msgfmt --check accepts what it wrote" \
        sh -c 'msgattrib --clear-fuzzy plain.po | msgfmt --check -o /dev/null -'
    # examples/Makefile: in/NAME.pot -> out/NAME.po
    mkdir -p in && cp "$POT" in/app.pot
    make -s -f "$ROOT/examples/Makefile" MODEL=ph.st BIN="$BIN" PLACEHOLDERS=tokens BEAM=1 \
        out/app.po >make.out 2>make.err
    check "examples/Makefile: in/app.pot becomes out/app.po" test -s out/app.po
    check "... with no temporary file left" [ -z "$(ls out | grep -v '^app.po$')" ]
    [ -n "$gettext" ] && check "... which msgfmt --check accepts" \
        sh -c 'msgattrib --clear-fuzzy out/app.po | msgfmt --check -o /dev/null -'
else
    skip "no $MK: the run through a model"
fi
