# test_parity.sh - training parity with the PyTorch reference
# (../shared/reference/torch_ref.py, torch.nn.Transformer): tfm's trainer and
# the reference start from the same weights (tfm's initialisation, exported),
# take the same batches in the same order with dropout 0, and must agree on
# the loss of every update (1e-3 relative) and on every weight after the
# last (1e-3 of the largest weight).  This checks the forward pass, the backward pass, the
# label-smoothed loss, Adam and the schedule together on real batch shapes.
#
# The tfm half is tests/tools/parity, the PyTorch half
# tests/parity/torch_parity.py.  The data are the first 40,000 pairs of the
# English-French corpus (../shared/data/enfr) when it is there, else the
# demo's dates; the model is the small preset's shapes (d_model 256, d_ff
# 1024, 4 heads) in 2+2 layers with 2,048-token batches (real batch shapes,
# a few dozen sentences; 4,096-token ones took twice the time, 90 s, for the
# same checks), in the optimised build only (below).  Two layers a side
# stack layers as three do (layer 2 reads layer 1's output; the decoder's
# every layer reads the encoder's last): measured over 20 updates (warm-up
# 150), 3+3 layers took 58 CPU-s (tfm 26, PyTorch 32) and parted by 2.7e-6
# in a loss and 1.2e-4 of the largest weight; 2+2 take 41 s (19 and 22) and
# part by 3.0e-6 and 1.6e-4, against tolerances of 1e-3.  16 updates with a
# warm-up of 120, about the same sum of the rates, take 4/5 of that and part
# by 3.6e-6 and 1.5e-4 (1.9e-6 and 1.7e-4 with OpenBLAS's SkylakeX
# kernels).  (1,024-token batches would save as much but part by 7.1e-4 of
# the largest weight; 10 updates with a warm-up of 60 by 5.4e-4; 10 updates
# of warm-up 150, a sum of the rates of 0.00056 instead of 0.00214, would
# leave a wrong update within the weights' tolerance.)  make check installs Debian's
# python3-torch (make deps-check), so a machine without it fails here rather
# than skipping: a guard that does not run guards nothing.
#
# The reference's model (torch_ref.py) is kept in tests/parity/reference, so
# that a checkout alone runs the harness; where the team's reference is
# beside the checkout (../shared/reference), the kept copy must be the same
# file, so that the harness never holds tfm to an outdated reference.
. "$ROOT/tests/cli/lib.sh"

# The sanitizer build trains bit for bit as the optimised one does
# (test_train.sh checks it), so the parity of the numbers is the optimised
# build's to check, and the memory of training's paths is test_train's,
# test_trainer's, test_layer_gradients', test_model_gradients' and
# test_pass' (this harness took 11.5 s of make check's sanitizer half).
case "$BIN" in
*asan*) skip "parity with PyTorch: checked in the optimised build (the sanitizer build trains bit for bit alike)"
    exit 0 ;;
esac

REF="$ROOT/tests/parity/reference"
SHARED_REF="$ROOT/../shared/reference"
TOOL="$BUILD/tools/parity"
[ -x "$TOOL" ] || { fail "$TOOL is not built"; exit 0; }
[ -f "$REF/torch_ref.py" ] || { fail "no reference at $REF"; exit 0; }
if [ -f "$SHARED_REF/torch_ref.py" ]; then
    check "the kept reference is the team's ($SHARED_REF/torch_ref.py)" \
        cmp -s "$REF/torch_ref.py" "$SHARED_REF/torch_ref.py"
fi
/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null ||
    { fail "PyTorch is not installed: the parity harness cannot run ('make deps-check' installs python3-torch)"; exit 0; }

ENFR="$ROOT/../shared/data/enfr"
if [ -f "$ENFR/train.en.xz" ] && command -v xz >/dev/null 2>&1; then
    xz -dc "$ENFR/train.en.xz" | head -n 40000 >train.src
    xz -dc "$ENFR/train.fr.xz" | head -n 40000 >train.tgt
    data="English-French"
else
    cp "$ROOT/tests/data/demo/train.src" train.src
    cp "$ROOT/tests/data/demo/train.tgt" train.tgt
    data="dates"
fi
model="--preset small --layers 2 --batch-tokens 2048" vocab=4000
"$BIN/tokenize" learn -q --vocab-size $vocab --soft-vocab-limit train.src train.tgt -o v.vocab &&
    "$BIN/tokenize" -m v.vocab <train.src >src.ids && "$BIN/tokenize" -m v.vocab <train.tgt >tgt.ids ||
    { fail "making the $data id files"; exit 0; }
size=$(grep -c '' v.vocab)

mkdir -p run
# shellcheck disable=SC2086 # $model is a list of options
if ! "$TOOL" --src src.ids --tgt tgt.ids --vocab-size "$size" $model --steps 16 \
        --lr-factor 0.3 --warmup 120 --seed 3 -o run 2>err.txt; then
    fail "tfm's 16 updates"; sed 's/^/    /' err.txt | head -5; exit 0
fi
pass "tfm trained 16 updates on $data batches and wrote them"

if OMP_WAIT_POLICY=passive /usr/bin/python3 "$ROOT/tests/parity/torch_parity.py" \
        --reference "$REF" --run run --lr-factor 0.3 --warmup 120 >parity.txt 2>&1; then
    pass "PyTorch agrees: $(grep '^largest loss' parity.txt); $(grep '^largest weight' parity.txt)"
else
    fail "PyTorch disagrees with tfm"; sed 's/^/    /' parity.txt | tail -60
fi
