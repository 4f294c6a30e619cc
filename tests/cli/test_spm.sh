#!/bin/sh
# test_spm.sh - tokenize(1) with SentencePiece model files against Debian's
# sentencepiece: models trained here by spm_train (unigram and BPE;
# nmt_nfkc, nmt_nfkc_cf and identity normalization; byte fallback on and
# off; a user-defined and a control symbol; whitespace as suffix, no dummy
# prefix, extra whitespace kept), then 'tokenize -m M.model' must give
# exactly spm_encode's ids and pieces, and 'tokenize -d -m M.model' exactly
# spm_decode's text from both, on the enfr and enru test sets (both sides)
# and on hostile lines written here.  The sanitizer build checks a slice of
# each test set.  Skips when spm_train or the data is missing.
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin BUILD=build/release ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_spm.sh
. "$ROOT/tests/cli/lib.sh"

TOKENIZE="$BIN/tokenize"
TMO=${TOKENIZE_TEST_TIMEOUT:-120}
DATA="$ROOT/../shared/data"
tok() { timeout "$TMO" "$TOKENIZE" "$@"; }

for p in spm_train spm_encode spm_decode xz; do
    command -v "$p" >/dev/null 2>&1 || { skip "$p is not installed (Debian: sentencepiece, xz-utils)"; exit 0; }
done
for f in enfr/train.en enfr/train.fr enru/train.ru enfr/test.en enfr/test.fr enru/test.en enru/test.ru; do
    [ -f "$DATA/$f.xz" ] || { skip "no $DATA/$f.xz"; exit 0; }
done

# The test sets: all of them in the optimised build, a slice under the sanitizers.
case "$BUILD" in *asan*) N_TEST=250 ;; *) N_TEST=100000 ;; esac
for f in enfr/test.en enfr/test.fr enru/test.en enru/test.ru; do
    xz -dc "$DATA/$f.xz" | head -n "$N_TEST"
done >tests.txt
{ xz -dc "$DATA/enfr/train.en.xz" | head -n 1500
  xz -dc "$DATA/enfr/train.fr.xz" | head -n 600
  xz -dc "$DATA/enru/train.ru.xz" | head -n 400; } >train.txt

# Hostile lines (octal escapes: POSIX printf has no \x).
{
    printf '\n'                                            # empty
    printf '   \n'                                         # spaces only
    printf '  leading and trailing spaces  \n'
    printf 'runs     of      spaces\t\ttabs\there\n'
    printf 'control \001\002\003\033[0m \177 chars\n'
    printf 'combining e\314\201 a\314\210 n\314\203 \341\272\240\n'
    printf 'emoji \360\237\230\200\360\237\221\215\360\237\217\275 zwj \360\237\221\250\342\200\215\360\237\221\251\n'
    printf 'rtl \327\251\327\234\327\225\327\235 \331\205\330\261\330\255\330\250\330\247 \342\200\256abc\342\200\254\n'
    printf '\342\226\201 the block \342\226\201\342\226\201 itself\342\226\201\n'
    printf '\342\226\201\342\226\201leading blocks\n'
    printf 'fullwidth \357\274\241\357\274\242 \343\200\200 ideographic \302\240nbsp\n'
    printf 'ligature \357\254\201 \342\221\240 \302\275 \342\204\246\n'
    printf '<sep> user<sep>symbol <ctl> control <s> </s> <unk>\n'
    printf 'invalid \377\376 bytes \200 lone \300\257 overlong \355\240\200 surrogate\n'
    printf 'truncated \342\226\n'
    printf '\364\220\200\200 too big \360\237\230\n'
    printf 'replacement \357\277\275 char and cr\r\n'
    printf 'zero\342\200\213width\357\273\277bom\n'
    printf 'CJK \346\274\242\345\255\227 \343\201\262\343\202\211\343\201\214\343\201\252 unknown runs\n'
    printf '1234567890 3.14159 1,000,000 digits\n'
    awk 'BEGIN { for (i = 0; i < 100000; i++) printf "x"; print "" }'
    awk 'BEGIN { for (i = 0; i < 20000; i++) printf "w%d ", i; print "" }'
    awk 'BEGIN { for (i = 0; i < 30000; i++) printf "\342\226\201 "; print "" }'
} >hostile.txt
cat tests.txt hostile.txt >inputs.txt

# name: spm_train options
cat >models.txt <<'EOF'
uni-nfkc --model_type=unigram --vocab_size=2000 --normalization_rule_name=nmt_nfkc --user_defined_symbols=<sep> --control_symbols=<ctl>
uni-id-bytes --model_type=unigram --vocab_size=2000 --normalization_rule_name=identity --byte_fallback=true
uni-cf-suffix --model_type=unigram --vocab_size=1500 --normalization_rule_name=nmt_nfkc_cf --treat_whitespace_as_suffix=true --remove_extra_whitespaces=false --byte_fallback=true
bpe-nfkc-bytes --model_type=bpe --vocab_size=2000 --normalization_rule_name=nmt_nfkc --byte_fallback=true --user_defined_symbols=<sep> --control_symbols=<ctl>
bpe-id --model_type=bpe --vocab_size=1000 --normalization_rule_name=identity
bpe-suffix --model_type=bpe --vocab_size=1500 --add_dummy_prefix=false --split_digits=true --treat_whitespace_as_suffix=true
EOF

n_lines=$(lines_of inputs.txt)
while read -r name opts; do
    # shellcheck disable=SC2086
    if ! spm_train --input=train.txt --model_prefix="$name" $opts --num_threads=1 \
        --minloglevel=2 >train.log 2>&1; then
        fail "$name: spm_train failed"; sed 's/^/    /' train.log | tail -3; continue
    fi
    m="$name.model"
    for fmt in id piece; do
        spm_encode --model="$m" --output_format="$fmt" <inputs.txt >"ref.$fmt" 2>/dev/null
        spm_decode --model="$m" --input_format="$fmt" <"ref.$fmt" >"ref.d$fmt" 2>/dev/null
    done
    tok -q -m "$m" --threads 2 <inputs.txt >out.id
    same_files "$name: tokenize gives spm_encode's ids ($n_lines lines)" ref.id out.id
    tok -q -m "$m" --output pieces <inputs.txt >out.piece
    same_files "$name: tokenize --output pieces gives spm_encode's pieces" ref.piece out.piece
    tok -d -m "$m" <ref.id >out.did
    same_files "$name: tokenize -d of the ids gives spm_decode's text" ref.did out.did
    tok -d -m "$m" --input pieces <ref.piece >out.dpiece
    same_files "$name: tokenize -d --input pieces gives spm_decode's text" ref.dpiece out.dpiece
done <models.txt

# Errors: a truncated model, an id past the model, options a SentencePiece
# model does not take, and a vocabulary that only looks like one.
m=uni-nfkc.model
if [ -f "$m" ]; then
    head -c 3000 "$m" >trunc.model
    expect_status 1 "a truncated model fails" tok -m trunc.model hostile.txt
    expect_stderr '^tokenize: trunc.model: .*past the end' "it names the file and what is wrong"
    printf '5 6\n1 99999\n' >ids.txt
    expect_status 1 "an id outside the model fails" tok -d -m "$m" ids.txt
    expect_stderr '^tokenize: ids.txt:2: .*99999' "it names FILE:LINE"
    [ "$(lines_of out.txt)" = 1 ] && pass "the lines before it are written" || fail "lines before the bad one: $(lines_of out.txt)"
    expect_status 2 "--dropout is a usage error with a SentencePiece model" tok -m "$m" --dropout 0.1 hostile.txt
    printf 'a\377b\n' >bad.txt
    expect_status 1 "--strict refuses invalid UTF-8" tok --strict -m "$m" bad.txt
    expect_stderr '^tokenize: bad.txt:1: ' "naming the line"
    expect_status 0 "invalid UTF-8 is a warning without --strict" tok -m "$m" bad.txt
    expect_stderr 'bad.txt:1: warning' "naming the line"
    cp "$m" renamed.txt
    tok -q -m renamed.txt <hostile.txt >out.renamed
    spm_encode --model="$m" --output_format=id <hostile.txt >ref.renamed 2>/dev/null
    same_files "the model is known by its content, not its name" ref.renamed out.renamed
fi
