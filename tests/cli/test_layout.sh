# test_layout.sh - the library's rooms (README, Layout): each folder of lib/
# one job, none more than a fifth of the library's lines, every folder
# using only folders on floors below its own, and no circle of files (file
# a calls file b when a's object leaves undefined a symbol b's defines).
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin BUILD=build/release ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_layout.sh
. "$ROOT/tests/cli/lib.sh"

command -v nm >/dev/null 2>&1 || { skip "no nm"; exit 0; }

# The floors, lowest first; a folder may call folders of lower floors only.
floors='core:0 io:1 nn:1 text:2 metrics:2 model:3 pass:4 search:5 train:6 view:6'

# ---- sizes ----------------------------------------------------------------------------

(cd "$ROOT/lib" && for d in */; do
     d=${d%/}
     printf '%s %s\n' "$d" "$(cat "$d"/*.c "$d"/*.h 2>/dev/null | wc -l)"
 done; printf 'tfm.h %s\n' "$(wc -l <tfm.h)") >sizes.txt
biggest=$(awk '{ t += $2; if ($2 > m) { m = $2; f = $1 } }
               END { printf "%s %d %d %.1f", f, m, t, 100 * m / t }' sizes.txt)
set -- $biggest
if awk -v p="$4" 'BEGIN { exit !(p <= 20) }'; then
    pass "no folder of lib/ holds more than 20% of its $3 lines (the largest: $1, $2 lines, $4%)"
else
    fail "lib/$1 holds $4% of the library's $3 lines (at most 20%)"
fi
for d in $(echo "$floors" | tr ' ' '\n' | cut -d: -f1); do
    grep -q "^$d " sizes.txt || fail "lib/$d: a floor of this test, but no folder"
done
for d in $(awk '$1 != "tfm" && $1 != "tfm.h" { print $1 }' sizes.txt); do
    case " $floors" in *" $d:"*) ;; *) fail "lib/$d has no floor in this test (add it)" ;; esac
done

# ---- the graph of files ---------------------------------------------------------------

# defs.txt: symbol file; uses.txt: file symbol (undefined there).  One nm
# for all the objects (-A names each line's file; -P: "FILE: SYMBOL TYPE
# ..."): one per object took 16 s of this machine's process starts.
: >objects.txt
n_obj=0
for c in "$ROOT"/lib/*/*.c; do
    rel=${c#"$ROOT"/lib/}
    o="$BUILD/lib/${rel%.c}.o"
    [ -f "$o" ] || { fail "no $o (make all)"; continue; }
    n_obj=$((n_obj + 1))
    echo "$o" >>objects.txt
done
# shellcheck disable=SC2046 # the objects' paths hold no spaces
nm -A -P $(cat objects.txt) | awk -v prefix="$BUILD/lib/" -v d=defs.txt -v u=uses.txt '
    { f = substr($1, length(prefix) + 1); sub(/\.o:$/, "", f) }
    $3 ~ /^[TDBR]$/ { print $2, f > d }
    $3 == "U" { print f, $2 > u }'
touch defs.txt uses.txt
awk 'NR == FNR { def[$1] = $2; next }
     ($2 in def) && def[$2] != $1 { print $1, def[$2] }' defs.txt uses.txt | sort -u >edges.txt
check "the graph holds the library's $n_obj files and $(lines_of edges.txt) calls between them" \
    test "$(lines_of edges.txt)" -gt 100

# No circle: take away every file that calls no file left, again and again;
# what stays is on a circle (or calls into one).
awk '{ out[$1]++; e[NR] = $0; node[$1]; node[$2] }
     END {
         do {
             gone = 0
             for (v in node) if (!(v in removed) && out[v] == 0) { removed[v]; gone = 1 }
             for (i in e) { split(e[i], p, " ")
                            if ((p[2] in removed) && !(i in done)) { out[p[1]]--; done[i] } }
         } while (gone)
         for (v in node) if (!(v in removed)) print v
     }' edges.txt | sort >circle.txt
if [ -s circle.txt ]; then
    fail "files on a circle of calls (or calling into one): $(tr '\n' ' ' <circle.txt)"
    awk 'NR == FNR { c[$1]; next } ($1 in c) && ($2 in c) { print "    " $1 " -> " $2 }' \
        circle.txt edges.txt | head -20
else
    pass "no circle of files: every call goes to a file that calls back into none of its callers"
fi

# ---- floors ------------------------------------------------------------------------------

awk -v floors="$floors" '
    BEGIN { n = split(floors, f, " ")
            for (i = 1; i <= n; i++) { split(f[i], p, ":"); fl[p[1]] = p[2] } }
    { split($1, a, "/"); split($2, b, "/")
      if (a[1] != b[1] && !(fl[a[1]] > fl[b[1]]))
          print $1 " -> " $2 " (" a[1] " floor " fl[a[1]] ", " b[1] " floor " fl[b[1]] ")" }' \
    edges.txt >upward.txt
if [ -s upward.txt ]; then
    fail "calls that go up or across a floor: $(head -5 upward.txt | tr '\n' ';')"
else
    pass "every call between folders goes down a floor ($floors)"
fi
