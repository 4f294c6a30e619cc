#!/bin/sh
# import_quality.sh BUILD - make bench-import-quality: an imported OPUS-MT
# model used as a user would use one, on the enfr test set (2,000 strings).
#
#   1. the model: a synthetic OPUS-MT directory of the small preset's shape
#      (tests/import/make_fixtures.py --small: 3+3 layers, 256, swish,
#      post-norm, tied-all, an 8k joint SentencePiece model; random weights),
#      imported by 'train import' and fine-tuned by 'train --init' on the
#      enfr training pairs for STEPS updates: the training OPUS-MT did,
#      which no machine here can download, stood in for by a user's.
#   2. int8: 'train quantize' of the fine-tuned model; float32 and int8
#      translate the test set, beam 4 and greedy.  BLEU and chrF of each and
#      int8's change against float32 (the bar of issue 31: within 0.3), and
#      the share of lines identical to float32's.
#   3. placeholders: the same four decodes with 'decode --placeholders' (the
#      model has no placeholder tokens: each placeholder is spelled in its
#      own pieces); placeholders.py report counts the lines that keep exactly
#      the source's placeholders and the c-format entries 'msgfmt
#      --check-format' rejects.
#
# Output lines (machine-readable):
#   import_quality compute=float32|int8 search=beam4|greedy bleu=X chrf=X d_bleu=X d_chrf=X identical=P
#   placeholders name=TYPE.SEARCH keep=P msgfmt=N msgfmt_all=N terms=-
# Everything stays in BENCH_OUT/import-quality (build/bench); what is there
# is used again (the directory, the imported and the fine-tuned model), so
# a second run only translates.  Not part of make check: about 15 minutes
# on 2 CPUs with the fine-tuning.
#
# Environment: STEPS (400), THREADS (2), BENCH_OUT.
set -u
BUILD=${1:?usage: tests/bench/import_quality.sh BUILD}
BIN=$(cd "$BUILD" && pwd)/bin || exit 1
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
DATA="$ROOT/../shared/data/enfr"
STEPS=${STEPS:-400}
THREADS=${THREADS:-2}
OUT=${BENCH_OUT:-build/bench}/import-quality
PY=/usr/bin/python3
export LC_ALL=C.UTF-8

[ -f "$DATA/test.en.xz" ] || { echo "import_quality.sh: no enfr data at $DATA"; exit 1; }
command -v msgfmt >/dev/null || { echo "import_quality.sh: no msgfmt (apt-get install gettext)"; exit 1; }
mkdir -p "$OUT" || exit 1
for f in train.en train.fr test.en test.fr; do
    [ -s "$OUT/$f" ] || xz -dc "$DATA/$f.xz" >"$OUT/$f" || exit 1
done

# 1. the model
if [ ! -s "$OUT/opus/decoder.yml" ]; then
    $PY tests/import/make_fixtures.py --small "$OUT/opus" >"$OUT/fixtures.log" 2>&1 ||
        { tail "$OUT/fixtures.log"; exit 1; }
fi
[ -s "$OUT/imported.st" ] || "$BIN/train" import "$OUT/opus" -o "$OUT/imported.st" || exit 1
if [ ! -s "$OUT/float32.st" ]; then
    echo "import-quality: fine-tuning the imported model for $STEPS updates on $(wc -l <"$OUT/train.en") enfr pairs"
    "$BIN/train" --init "$OUT/imported.st" --src "$OUT/train.en" --tgt "$OUT/train.fr" \
        --max-steps "$STEPS" --threads "$THREADS" -o "$OUT/float32.st" >"$OUT/train.log" 2>&1 ||
        { tail "$OUT/train.log"; exit 1; }
fi
tail -n 1 "$OUT/train.log" 2>/dev/null | sed 's/^/  last: /'
[ -s "$OUT/int8.st" ] ||
    "$BIN/train" quantize --compute-type int8 -i "$OUT/float32.st" -o "$OUT/int8.st" || exit 1

# 2. and 3. the translations: TYPE.SEARCH.fr, and TYPE.SEARCH.ph.fr with --placeholders
"$BIN/tokenize" -q -m "$OUT/float32.st" <"$OUT/test.en" >"$OUT/test.ids" || exit 1
for t in float32 int8; do
    "$BIN/encode" -q -m "$OUT/$t.st" --threads "$THREADS" <"$OUT/test.ids" >"$OUT/$t.npy" || exit 1
    for search in beam4 greedy; do
        opt="--beam 4"
        [ "$search" = greedy ] && opt=--greedy
        "$BIN/decode" -q -m "$OUT/$t.st" $opt --threads "$THREADS" <"$OUT/$t.npy" |
            "$BIN/tokenize" -q -d -m "$OUT/$t.st" >"$OUT/$t.$search.fr" || exit 1
        "$BIN/decode" -q -m "$OUT/$t.st" $opt --threads "$THREADS" \
            --placeholders="$OUT/test.en" <"$OUT/$t.npy" |
            "$BIN/tokenize" -q -d -m "$OUT/$t.st" >"$OUT/$t.$search.ph.fr" || exit 1
    done
done

echo "import-quality: float32 and int8 on the enfr test set ($(wc -l <"$OUT/test.en") lines), $THREADS threads"
for search in beam4 greedy; do
    for t in float32 int8; do
        bleu=$("$BIN/score" bleu -b -w 2 -r "$OUT/test.fr" "$OUT/$t.$search.fr") || exit 1
        chrf=$("$BIN/score" chrf -b -w 2 -r "$OUT/test.fr" "$OUT/$t.$search.fr") || exit 1
        [ "$t" = float32 ] && bleu32=$bleu chrf32=$chrf
        same=$(paste -d '\t' "$OUT/$t.$search.fr" "$OUT/float32.$search.fr" |
            awk -F'\t' '$1 == $2 { n++ } END { printf "%.2f", NR ? 100 * n / NR : 0 }')
        echo "$t $search $bleu $chrf $bleu32 $chrf32 $same" | awk '{
            printf "  %-7s %-6s BLEU %6.2f (%+.2f)  chrF %6.2f (%+.2f)  identical to float32 %6.2f%%\n",
                $1, $2, $3, $3 - $5, $4, $4 - $6, $7
            printf "import_quality compute=%s search=%s bleu=%.2f chrf=%.2f d_bleu=%.2f d_chrf=%.2f identical=%.2f\n",
                $1, $2, $3, $4, $3 - $5, $4 - $6, $7 }'
    done
done
echo "import-quality: decode --placeholders (the placeholders spelled in the model's own pieces)"
$PY tests/bench/placeholders.py report "$BIN" "$OUT/test.en" "$OUT/test.fr" \
    float32.beam4="$OUT/float32.beam4.ph.fr" float32.greedy="$OUT/float32.greedy.ph.fr" \
    int8.beam4="$OUT/int8.beam4.ph.fr" int8.greedy="$OUT/int8.greedy.ph.fr" \
    plain.float32.beam4="$OUT/float32.beam4.fr" || exit 1
