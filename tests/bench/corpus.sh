#!/bin/sh
# corpus.sh OUT - builds the text corpus of the tokenizer benchmark: at least
# 50 MB of real prose, one sentence (or short paragraph) per line, in UTF-8.
#
# Everything comes from Debian packages, installed with apt-get when missing
# (as root, or through sudo), and only the files of those packages are read,
# so machines with the same Debian release build the same file:
#
#   bible-kjv        the King James Bible, one verse per line           ~4 MB
#   dict-gcide       Webster's 1913 dictionary: definitions and notes     ~9 MB
#   wordnet-base     WordNet glosses and their example sentences          ~4 MB
#   linux-doc        the kernel's documentation (HTML paragraphs)         ~8 MB
#   python3-doc      Python's documentation (HTML paragraphs)             ~5 MB
#   debian-handbook  the Debian Administrator's Handbook in 26 languages ~13 MB
#   perl-doc         Perl's documentation (POD paragraphs)                ~5 MB
#   manpages-LANG    man pages in en, de, fr, es, ru, pl, it, rendered    ~15 MB
#   fortunes*        fortune cookies in en, de, es, it, ru, pl            ~5 MB
#
# Markup, code blocks, tables and command-line option lists are left out;
# paragraphs are split into sentences; lines over 4000 bytes are dropped (so
# tools with a sentence-length limit see the same text), and exact duplicate
# lines are kept once.  Nothing is repeated to reach the size.  Where a
# source is larger than its share, a fixed subset (chosen by a CRC of the
# file name or entry, so the same every time) is kept.
#
# The result is cached: when OUT exists and OUT.info records its recipe and
# size, nothing is done.  Prints the size in MB and the number of lines.
set -eu
OUT=${1:?usage: tests/bench/corpus.sh OUT}
RECIPE=2          # bump when the extraction below changes
MIN_MB=50

info="$OUT.info"
if [ -f "$OUT" ] && [ -f "$info" ]; then
    size=$(wc -c <"$OUT" | tr -d ' ')
    if grep -qx "recipe $RECIPE bytes $size lines [0-9]*" "$info"; then
        lines=$(sed 's/.* lines //' "$info")
        echo "corpus: $OUT: $(awk "BEGIN { printf \"%.1f\", $size / 1e6 }") MB, $lines lines (cached)"
        exit 0
    fi
fi

# ---- the packages ------------------------------------------------------------

PACKAGES="python3 groff-base dictzip bible-kjv dict-gcide wordnet-base linux-doc python3-doc
  debian-handbook perl-doc manpages manpages-de manpages-fr manpages-es manpages-ru
  manpages-pl manpages-it fortunes fortunes-de fortunes-es fortunes-it fortunes-ru fortunes-pl"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "corpus: installing$missing"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    # One package that cannot be found must not stop the others: install them
    # together first, then (after an update) one at a time.
    if ! $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null; then
        $SUDO apt-get update -q >/dev/null || true
        for p in $missing; do
            $SUDO apt-get install -y -q --no-install-recommends "$p" >/dev/null ||
                echo "corpus: warning: could not install $p; going on without it" >&2
        done
    fi
fi
[ -x /usr/bin/python3 ] || { echo "corpus: /usr/bin/python3 is needed" >&2; exit 1; }

# ---- the text ------------------------------------------------------------------

mkdir -p "$(dirname "$OUT")"
tmp="$OUT.tmp.$$"
trap 'rm -f "$tmp"' EXIT
echo "corpus: extracting text into $OUT (about two minutes)"
LC_ALL=C.UTF-8 /usr/bin/python3 - "$tmp" <<'EOF'
# Reads each source, turns it into sentences and writes the lines that look
# like prose, once each.  Prints one line per source (lines, MB) on stderr.
import glob, gzip, html.parser, os, re, subprocess, sys, zlib
from concurrent.futures import ThreadPoolExecutor

MAX_LINE = 4000       # bytes with the newline; longer lines are dropped
out = open(sys.argv[1], "w", encoding="utf-8")
seen = set()
total_lines = total_bytes = 0


def keep(key, fraction):
    """A fixed pseudo-random subset: the same keys every run, on every machine."""
    return zlib.crc32(key.encode("utf-8", "replace")) % 10000 < fraction * 10000


# A sentence ends at . ! ? (maybe followed by a closing quote) before a capital
# letter (Latin, Greek, Cyrillic), or at a CJK full stop.  A colon or a known
# abbreviation before the space is not an end.
BOUNDARY = re.compile(r"([.!?][\"'\u201d\u2019)\u00bb]?)\s+(?=[\"'\u201c\u2018(\u00ab\u00bf\u00a1]?"
                      r"[A-Z\u00c0-\u00de\u0391-\u03a9\u0410-\u042f])|([\u3002\uff01\uff1f])\s*")
ABBREV = re.compile(r"\b(?:[A-Za-z]|Mr|Mrs|Ms|Dr|St|Prof|vs|etc|e\.g|i\.e|cf|Fig|No|Vol|Ch|ca|"
                    r"z\.B|d\.h|u\.a|bzw|usw|Nr|pp|ed|viz|Gen|Col|Gov|Rev|Jr|Sr)\.$")
SPACES = re.compile(r"\s+")


def sentences(par):
    par = SPACES.sub(" ", par).strip()
    parts, start = [], 0
    for m in BOUNDARY.finditer(par):
        head = par[start:m.end(1) if m.group(1) else m.end(2)].strip()
        if ABBREV.search(head):
            continue
        parts.append(head)
        start = m.end()
    parts.append(par[start:].strip())
    return parts


def prose(s):
    """Mostly letters, and several words (or several CJK characters): not code or tables."""
    if len(s) < 12:
        return False
    letters = sum(ch.isalpha() for ch in s)
    if letters < 0.6 * (len(s) - s.count(" ")):
        return False
    return len(s.split()) >= 4 or sum(ord(ch) >= 0x2e80 for ch in s) >= 8


class Source:
    def __init__(self, name):
        self.name, self.lines, self.bytes = name, 0, 0

    def emit(self, line):
        global total_lines, total_bytes
        line = SPACES.sub(" ", line).strip()
        size = len(line.encode("utf-8")) + 1
        if size > MAX_LINE or not prose(line) or line in seen:
            return
        seen.add(line)
        out.write(line + "\n")
        self.lines += 1
        self.bytes += size
        total_lines += 1
        total_bytes += size

    def paragraph(self, par):
        for s in sentences(par):
            self.emit(s)

    def done(self):
        print(f"corpus:   {self.name:<16} {self.lines:8d} lines {self.bytes / 1e6:6.1f} MB",
              file=sys.stderr)


def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def package_files(packages):
    """The files the packages installed: not what other packages put beside them, so
    that the corpus is the same on every machine."""
    r = subprocess.run(["dpkg-query", "-L"] + packages, capture_output=True, text=True)
    return sorted(p for p in r.stdout.splitlines() if os.path.isfile(p) and not os.path.islink(p))


def files(pattern, fraction):
    return [p for p in sorted(glob.glob(pattern, recursive=True))
            if os.path.isfile(p) and keep(p, fraction)]


def bible():
    s = Source("bible-kjv")
    r = subprocess.run(["bible", "-l0", "gen1:1-rev22:21"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():       # "  12 And God said, ..." under chapter titles
        m = re.match(r"\s+\d+ (.*)", line)
        if m:
            s.emit(m.group(1))
    s.done()


def gcide(fraction):
    """Entries look like 'Word \\Pro*nun"ci*a`tion\\, n. [Etym.]' then the definitions,
    each ending in a source tag such as [1913 Webster]."""
    s = Source("gcide")
    r = subprocess.run(["dictzip", "-dc", "/usr/share/dictd/gcide.dict.dz"], capture_output=True)
    for block in re.split(r"\n\s*\n", r.stdout.decode("utf-8", "replace")):
        if block.startswith("00") or not keep(block[:80], fraction):
            continue
        if not block[:1].isspace():          # the headword line
            block = re.sub(r"^[^\\\n]*\\[^\\]*\\[,;]?\s*(?:[a-z]+\.\s*(?:&\s*[a-z]+\.\s*)*)*"
                           r"(?:\[[^\]]*\]\s*)?", "", block, count=1)
        block = re.sub(r"\[(?:1913 Webster|WordNet[^\]]*|PJC|[A-Z]{1,4}|Obs\.|R\.|Colloq\.|"
                       r"Archaic|Prov\. Eng\.|Local[^\]]*|Slang|U\. S\.|Eng\.)\]", "", block)
        block = re.sub(r"--[A-Z][\w.' ]{0,30}\.", "", block)          # --Shak. (citations)
        block = re.sub(r"^\s*(?:\d+\.|\([a-z]\))\s*", "", block)       # sense numbers
        block = re.sub(r"\([A-Z][a-z]*\.(?: [A-Z][a-z]*\.)?\)\s*", "", block)  # (Anat.)
        block = block.replace("Note:", "").replace("{", "").replace("}", "")
        if not re.match(r"\s*(?:Syn|Usage|Derivatives?|See)\b", block):   # word lists
            s.paragraph(block)
    s.done()


def wordnet(fraction):
    """data.POS lines end in '| definition; "example"; "example"'."""
    s = Source("wordnet")
    for pos in ("noun", "verb", "adj", "adv"):
        with open(f"/usr/share/wordnet/data.{pos}", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line or not keep(line[:8] + pos, fraction):
                    continue
                for part in line.split(" | ", 1)[1].split(";"):
                    part = part.strip().strip('"').strip()
                    if part:
                        s.emit(part[0].upper() + part[1:])
    s.done()


class Paragraphs(html.parser.HTMLParser):
    """Passes on the text of paragraph-like elements (<p>, <li>, DocBook's
    <div class="para">, ...) with their inline markup removed; <pre> blocks,
    scripts and headers are skipped."""
    BLOCK = {"p", "li", "dd", "dt", "td", "blockquote", "caption"}
    SKIP = {"pre", "script", "style", "nav", "head"}

    def __init__(self, sink):
        super().__init__(convert_charrefs=True)
        self.sink, self.buf, self.skip, self.depth, self.divs = sink, [], 0, 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "div":
            self.divs.append(("class", "para") in attrs)
            if self.divs[-1]:
                self.flush()
                self.depth += 1
        elif tag in self.SKIP:
            self.skip += 1
        elif tag in self.BLOCK or tag == "br":
            self.flush()
            self.depth += tag != "br"

    def handle_endtag(self, tag):
        if tag == "div":
            if self.divs and self.divs.pop():
                self.flush()
                self.depth = max(0, self.depth - 1)
        elif tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag in self.BLOCK:
            self.flush()
            self.depth = max(0, self.depth - 1)

    def handle_data(self, data):
        if not self.skip and self.depth:
            self.buf.append(data)

    def flush(self):
        if self.buf:
            self.sink("".join(self.buf))
            self.buf = []


def html_tree(name, pattern, fraction):
    s = Source(name)
    for path in files(pattern, fraction):
        p = Paragraphs(s.paragraph)
        p.feed(read_text(path))
        p.close()
        p.flush()
    s.done()


def pod():
    """Text paragraphs of POD: not =commands, not indented (verbatim) code."""
    s = Source("perl-doc")
    for path in files("/usr/share/perl/*/pod/*.pod", 1.0):
        for par in re.split(r"\n\s*\n", read_text(path)):
            if not par or par[0] in " \t=":
                continue
            for _ in range(4):               # nested formatting codes, innermost first
                par = re.sub(r"[A-Z]<<+\s+(.*?)\s+>>+", r"\1", par, flags=re.S)
                par = re.sub(r"L<([^<>|]*)\|[^<>]*>", r"\1", par)
                par = re.sub(r"[A-Z]<([^<>]*)>", r"\1", par)
            s.paragraph(par)
    s.done()


def render_man(path):
    """One man page as text, each paragraph on one (very long) line."""
    try:
        r = subprocess.run("preconv -e UTF-8 | groff -mandoc -Tutf8 -rLL=3000n -P-cbou",
                           shell=True, input=read_text(path).encode("utf-8"),
                           capture_output=True, timeout=60)
        return r.stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return ""


def man_pages(name, packages, fraction):
    """Body paragraphs (indented 7) of sections 1, 5, 7 and 8; option lines are left out."""
    s = Source(name)
    paths = [p for p in package_files(packages)
             if re.search(r"/man[1578]/[^/]+$", p) and keep(p, fraction)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for text in pool.map(render_man, paths):
            for line in text.splitlines()[1:-1]:   # not the page header and footer
                if line.startswith("       ") and not line.lstrip().startswith("-"):
                    s.paragraph(line)
    s.done()


def fortunes(fraction):
    """Cookies are separated by '%' lines; attribution lines ('-- Author') are left out."""
    s = Source("fortunes")
    for path in package_files(["fortunes-min", "fortunes", "fortunes-de", "fortunes-es",
                               "fortunes-it", "fortunes-ru", "fortunes-pl"]):
        if not path.startswith("/usr/share/games/fortunes/") or path.endswith(".dat"):
            continue
        for cookie in re.split(r"\n%\n", read_text(path)):
            if keep(cookie, fraction):
                lines = [l for l in cookie.splitlines() if not re.match(r"\s*(--|\u2014)", l)]
                s.emit(" ".join(lines))
    s.done()


bible()
gcide(0.4)
wordnet(0.5)
html_tree("linux-doc", "/usr/share/doc/linux-doc-*/html/**/*.html", 0.35)
html_tree("python-doc", "/usr/share/doc/python3.*-doc/html/**/*.html", 0.7)
html_tree("debian-handbook", "/usr/share/doc/debian-handbook/html/**/*.html", 1.0)
pod()
man_pages("man-translated", ["manpages-de", "manpages-fr", "manpages-es", "manpages-ru",
                             "manpages-pl", "manpages-it"], 1.0)
man_pages("man-english", ["manpages"], 1.0)
fortunes(0.4)
out.close()
print(f"corpus:   {'total':<16} {total_lines:8d} lines {total_bytes / 1e6:6.1f} MB", file=sys.stderr)
EOF

size=$(wc -c <"$tmp" | tr -d ' ')
lines=$(wc -l <"$tmp" | tr -d ' ')
if [ "$size" -lt $((MIN_MB * 1000000)) ]; then
    echo "corpus: only $size bytes of text (want $MIN_MB MB): are the packages above installed?" >&2
    exit 1
fi
mv "$tmp" "$OUT"
echo "recipe $RECIPE bytes $size lines $lines" >"$info"
echo "corpus: $OUT: $(awk "BEGIN { printf \"%.1f\", $size / 1e6 }") MB, $lines lines"
