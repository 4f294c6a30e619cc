#!/bin/sh
# test_train.sh - end-to-end tests of train(1): the copy task of the
# Annotated Transformer (random symbol sequences copied) learnt to exact
# greedy decodes of held-out sequences through encode | decode; sequence
# reversal from text, through tokenize, encode, decode and tokenize -d; a run
# stopped and resumed equal bit for bit to one never stopped; kill -9 at
# random moments never leaving a corrupt checkpoint and losing no more than
# the update under way; SIGTERM saving a checkpoint; NaN updates skipped and
# then training stopped; early stopping; averaging; checkpoints that encode
# and decode read as models; and the errors (line counts that differ, no
# vocabulary, nothing to resume from).
#
# The models are tiny (d_model 32, 2+2 layers) so that each case takes
# seconds.  Run through tests/run.sh, or by hand:
#   BIN=build/release/bin ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_train.sh
. "$ROOT/tests/cli/lib.sh"

TRAIN="$BIN/train"
if [ ! -x "$TRAIN" ]; then fail "no $TRAIN"; exit 0; fi
# Under the sanitizers everything runs ~3x slower: fewer updates there.
# The sanitizer build trains bit for bit as the optimised one does (its
# portable loops make the same IEEE operations in the same order as the
# vector ones, and the products are OpenBLAS's in both): measured on this
# Intel Xeon (AVX-512), the copy task's run below gave the same loss at
# every update and the same tensors after 30 and after 400 updates in both
# builds, and the same log (but the times) and tensors after 300 updates
# of 150 tokens.
# So the copy task and reversal learn to their bars in the optimised build
# only, and under the sanitizers they run a few hundred small updates, for
# the memory checks of their paths (ids and text through the whole
# pipeline), with a line per sequence decoded and, for the copy task, a
# loss that falls.
#
# Their batches are small (150 and 100 tokens, a dozen sequences or
# fewer): on a model this small an update's time goes with its tokens, and
# small batches learn these tasks on far fewer tokens (below).
case "$BIN" in *asan*) SLOW=1 ;; *) SLOW=0 ;; esac

# The small model of every case; options after it override (make_sequences,
# same_tensors, to_text, reverse, exact and lr_at are in lib.sh).
SMALL="--preset tiny --d-model 32 --d-ff 128 --heads 2 --threads 1 -q"

make_sequences 2800 1 >train.src
make_sequences 200 2 >valid.src
cp train.src train.tgt
cp valid.src valid.tgt

# ---- the copy task ----------------------------------------------------------------

# With train's defaults for the rate and the positions (relative positions
# alone, Shaw et al.'s default: copying has to learn where each symbol is
# from them; the linear schedule with its warm-up of 8% but at least 150
# updates), in batches of 150 tokens: measured 200 of 200 exact at update
# 800 (train's own greedy validation: 79 at update 400), and 199 or 200
# with four other sets of OpenBLAS's kernels (OPENBLAS_CORETYPE unset,
# Sandybridge, Zen, SkylakeX); 198 in a run of 700 updates, 197 in one of
# 800 updates of 100 tokens.  Bar 195.  (In batches of 1,000 tokens it took
# 600 updates, 9.8 s, to copy 197; these take 2.5 s.)
# Under the sanitizers, 300 updates (validations at 150 and 300): the
# training loss, averaged over the last 20 updates (one batch of a dozen
# sequences is a noisy measure), went from 2.57 at update 20 to 0.42, the
# same with the other kernels (guessing among the ten symbols is
# ln 10 = 2.30): the bar is 1.2.
if [ "$SLOW" = 1 ]; then steps=300; every=150; else steps=800; every=400; want=195; fi
"$TRAIN" $SMALL --vocab-size 14 --src train.src --tgt train.tgt --valid-src valid.src \
    --valid-tgt valid.tgt --valid-bleu --valid-every $every --batch-tokens 150 \
    --label-smoothing 0 --dropout 0 --ema 0.99 --max-steps $steps --save-every 0 \
    --log copy.tsv -o copy.st -v 2>copy-err.txt
check "copy task: training exits 0" test -s copy.st
# Each validation line gives the perplexity with other pairs' sources too,
# and a model that learnt its task draws no warning that it ignores them.
check "copy task: validation gives the perplexity with other sources" \
    grep -q "^train: valid step $every loss .* ppl .* (other sources: ppl [0-9.]*)" copy-err.txt
check "copy task: no warning that the model is not learning" \
    sh -c '! grep -q "not learning" copy-err.txt'
if [ ! -x "$BIN/encode" ] || [ ! -x "$BIN/decode" ]; then
    skip "copy task: no encode or decode to check the decodes with"
else
    "$BIN/encode" -m copy.st valid.src | "$BIN/decode" -m copy.st --beam 1 >copy.hyp 2>err.txt
    n=$(exact copy.hyp valid.tgt)
    if [ "$SLOW" = 1 ]; then
        check "copy task, $steps updates: a line per held-out sequence (encode | decode --beam 1)" \
            test "$(wc -l <copy.hyp)" -eq 200
    elif [ "$n" -ge "$want" ]; then pass "copy task: $n of 200 held-out sequences decoded exactly (encode | decode --beam 1)"
    else fail "copy task: $n of 200 held-out sequences decoded exactly, expected $want"; head -3 copy.hyp; fi
fi
# The log: a header and one line per update and per validation.
check "copy task: the log's header" grep -q "^step	epoch	loss	ppl	lr	tokens_per_s	elapsed	set	bleu	exact	tokens$" copy.tsv
n=$(awk -F'\t' '$8 == "train"' copy.tsv | wc -l)
check "copy task: a log line per update ($n)" test "$n" -eq "$steps"
n=$(awk -F'\t' '$8 == "valid"' copy.tsv | wc -l)
check "copy task: a log line per validation ($n)" test "$n" -eq $((steps / every))
if [ "$SLOW" = 1 ]; then
    loss=$(awk -F'\t' -v s=$steps '$8 == "train" && $1 > s - 20 { l += $3; n++ }
        END { if (n == 20) print l / n }' copy.tsv)
    check "copy task, $steps updates: the training loss falls to $loss over the last 20 (bar 1.2)" \
        awk -v l="$loss" 'BEGIN { exit !(l != "" && l < 1.2) }'
else
    best=$(awk -F'\t' '$8 == "valid" { e = $10 } END { print e * 100 }' copy.tsv)
    check "copy task: the last validation's exact matches ($best%)" test "${best%.*}" -ge $((want / 2))
fi
check "copy task: the best model is kept" test -s copy.st.best
check "copy task: a checkpoint at the end" test -s copy.st.ckpt-$steps

# ---- a model that ignores its source ------------------------------------------------

# Targets that are not the translations of their sources (the copy task's
# targets moved one line down): the model can only learn the targets' own
# statistics, and the first validation after update 500 says so, naming
# the data's alignment as the likely cause of a shallow model's trouble.
if [ "$SLOW" = 0 ]; then
    { tail -n +2 train.tgt; head -1 train.tgt; } >shifted.tgt
    "$TRAIN" $SMALL --vocab-size 14 --src train.src --tgt shifted.tgt --valid-src valid.src \
        --valid-tgt valid.tgt --valid-every 300 --batch-tokens 150 --max-steps 600 \
        --save-every 0 -o shifted.st -v 2>shifted-err.txt
    check "targets not aligned: training still writes its model" test -s shifted.st
    check "targets not aligned: one warning, none at update 300 (too early to tell)" \
        test "$(grep -c 'not learning' shifted-err.txt)" -eq 1
    check "targets not aligned: the validation at update 600 warns that the model ignores its source" \
        grep -q "^train: warning: the model is not learning to translate: after 600 updates its perplexity on the validation data .* check that line i of --tgt translates line i of --src" shifted-err.txt
    # Without validation data the same is measured on the first training pairs.
    "$TRAIN" $SMALL --vocab-size 14 --src train.src --tgt shifted.tgt --valid-every 600 \
        --batch-tokens 150 --max-steps 600 --save-every 0 -o shifted2.st -v 2>shifted2-err.txt
    check "targets not aligned, no validation data: the first training pairs say so at update 600" \
        grep -q "^train: warning: the model is not learning to translate: after 600 updates its perplexity on the first 1000 training pairs .*(--valid-src and --valid-tgt measure held-out data instead)" shifted2-err.txt
    check "targets not aligned, no validation data: the same weights as the run with validation (the probe changes nothing)" same_tensors shifted.st shifted2.st
fi

# ---- reversal, from text ----------------------------------------------------------------

# Measured with the paper's schedule and sinusoids (kept so), in batches of
# 100 tokens: 200 of 200 reversed exactly at update 2,200, and 197 to 200
# with three other sets of OpenBLAS's kernels (OPENBLAS_CORETYPE unset,
# Sandybridge, Zen); at 2,000, 195 to 200 with five; at 1,500, 191.
# Reversal stopped early sits on a steep part of its curve, where the last
# bits of a sum decide a few sequences: bar 190.  (In batches of 1,000
# tokens it took 1,000 updates, 13.6 s, to reverse 198; these take 4.5 s.)
# Under the sanitizers, 200 updates, for the memory checks of the text's
# path.
if [ "$SLOW" = 1 ]; then steps=200; else steps=2200; want=190; fi
to_text <train.src >rev.src
reverse <rev.src >rev.tgt
to_text <valid.src >rev-valid.src
reverse <rev-valid.src >rev-valid.tgt
"$BIN/tokenize" learn -q --vocab-size 290 --soft-vocab-limit rev.src rev.tgt -o rev.vocab
"$TRAIN" $SMALL -m rev.vocab --src rev.src --tgt rev.tgt --batch-tokens 100 --warmup 200 \
    --schedule noam --relative-positions 0 \
    --label-smoothing 0 --dropout 0 --ema 0.99 --max-steps $steps --save-every 0 -o rev.st 2>err.txt
check "reversal: training on text exits 0" test -s rev.st
if [ -x "$BIN/encode" ] && [ -x "$BIN/decode" ]; then
    "$BIN/tokenize" -m rev.st rev-valid.src | "$BIN/encode" -m rev.st |
        "$BIN/decode" -m rev.st --beam 1 | "$BIN/tokenize" -d -m rev.st >rev.hyp 2>err.txt
    if [ "$SLOW" = 1 ]; then
        check "reversal, $steps updates: a line per held-out sequence through tokenize | encode | decode | tokenize -d" \
            test "$(wc -l <rev.hyp)" -eq 200
    elif n=$(exact rev.hyp rev-valid.tgt); [ "$n" -ge "$want" ]; then pass "reversal: $n of 200 held-out sequences reversed exactly (tokenize | encode | decode | tokenize -d)"
    else fail "reversal: $n of 200 reversed exactly, expected $want"; head -3 rev.hyp; fi
else
    skip "reversal: no encode or decode"
fi

# ---- resuming is exact ------------------------------------------------------------------------

# Dropout, accumulation, clipping and a moving average: all of the state.
# (The paper's schedule, which does not depend on the budget: the first
# part below stops at 15 updates of the whole run's 30.)  Batches of 100
# tokens, 300 before: none of the checks of these runs depends on the size.
RUN="$SMALL --vocab-size 14 --src train.src --tgt train.tgt --batch-tokens 100 --accum 2 \
     --dropout 0.1 --clip-norm 1 --ema 0.9 --warmup 20 --seed 7 --schedule noam"
"$TRAIN" $RUN --max-steps 30 --save-every 15 -o whole.st 2>err.txt
"$TRAIN" $RUN --max-steps 15 --save-every 15 -o part.st 2>err.txt
check "resume: the first part stops at its checkpoint" test -s part.st.ckpt-15
# Its model, before the resumed run writes over it: runs of 15 updates for
# the seeds (they were runs of 30 more, besides the whole run's).
"$TRAIN" $RUN --max-steps 15 -o fresh.st 2>err.txt
check "the same seed gives the same model" same_tensors part.st fresh.st
"$TRAIN" $RUN --seed 8 --max-steps 15 -o other.st 2>err.txt
if same_tensors part.st other.st; then fail "another seed gives another model"; else pass "another seed gives another model"; fi
"$TRAIN" --resume --max-steps 30 -q -o part.st 2>err.txt
check "resume: the resumed run ends at update 30" test -s part.st.ckpt-30
check "resume: the checkpoint at 30 equals the uninterrupted run's, bit for bit" \
    same_tensors whole.st.ckpt-30 part.st.ckpt-30
check "resume: so does the model" same_tensors whole.st part.st
# The checkpoint carries the options: none of RUN were given again.
check "resume: the options come from the checkpoint" grep -q "train.opt.accum" part.st
expect_status 2 "resume: a model option cannot change" "$TRAIN" --resume --d-model 64 -o part.st
expect_status 1 "resume: nothing to resume from" "$TRAIN" --resume -o nothing.st
expect_stderr "no checkpoint" "resume: the message says there is no checkpoint"
# A checkpoint whose run state is not a number (same length, so the file
# stays well-formed): a format error naming the file and the key, not a
# usage error and not a silent zero.
perl -0777 -pe 's/("train\.elapsed"\s*:\s*")([^"]*)"/$1 . ("x" x length($2)) . "\""/e' \
    part.st.ckpt-30 >corrupt.ckpt
check "resume: the corrupted copy differs from the checkpoint" sh -c '! cmp -s part.st.ckpt-30 corrupt.ckpt'
expect_status 1 "resume: a checkpoint with a corrupt number fails (exit 1)" \
    "$TRAIN" --resume=corrupt.ckpt --max-steps 31 -o corrupt.st
expect_stderr "^train: corrupt.ckpt: .*\"train.elapsed\" is 'xx*', not a number" \
    "resume: the message names the file and the key"

# ---- kill -9 never leaves a corrupt checkpoint --------------------------------------------------

# Every update saves a checkpoint; the run is killed at random moments and
# resumed each time.  Every checkpoint left must load, the newest must be at
# most one update behind the log, and the end must equal a run never killed.
# The killed runs have no end of their own in sight (RUN's schedule, the
# paper's, does not depend on the budget), so every kill lands mid-way
# whatever the machine's pace; after the fourth, the run is resumed to 5
# updates past its newest checkpoint, and at least to update 50, and the
# run never killed is made to the same end, saving only there (saving
# changes nothing in the training).  The runs read the first 600 pairs, an
# epoch of 26 updates: the kills fall in two or three epochs, and the
# resumed runs go on from one into the next.
# (A run of 100 updates, the reference and the final resume each, took 10 s
# of this part's 16 s under the sanitizers.)  A checkpoint that loaded in
# an earlier round is not loaded again unless it changed.
# logged_step: the last update in kill.tsv (0 before there is one).
logged_step() { last_step kill.tsv; }
head -600 train.src >kill.src
KILLRUN="$RUN --src kill.src --tgt kill.src --save-every 1 --keep 3"
bad=0 round=0 killed=0 resume=""
: >probed.txt
while [ $round -lt 4 ]; do
    round=$((round + 1))
    "$TRAIN" $KILLRUN --max-steps 100000 --log kill.tsv $resume -o killed.st 2>>kill-err.txt &
    pid=$!
    # Wait until the run has made a random number of updates (5 to 16) past
    # where it started, then kill it a random fraction of an update later.
    start=$(logged_step)
    target=$(awk -v s="$start" -v r=$round 'BEGIN { srand(r * 7 + s); print s + 5 + int(rand() * 12) }')
    while kill -0 $pid 2>/dev/null && [ "$(logged_step)" -lt "$target" ]; do sleep 0.02; done
    sleep "$(awk -v r=$round 'BEGIN { srand(); printf "%.3f", rand() * 0.03 }')"
    kill -9 $pid 2>/dev/null
    { wait $pid; } 2>/dev/null
    [ $? -eq 137 ] && killed=$((killed + 1))
    for ck in killed.st.ckpt-*; do
        case $ck in *tmp*) continue ;; esac
        [ -f "$ck" ] || continue
        sum="$(cksum <"$ck") $ck"
        grep -qxF "$sum" probed.txt && continue
        if "$TRAIN" --resume="$ck" --max-steps 1 -q -o probe.st 2>probe.err; then
            echo "$sum" >>probed.txt
        else
            bad=$((bad + 1)); echo "    $ck does not load: $(head -c 200 probe.err)"
        fi
    done
    newest=$(newest_checkpoint killed.st)
    logged=$(logged_step)
    if [ -n "$newest" ] && [ "$newest" -lt $((logged - 1)) ]; then
        bad=$((bad + 1)); echo "    round $round: newest checkpoint $newest, but update $logged was logged"
    fi
    [ -n "$newest" ] && resume="--resume"
done
check "kill -9: the run was killed mid-way ($killed of 4 times)" test $killed -eq 4
check "kill -9: every checkpoint left loads, none lags the log" test $bad -eq 0
end=$((${newest:-0} + 5))
[ "$end" -ge 50 ] || end=50
"$TRAIN" $KILLRUN --max-steps $end --log kill.tsv --resume -o killed.st 2>err.txt
"$TRAIN" $KILLRUN --max-steps $end --save-every 0 -o unkilled.st 2>err.txt
check "kill -9: the run resumed to update $end equals one never killed" same_tensors unkilled.st killed.st
left=$(ls killed.st.ckpt-* | grep -c tmp)
check "kill -9: the killed runs' temporary files are cleaned up ($left left)" test "$left" -eq 0

# ---- SIGTERM saves a checkpoint --------------------------------------------------------------------

# Once training is under way (the handlers are set as it starts): its
# first update logged, instead of a second's sleep.
"$TRAIN" $RUN --max-steps 100000 --save-every 0 --log term.tsv -o term.st 2>term.err &
pid=$!
while kill -0 $pid 2>/dev/null && ! grep -q '	train	' term.tsv 2>/dev/null; do sleep 0.02; done
kill -TERM $pid
{ wait $pid; } 2>/dev/null
rc=$?
ck=$(ls term.st.ckpt-* 2>/dev/null | head -1)
check "SIGTERM: the program ends by the signal (status $rc)" test $rc -eq 143
check "SIGTERM: a checkpoint is saved ($ck)" test -n "$ck"
check "SIGTERM: the model is written" test -s term.st
if [ -n "$ck" ]; then
    check "SIGTERM: the checkpoint resumes" "$TRAIN" --resume="$ck" --max-steps 1 -q -o probe.st
fi

# ---- NaN and infinity ----------------------------------------------------------------------------------

expect_status 0 "NaN: two poisoned updates are skipped" \
    "$TRAIN" $RUN --max-steps 8 --debug-inject-nan 4:2 -v -o nan.st
expect_stderr "update 4: the loss or the gradients are not finite.*skipped \\(2 in a row\\)" \
    "NaN: each skipped update is named"
expect_status 1 "NaN: five in a row stop training" \
    "$TRAIN" $RUN --max-steps 20 --save-every 2 --debug-inject-nan 5:100 -o nan2.st
expect_stderr "not finite.*5 updates in a row.*the last checkpoint is nan2.st.ckpt-4" \
    "NaN: the message names the last good checkpoint"
check "NaN: no model is written after a divergence" test ! -e nan2.st

# ---- early stopping, averaging, init-only ------------------------------------------------------------

# A rate so small that the decodes cannot change: no validation's BLEU
# improves on the first, so patience 2 stops at the third.
expect_status 0 "early stopping: exits 0" "$TRAIN" $RUN --lr-factor 1e-9 --dropout 0 \
    --valid-src valid.src --valid-tgt valid.tgt --valid-bleu --valid-every 2 --patience 2 \
    --max-steps 100 \
    -v -o early.st
expect_stderr "early stop: 2 validations without improvement.*step 2" "early stopping: after 2 bad validations"
check "early stopping: at update 6" test -s early.st.ckpt-6

expect_status 0 "average: of two checkpoints" "$TRAIN" average -o avg.st whole.st.ckpt-15 whole.st.ckpt-30
expect_status 1 "average: a file that is not there" "$TRAIN" average -o avg2.st whole.st.ckpt-15 no-such.st
expect_stderr "^train: 'no-such\.st': No such file" "average: the missing file is named"
check "average: nothing written on failure" test ! -e avg2.st
if [ -x "$BIN/encode" ]; then
    check "average: the result is a model encode reads" sh -c "'$BIN/encode' -m avg.st valid.src >/dev/null"
    expect_status 0 "init-only: writes a model" "$TRAIN" --init-only $SMALL --vocab-size 14 -o init.st
    check "init-only: encode reads it" sh -c "'$BIN/encode' -m init.st valid.src >/dev/null"
fi

# ---- checkpoints as models ------------------------------------------------------------------

# encode and decode take a checkpoint as the model it holds (its weights;
# Adam's moments and the moving average are left unread), so a run can be
# translated with while it trains: at the end of a run without a moving
# average, the checkpoint decodes as the model file written with it.
if [ -x "$BIN/encode" ] && [ -x "$BIN/decode" ]; then
    "$TRAIN" $SMALL --vocab-size 14 --src train.src --tgt train.tgt --batch-tokens 150 \
        --max-steps 20 --save-every 20 -o plain.st 2>err.txt
    "$BIN/encode" -m plain.st valid.src | "$BIN/decode" -m plain.st --beam 2 --scores >plain.hyp
    "$BIN/encode" -m plain.st.ckpt-20 valid.src 2>ckpt.err |
        "$BIN/decode" -m plain.st.ckpt-20 --beam 2 --scores >ckpt.hyp 2>>ckpt.err
    check "checkpoint as a model: encode | decode -m MODEL.ckpt-20 gives the model file's decodes and scores" \
        sh -c 'test "$(wc -l <plain.hyp)" -eq 200 && cmp -s plain.hyp ckpt.hyp'
    check "checkpoint as a model: no message" test ! -s ckpt.err
    # One with a moving average (its state is three times the model's).
    check "checkpoint as a model: one with a moving average decodes too" \
        sh -c "'$BIN/encode' -m whole.st.ckpt-30 valid.src | '$BIN/decode' -m whole.st.ckpt-30 | wc -l | grep -qx 200"
fi

# ---- relative positions -------------------------------------------------------------------

# Copying needs to know where each symbol is: relative positions alone (no
# absolute ones, Shaw et al.'s default and train's) learn it in the copy
# task above, whose model is the one checked here: the setting in the
# metadata, the tables under PyTorch-style names.  (This case trained a
# model of its own, 600 updates more with the paper's schedule: 131 of 200
# exact at update 400, 196 at 500, 198 at 600; the sinusoids: 192 at 400.)
n=$(od -An -t u8 -N8 copy.st | tr -d ' ')
tail -c +9 copy.st | head -c "$n" >rel.json
check "relative positions: the metadata say so (train's default: relative positions alone)" \
    grep -q '"positions":"none","relative_positions":"16"' rel.json
check "relative positions: a table of keys and one of values per self-attention" sh -c \
    "[ \$(grep -o 'self_attn.relative_keys.weight\":{\"dtype\":\"F32\",\"shape\":\[33,16\]' rel.json | wc -l) -eq 4 ] &&
     [ \$(grep -o 'self_attn.relative_values.weight' rel.json | wc -l) -eq 4 ] &&
     ! grep -q 'encoder_attn.relative' rel.json"
if [ -x "$BIN/score" ] && [ -x "$BIN/inspect-attn" ]; then
    expect_status 0 "relative positions: score -m reads the model" "$BIN/score" -m copy.st \
        --src valid.src --tgt valid.tgt
    check "relative positions: score -m, a line per pair" test "$(wc -l <out.txt)" -eq 200
    expect_status 0 "relative positions: inspect-attn reads the model" "$BIN/inspect-attn" \
        -m copy.st --src valid.src --tgt valid.tgt --kind self --format tsv --sentence 1
fi
expect_status 2 "relative positions: cannot change when resuming" "$TRAIN" --resume \
    --relative-positions 8 -o copy.st
expect_stderr "^train: --relative-positions cannot change when resuming" \
    "relative positions: cannot change when resuming, said so"

# Bad values and contradictions are usage errors that say what is wrong.
for bad in "-1" 1024 x; do
    expect_status 2 "--relative-positions $bad: usage error" "$TRAIN" $SMALL --vocab-size 14 \
        --src train.src --tgt train.tgt --relative-positions "$bad" -o x.st
done
expect_stderr "^train: --relative-positions: 'x' is not an integer" "--relative-positions x: said so"
expect_status 2 "--relative-positions 1024: usage error" "$TRAIN" $SMALL --vocab-size 14 \
    --src train.src --tgt train.tgt --relative-positions 1024 -o x.st
expect_stderr "^train: --relative-positions 1024: the clipping distance goes from 1 to max_positions - 1 = 1023 \(0: none\)$" \
    "--relative-positions 1024: the range named"
expect_status 2 "--learned-positions with --relative-positions: usage error" "$TRAIN" $SMALL \
    --vocab-size 14 --src train.src --tgt train.tgt --relative-positions 4 --learned-positions \
    -o x.st
expect_stderr "add --absolute-positions to learn both" \
    "--learned-positions with --relative-positions: the way out named"
expect_status 2 "--absolute-positions alone: usage error" "$TRAIN" $SMALL --vocab-size 14 \
    --src train.src --tgt train.tgt --absolute-positions -o x.st
expect_stderr "^train: --absolute-positions goes with --relative-positions K" \
    "--absolute-positions alone: said so"
expect_status 0 "relative and learned absolute positions, a window: --init-only" "$TRAIN" \
    --init-only $SMALL --vocab-size 14 --relative-positions 2 --learned-positions \
    --absolute-positions --attention-window 3 -o both.st
check "relative and learned absolute positions: both kinds of tables" sh -c \
    "grep -q 'encoder.embed_positions.weight' both.st && grep -q 'relative_values.weight' both.st &&
     grep -q '\"positions\":\"learned\",\"relative_positions\":\"2\"' both.st"

# ---- schedules ------------------------------------------------------------------------------

SCHED="$SMALL --vocab-size 14 --src train.src --tgt train.tgt --batch-tokens 300 --seed 3"
# The default with a budget: linear, a warm-up of 8% but at least 150
# updates, and at most half the run (here 10 of 20 updates), to
# 0.3 (d_model 10)^-0.5, then down to an 11th of it at update 20.
"$TRAIN" $SCHED --max-steps 20 --save-every 10 --log lin.tsv -o lin.st 2>err.txt
check "linear: the peak at the warm-up's end" \
    awk -v x="$(lr_at 10 lin.tsv)" 'BEGIN { exit !(x > 0.3 / sqrt(320) * 0.9999 && x < 0.3 / sqrt(320) * 1.0001) }'
check "linear: down to an 11th of the peak at the budget's end" \
    awk -v a="$(lr_at 10 lin.tsv)" -v b="$(lr_at 20 lin.tsv)" -v c="$(lr_at 15 lin.tsv)" \
    'BEGIN { exit !(b * 11 > a * 0.9999 && b * 11 < a * 1.0001 && c * 11 > a * 5.9994 && c * 11 < a * 6.0006) }'
# A share alone: 8% of 20 updates, rounded, is 2.
"$TRAIN" $SCHED --max-steps 20 --save-every 0 --warmup 8% --log share.tsv -o share.st 2>err.txt
check "--warmup 8%: the peak at update 2 of 20" \
    awk -v x="$(lr_at 2 share.tsv)" 'BEGIN { exit !(x > 0.3 / sqrt(64) * 0.9999 && x < 0.3 / sqrt(64) * 1.0001) }'
check "linear: the checkpoint keeps the schedule chosen" \
    grep -q '"train.opt.schedule":"linear"' lin.st.ckpt-20
"$TRAIN" --resume=lin.st.ckpt-10 -q -o lin2.st 2>err.txt
check "linear: resumed from update 10 of 20, the same as never stopped" same_tensors lin.st lin2.st
# wsd: the warm-up to update 10, the peak held to update 16 of 20, then down.
"$TRAIN" $SCHED --max-steps 20 --save-every 0 --schedule wsd --log wsd.tsv -o wsd.st 2>err.txt
check "wsd: the peak held to update 16, down after" \
    awk -v a="$(lr_at 10 wsd.tsv)" -v b="$(lr_at 16 wsd.tsv)" -v c="$(lr_at 18 wsd.tsv)" \
    'BEGIN { exit !(a == b && c < b * 0.61) }'
# Under --max-time the updates are estimated from the pace: the rate ends
# close to 0 whatever the machine's speed.  One second of updates of 100
# tokens: measured some 400 updates here, 145 under the sanitizers, whose
# last rate was a 70th of the peak (3 s of updates of 300 tokens before).
"$TRAIN" $SCHED --batch-tokens 100 --max-time 1 --save-every 0 --log time.tsv -o time.st 2>err.txt
n=$(awk -F'\t' '$8 == "train"' time.tsv | wc -l)
if [ "$n" -ge 20 ]; then
    check "linear under --max-time: the last rate ($n updates) is below a tenth of the peak" \
        awk -F'\t' '$8 == "train" { if ($5 > m) m = $5; last = $5 } END { exit !(last < m / 10) }' time.tsv
else
    skip "linear under --max-time: $n updates in 1 s are too few to tell"
fi
# A checkpoint of a version before --schedule (its key renamed, the same
# length) resumes with the paper's schedule it was trained with.
perl -0777 -pe 's/"train\.opt\.schedule"/"train.opt.schedulX"/' lin.st.ckpt-10 >old.ckpt
"$TRAIN" --resume=old.ckpt --max-steps 12 --save-every 0 -q -o old.st 2>err.txt
check "a checkpoint without a schedule resumes with the paper's" \
    grep -q '"train.opt.schedule":"noam"' old.st
expect_status 2 "--schedule linear without a budget: usage error" "$TRAIN" $SCHED --schedule linear -o x.st
expect_stderr "^train: --schedule linear ends at the budget, and there is none: give --max-steps" \
    "--schedule linear without a budget: the way out named"
expect_status 2 "--warmup 5% without a budget: usage error" "$TRAIN" $SCHED --warmup 5% -o x.st
expect_status 2 "--warmup 100%: usage error" "$TRAIN" $SCHED --max-steps 5 --warmup 100% -o x.st
expect_stderr "^train: --warmup: '100%' is neither a number of updates nor a share" \
    "--warmup 100%: said so"
expect_status 2 "--warmup 8%,x: usage error" "$TRAIN" $SCHED --max-steps 5 --warmup 8%,x -o x.st
expect_stderr "P%,N for at least N updates" "--warmup 8%,x: the forms named"
expect_status 2 "--schedule cosine: usage error" "$TRAIN" $SCHED --max-steps 5 --schedule cosine -o x.st
# Absolute positions asked for by name replace the default relative ones.
expect_status 0 "--learned-positions alone: no relative positions" "$TRAIN" --init-only $SMALL \
    --vocab-size 14 --learned-positions -o learned.st
check "--learned-positions alone: learned positions only" sh -c \
    "grep -q '\"positions\":\"learned\"' learned.st && ! grep -q 'relative_values' learned.st"

# ---- errors --------------------------------------------------------------------------------------------

head -5 train.src >short.src
expect_status 1 "mismatched line counts: exit 1" "$TRAIN" $SMALL --vocab-size 14 --src short.src \
    --tgt train.tgt -o x.st
expect_stderr "source file has 5 lines but the target file has 2800" "mismatched line counts: both counts named"
expect_status 2 "no vocabulary: usage error" "$TRAIN" $SMALL --src train.src --tgt train.tgt -o x.st
expect_status 2 "no -o: usage error" "$TRAIN" $SMALL --vocab-size 14 --src train.src --tgt train.tgt
printf '4 5\n6 99\n' >bad.src
printf '4 5\n6 7\n' >bad.tgt
expect_status 1 "an id outside the vocabulary: exit 1" "$TRAIN" $SMALL --vocab-size 14 \
    --src bad.src --tgt bad.tgt -o x.st
expect_stderr "^train: bad.src:2: column 3: id 99 is outside the vocabulary" "an id outside the vocabulary: FILE:LINE named"
expect_status 2 "a bad duration: usage error" "$TRAIN" $SMALL --vocab-size 14 --src train.src \
    --tgt train.tgt --max-time 1x -o x.st

# ---- the log ---------------------------------------------------------------------------------------

# A log that cannot be written is given up with one warning naming it, and
# the run goes on to its early stop, said right after its validation.
expect_status 0 "--log /dev/full: the run goes on (exit 0)" "$TRAIN" $RUN --lr-factor 1e-9 \
    --dropout 0 --valid-src valid.src --valid-tgt valid.tgt --valid-every 2 --patience 1 \
    --max-steps 100 -v --log /dev/full -o full.st
expect_stderr "^train: /dev/full: warning: write error: No space left on device; training goes on without the log$" \
    "--log /dev/full: one warning, naming the log"
check "--log /dev/full: the model is written" test -s full.st
# (Which validation is the last depends on the last bits of the losses at
# this learning rate: the line before the early stop is a validation.)
check "--log /dev/full: the warning once, the early stop right after the last validation" sh -c \
    "[ \$(grep -c 'write error' err.txt) -eq 1 ] && grep -B1 '^train: early stop:' err.txt | head -1 | grep -q '^train: valid step [0-9]* .* no better$'"
expect_status 1 "--log in a folder that is not there: exit 1" "$TRAIN" $SMALL --vocab-size 14 \
    --src train.src --tgt train.tgt --max-steps 1 --log no/such/log.tsv -o x.st
expect_stderr "^train: no/such/log.tsv: No such file or directory$" "--log in a folder that is not there: named"

# ---- the kernels of training's products ------------------------------------------------------

# Training's matrix products run on AVX-512 or AVX2 kernels of the library's
# own, which make the same FMAs in the same order (and so do the vector
# loops beside them): TFM_ISA=avx2 on an AVX-512 CPU trains the same model,
# bit for bit, at two threads.
if grep -qw avx512f /proc/cpuinfo; then
    ISA_RUN="--preset tiny --d-model 64 --d-ff 256 --heads 2 --threads 2 --vocab-size 14 --src train.src --tgt train.tgt --batch-tokens 200 --max-steps 4 --save-every 0 --seed 5 -q"
    "$TRAIN" $ISA_RUN -o isa-best.st && TFM_ISA=avx2 "$TRAIN" $ISA_RUN -o isa-avx2.st
    check "TFM_ISA=avx2 trains the model of the AVX-512 kernels, bit for bit" \
        same_tensors isa-best.st isa-avx2.st
    TFM_ISA=avx512 "$TRAIN" $ISA_RUN -v -o isa-unknown.st 2>err.txt
    check "TFM_ISA=avx512 (unknown) trains the model of the best kernels, bit for bit" \
        same_tensors isa-best.st isa-unknown.st
    check "... and says it is ignored, naming the values known" \
        grep -q '^train: warning: TFM_ISA=avx512 is not one of avx512bw, avx2 and none' err.txt
else
    skip "the AVX2 and AVX-512 kernels of training: this CPU has no AVX-512"
fi

# ---- OpenBLAS's kernels behind the CPU -------------------------------------------------------

# A CPU newer than the OpenBLAS build gets its oldest kernels (Debian 12's
# runs "Prescott", SSE3, on Xeons with AVX-512 FP16).  Training's products
# run on the library's own kernels wherever the CPU has AVX2: OpenBLAS's
# choice then does not matter, and train says nothing.  With TFM_ISA=none
# they go to OpenBLAS: then train says so, names the kernels and what to
# set; not with kernels the CPU can run, nor under -q.
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    ONE="--preset tiny --d-model 32 --d-ff 128 --heads 2 --threads 1 --vocab-size 14 --src train.src --tgt train.tgt --batch-tokens 100 --max-steps 1 --save-every 0"
    env OPENBLAS_CORETYPE=Prescott "$TRAIN" $ONE -o k.st 2>err.txt
    check "OpenBLAS's Prescott kernels, the library's own kernels for training: no warning" \
        sh -c "! grep -q 'OpenBLAS runs' err.txt"
    expect_status 0 "OpenBLAS's Prescott kernels and TFM_ISA=none: train runs" \
        env OPENBLAS_CORETYPE=Prescott TFM_ISA=none "$TRAIN" $ONE -o k.st
    expect_stderr "^train: warning: OpenBLAS runs its Prescott kernels on this CPU, which has AVX2 and FMA, and TFM_ISA=none .*set OPENBLAS_CORETYPE=Haswell" \
        "... and warns, naming the kernels and what to set"
    env OPENBLAS_CORETYPE=Haswell TFM_ISA=none "$TRAIN" $ONE -o k.st 2>err.txt
    check "... not with its Haswell kernels" sh -c "! grep -q 'OpenBLAS runs' err.txt"
    env OPENBLAS_CORETYPE=Prescott TFM_ISA=none "$TRAIN" $ONE -q -o k.st 2>err.txt
    check "... nor with -q" test ! -s err.txt
else
    skip "OpenBLAS's kernels behind the CPU: this CPU has no AVX2 and FMA"
fi
