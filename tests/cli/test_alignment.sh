#!/bin/sh
# test_alignment.sh - decode --alignment end to end on a tiny freshly
# initialised model (tokenize learn and $BUILD/tools/mkmodel, as
# test_encode_decode.sh and test_inspect_attn.sh make theirs): the ids before
# ' ||| ' are decode's without the option; the hard pairs are, byte for
# byte, what inspect-attn -f align gives for the same source ids and the
# decoded ids as target, 1-best and every hypothesis of an n-best list;
# every pair's positions are in range; soft rows sum to 1, one group per
# target token and one for </s>, each as wide as the source, and equal
# inspect-attn -f soft's; the --scores and --nbest forms; an empty source
# line; batchings and threads give the same bytes; a usage error.
. "$ROOT/tests/cli/lib.sh"

ENC="$BIN/encode" DEC="$BIN/decode" TOK="$BIN/tokenize" IA="$BIN/inspect-attn"
MK="$BUILD/tools/mkmodel"
TMO=60
for p in "$ENC" "$DEC" "$TOK" "$IA" "$MK"; do
    [ -x "$p" ] || { fail "$p is not built"; exit 0; }
done

# ---- set-up: a vocabulary, a tiny model, sources with an empty line --------------------

"$TOK" learn --vocab-size 2000 --soft-vocab-limit -q "$ROOT/tests/data/corpus-small.txt" -o v.vocab ||
    { fail "tokenize learn"; exit 0; }
"$MK" --preset tiny --vocab v.vocab --seed 3 -o m.st || { fail "mkmodel tiny"; exit 0; }
{ sed -n 1,6p "$ROOT/tests/data/corpus-small.txt"; echo; sed -n 7,16p "$ROOT/tests/data/corpus-small.txt"; } |
    "$TOK" -m m.st >src.ids
nsrc=$(wc -l <src.ids | tr -d ' ')
"$ENC" -m m.st src.ids >src.npy || { fail "encode"; exit 0; }

# dec OUT OPTION...: decodes src.npy into OUT; a failure or a sanitizer's
# report is a test failure.
dec() {
    out=$1; shift
    timeout $TMO "$DEC" -m m.st --max-length 12 "$@" src.npy >"$out" 2>dec.err; rc=$?
    if [ "$rc" -ne 0 ] || grep -qE 'Sanitizer|runtime error' dec.err; then
        fail "decode $*: exit $rc"; sed 's/^/    stderr: /' dec.err | head -5
    fi
}
# ia OUT OPTION...: inspect-attn with the model into OUT, likewise.
ia() {
    out=$1; shift
    timeout $TMO "$IA" -m m.st "$@" >"$out" 2>ia.err; rc=$?
    if [ "$rc" -ne 0 ] || grep -qE 'Sanitizer|runtime error' ia.err; then
        fail "inspect-attn $*: exit $rc"; sed 's/^/    stderr: /' ia.err | head -5
    fi
}
# ids_of FILE: the part of each line before ' ||| ' (the whole line without one).
ids_of() { sed 's/ [|][|][|] .*//' "$1"; }
# alignment_of FILE: the part after ' ||| ', empty for a line without one.
alignment_of() { awk '{ i = index($0, " ||| "); print i ? substr($0, i + 5) : "" }' "$1"; }

# ---- hard: the ids unchanged, inspect-attn's pairs ---------------------------------------

dec plain.txt
dec hard.txt --alignment
dec hard2.txt --alignment=hard
check "--alignment: one line per record ($nsrc)" test "$(wc -l <hard.txt | tr -d ' ')" -eq "$nsrc"
check "--alignment is --alignment=hard" cmp -s hard.txt hard2.txt
ids_of hard.txt >hard.ids
check "--alignment: the ids before ' ||| ' are decode's without it" cmp -s hard.ids plain.txt
check "--alignment: every line with a source has ' ||| ', the empty source's line is empty" \
    awk 'NR == FNR { empty[FNR] = ($0 == ""); next }
         empty[FNR] && $0 != "" { exit 1 }
         !empty[FNR] && index($0, " ||| ") == 0 { exit 1 }' src.ids hard.txt
alignment_of hard.txt >hard.al
ia ia.al --src src.ids --tgt plain.txt -f align
check "--alignment: the pairs are inspect-attn -f align's, byte for byte" cmp -s hard.al ia.al
check "--alignment: some pairs (the test is not vacuous)" grep -q '[0-9]-[0-9]' hard.al
# i-j: i a source word (its </s> left out), j a target token, each at most once
check "--alignment: pairs i-j with i < source words, j < target tokens, j increasing" \
    awk 'FILENAME == ARGV[1] { src[FNR] = NF; next }
         FILENAME == ARGV[2] { tgt[FNR] = NF; next }
         { last = -1
           for (k = 1; k <= NF; k++) {
               if ($k !~ /^[0-9]+-[0-9]+$/) exit 1
               split($k, p, "-")
               if (p[1] + 0 >= src[FNR] || p[2] + 0 >= tgt[FNR] || p[2] + 0 <= last) exit 1
               last = p[2] + 0 } }' src.ids plain.txt hard.al

# ---- soft: distributions, one per target token and </s> ----------------------------------

dec soft.txt --alignment=soft
ids_of soft.txt >soft.ids
check "--alignment=soft: the ids are decode's" cmp -s soft.ids plain.txt
alignment_of soft.txt >soft.al
check "--alignment=soft: target tokens + 1 groups of source + 1 weights, each summing to 1" \
    awk 'FILENAME == ARGV[1] { src[FNR] = NF; next }
         FILENAME == ARGV[2] { tgt[FNR] = NF; next }
         src[FNR] == 0 { if ($0 != "") exit 1; next }
         { if (NF != tgt[FNR] + 1) exit 1
           for (k = 1; k <= NF; k++) {
               n = split($k, w, ","); s = 0
               if (n != src[FNR] + 1) exit 1
               for (i = 1; i <= n; i++) { if (w[i] < 0 || w[i] > 1) exit 1; s += w[i] }
               if (s < 0.9999 || s > 1.0001) exit 1 } }' src.ids plain.txt soft.al
ia ia.soft --src src.ids --tgt plain.txt -f soft
alignment_of ia.soft >ia_soft.al
check "--alignment=soft: inspect-attn -f soft's weights, within 1e-5" \
    awk 'NR == FNR { a[FNR] = $0; next }
         { n = split(a[FNR], x, /[ ,]/); m = split($0, y, /[ ,]/)
           if (n != m) exit 1
           for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d > 1e-5 || d < -1e-5) exit 1 } }' \
    soft.al ia_soft.al

# ---- --scores and --nbest ------------------------------------------------------------------

dec scores.txt --scores
dec hard_scores.txt --alignment --scores
check "--alignment --scores: 'IDS ||| PAIRS', then the TAB and the score at the end" \
    awk -F'\t' 'NF != 2 || $2 !~ /^-?[0-9]+\.[0-9]+$/ { exit 1 }' hard_scores.txt
sed 's/ [|][|][|] [^\t]*//' hard_scores.txt >no_al_scores.txt
check "--alignment --scores: without the alignment, decode --scores's lines" \
    cmp -s no_al_scores.txt scores.txt
awk -F'\t' '{ print $1 }' hard_scores.txt >hard_scores.hard
check "--alignment --scores: the alignments of --alignment" cmp -s hard_scores.hard hard.txt

dec nbest.txt --nbest 3
dec nbest_al.txt --nbest 3 --alignment
check "--nbest 3 --alignment: 'INDEX ||| IDS ||| PAIRS ||| F0= LOG-PROB ||| SCORE'" \
    awk -F' [|][|][|] ' 'NF != 5 || $1 !~ /^[0-9]+$/ || $4 !~ /^F0= / { exit 1 }' nbest_al.txt
awk -F' [|][|][|] ' -v OFS=' ||| ' '{ print $1, $2, $4, $5 }' nbest_al.txt >nbest_no_al.txt
check "--nbest 3 --alignment: without the third field, decode --nbest 3's lines" \
    cmp -s nbest_no_al.txt nbest.txt
# every hypothesis as a target of its source, for inspect-attn
awk -F' [|][|][|] ' 'NR == FNR { src[FNR - 1] = $0; next }
     { print src[$1] >"nb_src.ids"; print $2 >"nb_tgt.ids"; print $3 >"nb.al" }' src.ids nbest_al.txt
ia nb_ia.al --src nb_src.ids --tgt nb_tgt.ids -f align
check "--nbest 3 --alignment: each hypothesis's pairs are inspect-attn -f align's" \
    cmp -s nb.al nb_ia.al
check "--nbest 3 --alignment: the empty source's hypotheses have an empty alignment" \
    awk -F' [|][|][|] ' 'NR == FNR { if ($0 == "") e[FNR - 1] = 1; next }
         ($1 in e) { seen = 1; if ($2 != "" || $3 != "") exit 1 } END { exit !seen }' \
    src.ids nbest_al.txt

# ---- the same bytes whatever the batching and threads ------------------------------------

dec b1.txt --alignment --batch-size 1
check "--alignment: --batch-size 1 gives the same bytes as batches of 64" cmp -s b1.txt hard.txt
dec t2.txt --alignment --threads 2 --batch-size 4
check "--alignment: 2 threads, batches of 4: the same bytes" cmp -s t2.txt hard.txt
dec g1.txt --alignment=soft --greedy --batch-size 1
dec g64.txt --alignment=soft --greedy
if timeout $TMO "$DEC" -v -m m.st src.npy 2>&1 >/dev/null | grep -q 'matrix kernel: AVX'; then
    check "--alignment=soft --greedy: batches of 1 and 64 give the same bytes" cmp -s g1.txt g64.txt
else
    # OpenBLAS's products (TFM_ISA=none) round differently for other batch
    # shapes: the same weights within float32's reach
    check "--alignment=soft --greedy, OpenBLAS: batches of 1 and 64 agree within 1e-5" \
        awk 'NR == FNR { a[FNR] = $0; next }
             { n = split(a[FNR], x, /[ ,]/); m = split($0, y, /[ ,]/)
               if (n != m) exit 1
               for (i = 1; i <= n; i++) if (x[i] != y[i]) {
                   d = x[i] - y[i]; if (d > 1e-5 || d < -1e-5) exit 1 } }' g1.txt g64.txt
fi
dec greedy.txt --greedy
ids_of g64.txt >g64.ids
check "--alignment=soft --greedy: the ids are decode --greedy's" cmp -s g64.ids greedy.txt

# ---- an empty input, a usage error -------------------------------------------------------

: >none.ids
"$ENC" -m m.st none.ids >none.npy
timeout $TMO "$DEC" -m m.st --alignment none.npy >none.txt 2>dec.err
check "--alignment: no records, no output, exit 0" test ! -s none.txt
expect_status 2 "--alignment=both is a usage error" "$DEC" -m m.st --alignment=both src.npy
expect_stderr "alignment" "the usage error names --alignment"
exit 0
