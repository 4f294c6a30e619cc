#!/usr/bin/python3
# make_corpus.py - writes tests/data/corpus-small.txt, a small training corpus
# of plain sentences (mostly English, German and French) on which the tests
# learn vocabularies in seconds.  Run once on a Debian machine
# (/usr/bin/python3 make_corpus.py > corpus-small.txt) and commit the output:
# the sentences come from the license texts in /usr/share/common-licenses and
# from English, German and French manual pages rendered with man(1), plus the first
# lines of mixed.txt, so a rerun elsewhere may differ.
import os
import random
import re
import subprocess
import sys

rng = random.Random(7)
HERE = os.path.dirname(os.path.abspath(__file__))


def paragraphs(text):
    """Joins the wrapped lines of each blank-line separated paragraph."""
    for block in re.split(r"\n\s*\n", text):
        para = " ".join(line.strip() for line in block.splitlines())
        para = para.replace("\u2010 ", "")  # groff's hyphenation at a line end
        para = re.sub(r"\s+", " ", para).strip()
        if para:
            yield para


def sentences(text):
    for para in paragraphs(text):
        for s in re.split(r"(?<=[.!?])\s+(?=[A-ZÄÖÜÀÂÉÈÊÎÔÇ«\"(])", para):
            letters = sum(c.isalpha() for c in s)
            if 30 <= len(s) <= 300 and letters > 0.7 * len(s) and s[-1] in ".!?:;)»\"":
                yield s


def render_man(path):
    env = dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8")
    r = subprocess.run(["man", "-l", "-Tutf8", path], capture_output=True, env=env)
    text = r.stdout.decode("utf-8", "replace")
    return re.sub(r".\x08", "", text)  # what col -b does: drop overstrikes


def unique(seq):
    seen = set()
    return [s for s in seq if not (s in seen or seen.add(s))]


english = []
for name in ["GPL-3", "Apache-2.0", "MPL-2.0", "LGPL-2.1", "Artistic", "GFDL-1.3", "CC0-1.0"]:
    with open(os.path.join("/usr/share/common-licenses", name), encoding="utf-8") as f:
        english.extend(sentences(f.read()))
english = unique(english)

german, french = [], []
for lang, out in (("", english), ("de", german), ("fr", french)):
    d = os.path.join("/usr/share/man", lang, "man1")
    for name in sorted(os.listdir(d)):
        if len(out) >= 3000:
            break
        out.extend(sentences(render_man(os.path.join(d, name))))
english, german, french = unique(english), unique(german), unique(french)

with open(os.path.join(HERE, "mixed.txt"), encoding="utf-8") as f:
    mixed = [line for line in f.read().split("\n")[:400] if line.strip()]

lines = english[:1300] + german[:1000] + french[:1000] + mixed
rng.shuffle(lines)
sys.stdout.write("\n".join(lines) + "\n")
print("english %d, german %d, french %d, mixed %d" % (min(len(english), 1300), min(len(german), 1000),
      min(len(french), 1000), len(mixed)), file=sys.stderr)
