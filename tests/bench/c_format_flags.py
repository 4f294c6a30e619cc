# c_format_flags.py IN.po OUT.po - puts "#, c-format" on every entry whose
# msgid (and msgid_plural) is a valid printf format with at least one
# conversion: every % starts a conversion of printf's grammar or is %%.  A
# catalog turned back from a .mo file (msgunfmt) has lost its flags; this
# gives them back where msgfmt --check-format can hold the translation to
# the source's conversions (tests/bench/catalog.sh).
import re, sys
conv = re.compile(r'%(?:%|(?:[0-9]+\$)?[-+ #0\']*(?:[0-9]+|\*(?:[0-9]+\$)?)?(?:\.(?:[0-9]+|\*(?:[0-9]+\$)?))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspn])')
def valid_format(s):
    i, n = 0, 0
    while True:
        j = s.find('%', i)
        if j < 0: return n > 0
        m = conv.match(s, j)
        if not m: return False
        if m.group(0) != '%%': n += 1
        i = m.end()
def unquote(lines):
    # the quoted pieces joined, escapes left as they are (a % is a %)
    out = []
    for l in lines:
        l = l.strip()
        if l.startswith('msgid_plural '): l = l[len('msgid_plural '):]
        elif l.startswith('msgid '): l = l[len('msgid '):]
        out.append(l[1:-1])
    return ''.join(out)
text = open(sys.argv[1], encoding='utf-8').read()
entries = text.split('\n\n')
flagged = 0
for k, e in enumerate(entries):
    lines = e.split('\n')
    ids, cur = {}, None
    for l in lines:
        if l.startswith('msgid_plural '): cur = 'p'; ids[cur] = [l]
        elif l.startswith('msgid '): cur = 'i'; ids[cur] = [l]
        elif l.startswith('msgstr'): cur = None
        elif l.startswith('"') and cur: ids[cur].append(l)
    if 'i' not in ids: continue
    msgid = unquote(ids['i'])
    if not msgid: continue
    if valid_format(msgid) and ('p' not in ids or valid_format(unquote(ids['p']))):
        at = next(i for i, l in enumerate(lines) if l.startswith('msgid '))
        lines.insert(at, '#, c-format')
        entries[k] = '\n'.join(lines)
        flagged += 1
open(sys.argv[2], 'w', encoding='utf-8').write('\n\n'.join(entries))
print('flagged', flagged, 'of', len(entries) - 1, file=sys.stderr)
