#!/usr/bin/python3
"""placeholders.py - the measures of make bench-placeholders (placeholders.sh).

  placeholders.py glossary TRAIN.en TRAIN.fr > glossary.tsv
      word pairs of the training data, as Dinu et al. (2019) took terms from
      a dictionary: an English word and the French word that co-occur with it
      most (Dice coefficient over lines, both at least MIN_COUNT times, each
      the other's best, Dice >= MIN_DICE), in their most frequent spelling;
      words of fewer than 4 letters and numbers are left out.

  placeholders.py dinu-constraints BIN MODEL GLOSSARY SRC REF [TOKENIZE OPTION]...
      the constraints file of Dinu et al.'s setting: each line's glossary
      holds only its annotated terms (source word in the source line, target
      word in its reference), made into constraints by 'tokenize --glossary'.

  placeholders.py report BIN SRC REF NAME=HYP... [--glossary G]
      for each output (and the references, as "references"):
        keep   the share of test lines with placeholders whose output holds
               exactly the source's multiset of placeholders ('tokenize
               placeholders' finds them, as the pipeline does);
        msgfmt the c-format entries (pairs whose source has a printf
               conversion) written as a PO file with '#, c-format' that
               'msgfmt --check-format' rejects: of those whose reference it
               accepts (what a real catalog marks c-format), and of all;
        terms  with a glossary: the term use rate of Dinu et al. (2019):
               terms whose source word is in a test source and whose target
               word is in its reference; the share whose target word is in
               the output.
      prints one line per output, and machine-readable lines
      'placeholders name=NAME keep=P msgfmt=N msgfmt_all=N terms=P'.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

MIN_COUNT = 20
MIN_DICE = 0.5
WORD = re.compile(r"\w+", re.UNICODE)


def words(line):
    return [w for w in WORD.findall(line) if len(w) >= 4 and not w.isdigit() and "_" not in w]


def glossary(src_path, tgt_path):
    count_e, count_f = collections.Counter(), collections.Counter()
    both = collections.Counter()
    spell_e, spell_f = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
    with open(src_path, encoding="utf-8") as fe, open(tgt_path, encoding="utf-8") as ff:
        for le, lf in zip(fe, ff):
            we, wf = set(), set()
            for w in words(le):
                spell_e[w.lower()][w] += 1
                we.add(w.lower())
            for w in words(lf):
                spell_f[w.lower()][w] += 1
                wf.add(w.lower())
            for e in we:
                count_e[e] += 1
            for f in wf:
                count_f[f] += 1
            if len(we) * len(wf) <= 400:
                for e in we:
                    for f in wf:
                        both[e, f] += 1
    best_e, best_f = {}, {}
    for (e, f), c in both.items():
        if count_e[e] < MIN_COUNT or count_f[f] < MIN_COUNT or e == f:
            continue
        dice = 2.0 * c / (count_e[e] + count_f[f])
        if dice > best_e.get(e, (0, ""))[0]:
            best_e[e] = (dice, f)
        if dice > best_f.get(f, (0, ""))[0]:
            best_f[f] = (dice, e)
    for e, (dice, f) in sorted(best_e.items()):
        if dice >= MIN_DICE and best_f[f][1] == e:
            print("%s\t%s" % (spell_e[e].most_common(1)[0][0], spell_f[f].most_common(1)[0][0]))


def placeholders_of(bin_dir, path):
    out = subprocess.run([os.path.join(bin_dir, "tokenize"), "placeholders", path],
                         check=True, capture_output=True).stdout.decode("utf-8", "replace")
    return [l.split("\t") if l else [] for l in out.split("\n")[:-1]]


def po_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t") + '"'


PRINTF = re.compile(r"%(?!%)")


def msgfmt_rejects(pairs):
    """The indices (into pairs) of the c-format entries msgfmt rejects."""
    if not pairs:
        return set()
    with tempfile.NamedTemporaryFile("w", suffix=".po", delete=False, encoding="utf-8") as po:
        po.write('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n')
        lines = []
        for k, (src, hyp) in enumerate(pairs):
            # msgctxt keeps equal sources apart (msgfmt refuses duplicates)
            po.write("#, c-format\nmsgctxt \"%d\"\nmsgid %s\nmsgstr %s\n\n" % (k, po_string(src), po_string(hyp)))
        name = po.name
    res = subprocess.run(["msgfmt", "--check-format", "-o", os.devnull, name], capture_output=True)
    os.unlink(name)
    bad = set()
    # each entry is 5 lines after the 4 of the header: its msgstr is on line 4 + 5k + 4
    for m in re.finditer(r":(\d+): ", res.stderr.decode("utf-8", "replace")):
        bad.add((int(m.group(1)) - 5) // 5)
    return bad


def term_use(glossary_path, src, ref, hyp):
    total = used = 0
    for terms, h in zip(annotated_terms(glossary_path, src, ref), hyp):
        hw = set(WORD.findall(h))
        total += len(terms)
        used += sum(f in hw for e, f in terms)
    return used, total


def annotated_terms(glossary_path, src, ref):
    """Per line: the glossary's (source, target) pairs whose source word is
    in the source line and whose target word is in its reference."""
    by_word = collections.defaultdict(list)
    with open(glossary_path, encoding="utf-8") as g:
        for line in g:
            e, f = line.rstrip("\n").split("\t")[:2]
            by_word[e].append(f)
    out = []
    for s, r in zip(src, ref):
        sw, rw = set(WORD.findall(s)), set(WORD.findall(r))
        out.append(sorted((e, f) for e in sw for f in by_word.get(e, ()) if f in rw))
    return out


def dinu_constraints(argv):
    """The constraints of the annotated terms alone (Dinu et al.'s setting:
    a term is given where the source and the reference hold it), made by
    'tokenize --glossary' with each line's own glossary."""
    bin_dir, model, glossary_path, src_path, ref_path = argv[:5]
    extra = argv[5:]
    read = lambda p: open(p, encoding="utf-8").read().split("\n")[:-1]
    src, ref = read(src_path), read(ref_path)
    with tempfile.TemporaryDirectory() as tmp:
        g, c = os.path.join(tmp, "g.tsv"), os.path.join(tmp, "c.txt")
        for line, terms in zip(src, annotated_terms(glossary_path, src, ref)):
            if not terms:
                print("")
                continue
            with open(g, "w", encoding="utf-8") as f:
                f.write("".join("%s\t%s\n" % t for t in terms))
            subprocess.run([os.path.join(bin_dir, "tokenize"), "-q", "-m", model, "--glossary", g,
                            "--constraints", c] + extra, input=(line + "\n").encode("utf-8"),
                           check=True, capture_output=True)
            print(open(c, encoding="utf-8").read().rstrip("\n"))


def report(argv):
    bin_dir, src_path, ref_path = argv[:3]
    rest = argv[3:]
    gloss = None
    if "--glossary" in rest:
        i = rest.index("--glossary")
        gloss = rest[i + 1]
        del rest[i:i + 2]
    read = lambda p: open(p, encoding="utf-8").read().split("\n")[:-1]
    src, ref = read(src_path), read(ref_path)
    ph_src = placeholders_of(bin_dir, src_path)
    outputs = [("references", ref_path)] + [tuple(a.split("=", 1)) for a in rest]
    with_ph = [k for k, p in enumerate(ph_src) if p]
    cformat = [k for k in with_ph if any(PRINTF.match(x) for x in ph_src[k])]
    ref_bad = msgfmt_rejects([(src[k], ref[k]) for k in cformat])
    accepted = [k for j, k in enumerate(cformat) if j not in ref_bad]
    print("  %d test lines, %d with placeholders, %d c-format entries (%d of them accepted with "
          "their references)" % (len(src), len(with_ph), len(cformat), len(accepted)))
    for name, path in outputs:
        hyp = read(path)
        ph_hyp = placeholders_of(bin_dir, path)
        kept = sum(collections.Counter(ph_src[k]) == collections.Counter(ph_hyp[k]) for k in with_ph)
        bad_all = msgfmt_rejects([(src[k], hyp[k]) for k in cformat])
        bad = msgfmt_rejects([(src[k], hyp[k]) for k in accepted])
        keep = 100.0 * kept / max(1, len(with_ph))
        terms = ""
        rate = "-"
        if gloss:
            used, total = term_use(gloss, src, ref, hyp)
            rate = "%.2f" % (100.0 * used / max(1, total))
            terms = ", terms used %d of %d (%s%%)" % (used, total, rate)
        print("  %-28s placeholders kept in %d of %d lines (%.2f%%), msgfmt rejects %d of %d "
              "(%d of all %d)%s" % (name, kept, len(with_ph), keep, len(bad), len(accepted),
                                   len(bad_all), len(cformat), terms))
        print("placeholders name=%s keep=%.2f msgfmt=%d msgfmt_all=%d terms=%s" %
              (name, keep, len(bad), len(bad_all), rate))


if __name__ == "__main__":
    if len(sys.argv) >= 7 and sys.argv[1] == "dinu-constraints":
        dinu_constraints(sys.argv[2:])
    elif len(sys.argv) >= 4 and sys.argv[1] == "glossary":
        glossary(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and sys.argv[1] == "report":
        report(sys.argv[2:])
    else:
        sys.exit(__doc__)
