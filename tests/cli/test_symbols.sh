# test_symbols.sh - libtfm.a shows its public API alone: every global symbol
# it defines is tfm_*, so a program that links it beside code of its own (or
# another library) with internal names such as linear_forward or batch_pack
# links and runs.  The same program linked with the internal archive (the
# objects as they are, which the tests use) fails with a multiple
# definition: what the public archive's link step prevents.
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin BUILD=build/release ROOT=$PWD TEST_TMP=$(mktemp -d) sh tests/cli/test_symbols.sh
. "$ROOT/tests/cli/lib.sh"

LIB="$BUILD/libtfm.a" INTERNAL="$BUILD/libtfm-internal.a"
[ -f "$LIB" ] && [ -f "$INTERNAL" ] || { fail "no $LIB or $INTERNAL (make all)"; exit 0; }
command -v nm >/dev/null 2>&1 || { skip "no nm"; exit 0; }

nm -g --defined-only "$LIB" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >globals.txt
n=$(grep -c '^tfm_' globals.txt)
check "libtfm.a defines the public API ($n tfm_ symbols)" test "$n" -gt 200
others=$(grep -v '^tfm_' globals.txt | head -20 | tr '\n' ' ')
if [ -z "$others" ]; then pass "every global symbol of libtfm.a is tfm_*"
else fail "libtfm.a exports symbols without the tfm_ prefix: $others"; fi

# The internals the program below redefines exist, as globals, in the
# internal archive: the test means something only if they do.
nm -g --defined-only "$INTERNAL" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >internal.txt
for s in linear_forward batch_pack softmax_forward; do
    check "the internal archive defines $s" grep -qx "$s" internal.txt
done

cat >collide.c <<'EOF'
/* A program with functions of its own that share internal names of the
 * library, and a call into the library that runs those internals: the
 * encoder of a tiny model over five ids. */
#include <stdio.h>
#include "tfm.h"
int linear_forward(void) { return 1; }
int batch_pack(void) { return 2; }
int softmax_forward(void) { return 3; }
int main(void)
{
    tfm_config c;
    tfm_error err;
    tfm_model *m = NULL;
    tfm_encoder *e = NULL;
    if (tfm_config_preset("tiny", &c, &err) != TFM_OK) return 1;
    c.src_vocab_size = c.tgt_vocab_size = 50;
    if (tfm_model_create(&c, NULL, 1, &m, &err) != TFM_OK ||
        tfm_encoder_create(m, &e, &err) != TFM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    static const int32_t ids[5] = {4, 8, 15, 16, 23};
    const int32_t *rows[1] = {ids};
    const int lens[1] = {5};
    static float states[5 * 1024];
    if (tfm_encoder_forward(e, 1, rows, lens, states, &err) != TFM_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%d %d %d %d %.3f\n", linear_forward(), batch_pack(), softmax_forward(), c.d_model,
           (double)states[0]);
    tfm_encoder_free(e);
    tfm_model_free(m);
    return 0;
}
EOF
# The build's own flags for the sanitizer build (its archive calls ASan).
san=""
nm "$LIB" 2>/dev/null | grep -q '__asan_' && san="-fsanitize=address,undefined"
libs="-lopenblas -lutf8proc -lcjson -lm -pthread"
# shellcheck disable=SC2086 # lists of flags
if cc -std=c11 $san -I"$ROOT/lib" collide.c -Wl,--gc-sections "$LIB" $libs -o collide 2>link.err; then
    pass "a program defining linear_forward, batch_pack and softmax_forward links with libtfm.a"
    out=$(./collide 2>&1)
    case $out in
    "1 2 3 "*) pass "it runs its own functions and the library's: $out" ;;
    *) fail "the program printed '$out'" ;;
    esac
else
    fail "linking with libtfm.a: $(grep -m1 -E 'multiple definition|undefined' link.err)"
fi
# shellcheck disable=SC2086
if cc -std=c11 $san -I"$ROOT/lib" collide.c -Wl,--gc-sections "$INTERNAL" $libs -o collide2 \
        2>link2.err; then
    fail "the same program links with the internal archive: the test could not catch a leak"
else
    check "with the internal archive it does not link (multiple definition)" \
        grep -q 'multiple definition' link2.err
fi

# The filters link only what they call, and OpenBLAS statically where its
# archive is installed (Makefile, FILTER_LIBS): the shared library's symbol
# lookups were half of a one-line decode's start.  A sanitizer build links
# every program by need (Makefile, PROGRAM_LIB), but each keeps all of its
# objects' references: there the filters are held to loading none of
# train's libraries (libzip, libyaml, Open MPI), which every program of the
# test suite's thousands of starts paid for before.
if ! command -v ldd >/dev/null 2>&1; then
    skip "no ldd"
else
    for p in tokenize encode decode score inspect-attn; do
        ldd "$BIN/$p" >"$p.ldd" 2>&1
        check "$p loads none of train's libraries (libzip, libyaml, Open MPI)" \
            sh -c "! grep -q -E 'libzip|libyaml|libmpi' $p.ldd"
    done
    ldd "$BIN/train" >train.ldd 2>&1
    check "train loads them (the test can tell)" sh -c "grep -q libzip train.ldd && grep -q libmpi train.ldd"
    if nm "$BIN/decode" 2>/dev/null | grep -q __asan_init; then
        skip "tokenize without OpenBLAS, the others with it linked in: the optimised build's checks (the sanitizers keep every reference)"
    else
        check "tokenize loads no OpenBLAS" sh -c '! grep -q libopenblas tokenize.ldd'
        if ls /usr/lib/*/openblas-pthread/libopenblas.a >/dev/null 2>&1; then
            for p in encode decode inspect-attn; do
                check "$p has OpenBLAS linked in, not loaded" sh -c "! grep -q libopenblas $p.ldd"
            done
        else
            skip "no static OpenBLAS archive (libopenblas-pthread-dev)"
        fi
    fi
fi
