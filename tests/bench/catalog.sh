#!/bin/sh
# catalog.sh BUILD MODEL - make bench-catalog: issue 45's catalog bar on a
# real catalog.  e2fsprogs's French catalog (a Debian package the corpora do
# not include) is fetched with apt-get download, turned back into a PO file
# (msgunfmt), converted to UTF-8 (msgconv), its c-format flags put back
# where the msgid is a printf format (c_format_flags.py) and its
# translations emptied (msgfilter); then examples/Makefile translates it
# with MODEL (PLACEHOLDERS=spelled for an imported model, tokens for one
# whose vocabulary has placeholder tokens: PH=), and the result is checked:
# msgfmt --check accepts it with every entry un-fuzzied (msgattrib
# --clear-fuzzy), msgcmp finds every msgid, no entry is left untranslated,
# plural entries have every form, and everything but the msgstr and the
# fuzzy flags is byte for byte the input.  Also times the catalog against
# its strings translated as one file through the same pipeline.
# Everything stays in BENCH_OUT/catalog (build/bench).
BUILD=${1:-build/release}
MODEL=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
PH=${PH:-spelled}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${BENCH_OUT:-$ROOT/build/bench}/catalog
BIN=$(cd "$BUILD/bin" && pwd)
export PATH="$BIN:$PATH" OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
PY=/usr/bin/python3
mkdir -p "$OUT" && cd "$OUT" || exit 1
[ -f "$2" ] || { echo "catalog: usage: catalog.sh BUILD MODEL (a French model)" >&2; exit 2; }
if [ ! -s e2fs.fr.po ]; then
    rm -rf deb && mkdir deb && (cd deb && apt-get download e2fsprogs-l10n >/dev/null 2>&1) &&
        dpkg-deb -x deb/e2fsprogs-l10n_*.deb deb/x &&
        msgunfmt deb/x/usr/share/locale/fr/LC_MESSAGES/e2fsprogs.mo -o e2fs.fr.po ||
        { echo "catalog: could not fetch e2fsprogs-l10n" >&2; exit 1; }
fi
msgconv -t UTF-8 e2fs.fr.po -o utf8.po &&
    msgfilter --keep-header -i utf8.po -o empty.po sed -e d &&
    $PY "$ROOT/tests/bench/c_format_flags.py" empty.po template.po || exit 1
rm -rf in out && mkdir in && cp template.po in/e2fs.po
start=$(date +%s.%N)
make -s -j2 -f "$ROOT/examples/Makefile" MODEL="$MODEL" PLACEHOLDERS="$PH" >make.log 2>&1 ||
    { cat make.log; exit 1; }
end=$(date +%s.%N)
tokenize po-strings in/e2fs.po >strings.txt
ph_tok=$([ "$PH" = tokens ] && echo --placeholders)
ph_dec=$([ -n "$PH" ] && echo --placeholders=strings.txt)
ph_det=$([ "$PH" = tokens ] && echo --placeholders=strings.txt)
start2=$(date +%s.%N)
tokenize $ph_tok -m "$MODEL" <strings.txt | encode -m "$MODEL" |
    decode -m "$MODEL" --beam 4 $ph_dec | tokenize -d -m "$MODEL" $ph_det >strings.out
end2=$(date +%s.%N)
msgattrib --clear-fuzzy out/e2fs.po -o cleared.po
ok() { if "$@" >/dev/null 2>&1; then echo yes; else echo NO; fi; }
echo "catalog: e2fsprogs fr, $(grep -c '^msgid ' template.po) msgids ($(grep -c 'msgid_plural' template.po) plural, $(grep -c '^#, c-format' template.po) c-format), $(wc -l <strings.txt) strings"
echo "catalog: msgfmt --check accepts it un-fuzzied: $(ok msgfmt --check -o /dev/null cleared.po)"
echo "catalog: msgcmp finds every msgid: $(ok msgcmp cleared.po template.po)"
echo "catalog: entries left untranslated: $(msgattrib --untranslated --no-obsolete cleared.po | grep -c '^msgid ' | awk '{ print ($1 > 0 ? $1 - 1 : 0) }')"
$PY - out/e2fs.po in/e2fs.po <<'PYEOF'
import re, sys
out, inp = (open(f, encoding='utf-8').read() for f in sys.argv[1:3])
plural = [e for e in out.split('\n\n') if 'msgid_plural' in e]
empty = [e for e in plural if re.search(r'msgstr\[\d+\] ""\n(?!")', e + '\n')]
print('catalog: plural entries with a form missing: %d of %d' % (len(empty), len(plural)))
def rest(t):
    keep, skip = [], False
    for l in t.split('\n'):
        if l.startswith('msgstr'): skip = True; continue
        if skip and l.startswith('"'): continue
        skip = False
        if l == '#, fuzzy': continue
        keep.append(l.replace(', fuzzy', ''))
    return keep
print('catalog: the rest of the file byte for byte the input: %s' % ('yes' if rest(out) == rest(inp) else 'NO'))
PYEOF
awk -v a="$start" -v b="$end" -v c="$start2" -v d="$end2" 'BEGIN {
    printf "catalog: the catalog %.1f s, its strings as one file %.1f s: %.2fx\n", b - a, d - c, (b - a) / (d - c) }'
