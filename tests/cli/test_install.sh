#!/bin/sh
# test_install.sh - `make install` and `make uninstall` into a DESTDIR under
# TEST_TMP, with a PREFIX of its own: the programs (which run from there),
# libtfm.a, tfm.h and tfm/*.h, the pkg-config file, and the man pages of
# sections 1 and 5.  A program compiled against the installed header and
# library through pkg-config builds and runs (it loads a model, tokenizes a
# line and runs the encoder, so every library libtfm needs is linked); man
# finds the pages through MANPATH; uninstall removes every file install made.
#
# It installs what is built in BUILD and builds nothing (make -o all), so it
# neither writes into BUILD nor mixes flags of two builds.
#
# Run through tests/run.sh, or by hand:
#   BIN=build/release/bin ROOT=$PWD BUILD=$PWD/build/release TEST_TMP=$(mktemp -d) \
#     sh tests/cli/test_install.sh
. "$ROOT/tests/cli/lib.sh"

: "${BUILD:=$(cd "$BIN/.." && pwd)}"
if [ ! -f "$BUILD/libtfm.a" ]; then fail "no $BUILD/libtfm.a"; exit 0; fi
if ! command -v make >/dev/null 2>&1; then skip "no make"; exit 0; fi

DEST=$TEST_TMP/dest
PREFIX=/opt/tfm
P=$DEST$PREFIX
# The make of the top-level Makefile, not the one (with its flags and
# variables) that may be running the tests.
mk() {
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
        make --no-print-directory -C "$ROOT" -o all BUILD="$BUILD" \
        DESTDIR="$DEST" PREFIX="$PREFIX" "$@"
}

mk install >install.out 2>install.err; rc=$?
check "make install exits 0" test "$rc" -eq 0
[ "$rc" -eq 0 ] || sed 's/^/    /' install.err | tail -10

# ---- programs ----------------------------------------------------------------------

n=0 bad=""
for prog in "$BIN"/*; do
    [ -x "$prog" ] || continue
    p=$(basename "$prog"); n=$((n + 1))
    "$P/bin/$p" --version >/dev/null 2>&1 || bad="$bad $p"
done
check "the $n programs are installed and run from $PREFIX/bin${bad:+ (not:$bad)}" \
    test "$n" -gt 0 -a -z "$bad"

# ---- library, headers, pkg-config ------------------------------------------------------

check "libtfm.a is installed" test -f "$P/lib/libtfm.a"
check "tfm.h is installed" cmp -s "$ROOT/lib/tfm.h" "$P/include/tfm.h"
bad=""
for h in "$ROOT"/lib/tfm/*.h; do
    cmp -s "$h" "$P/include/tfm/$(basename "$h")" || bad="$bad $(basename "$h")"
done
check "every lib/tfm/*.h is installed in include/tfm${bad:+ (not:$bad)}" test -z "$bad"
check "tfm.pc is installed" test -f "$P/lib/pkgconfig/tfm.pc"
check "tfm.pc names the prefix" grep -q "^prefix=$PREFIX\$" "$P/lib/pkgconfig/tfm.pc"

cat >prog.c <<'EOF'
/* prog.c - a user's program built against the installed libtfm: loads a
 * model, tokenizes a line with its vocabulary, decodes it back and runs the
 * encoder over it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tfm.h>

int main(int argc, char **argv)
{
    tfm_error err;
    tfm_model *m;
    if (argc != 2 || tfm_model_load(argv[1], &m, &err) != TFM_OK) {
        fprintf(stderr, "prog: %s: %s\n", argc > 1 ? argv[1] : "?", err.msg);
        return 1;
    }
    tfm_bpe *bpe;
    tfm_bpe_create(m->vocab, &bpe, &err);
    tfm_bpe_encode_params ep = {0};
    tfm_ids ids;
    tfm_ids_init(&ids);
    const char *line = "Hello world";
    tfm_bpe_encode(bpe, &ep, line, strlen(line), &ids, NULL, &err);
    tfm_buf text;
    tfm_buf_init(&text);
    tfm_bpe_decode(m->vocab, ids.data, ids.len, &text, &err);

    tfm_encoder *enc;
    int len = (int)ids.len;
    const int32_t *rows[1] = {ids.data};
    float *states = malloc((size_t)len * (size_t)m->config.d_model * sizeof *states);
    int ok = tfm_encoder_create(m, &enc, &err) == TFM_OK &&
             tfm_encoder_forward(enc, 1, rows, &len, states, &err) == TFM_OK;
    printf("%s|%d ids|d_model %d|%s\n", text.data, len, m->config.d_model, ok ? "encoded" : err.msg);

    free(states);
    tfm_encoder_free(enc);
    tfm_buf_free(&text);
    tfm_ids_free(&ids);
    tfm_bpe_free(bpe);
    tfm_model_free(m);
    return ok ? 0 : 1;
}
EOF
# The files are not in PREFIX yet (they are in DESTDIR): tell pkg-config.
PKG="pkg-config --define-variable=prefix=$P"
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
# A library built with the sanitizers needs them at link time as well.
san=""
if nm "$P/lib/libtfm.a" 2>/dev/null | grep -q '__asan_'; then san="-fsanitize=address,undefined"; fi
if ! command -v pkg-config >/dev/null 2>&1; then
    skip "no pkg-config"
else
    check "pkg-config knows tfm" $PKG --exists tfm
    flags="$($PKG --cflags tfm) $($PKG --libs tfm)"
    ${CC:-cc} -std=c11 -Wall -Wextra -Werror $san prog.c $flags -o prog 2>cc.err; rc=$?
    check "a program builds with \$(pkg-config --cflags --libs tfm)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || sed 's/^/    /' cc.err | head -10
    if [ "$rc" -eq 0 ] && "$BIN/tokenize" learn -q --vocab-size 300 --soft-vocab-limit \
            -o v.vocab "$ROOT/tests/data/corpus-small.txt" 2>/dev/null &&
            "$BIN/train" --init-only --preset tiny -q -m v.vocab -o m.st 2>train.err; then
        ./prog m.st >prog.out 2>prog.err
        check "and runs: a model loaded, a line tokenized and back, encoded ($(cat prog.out))" \
            grep -q '^Hello world|[1-9][0-9]* ids|d_model 64|encoded$' prog.out
    else
        skip "no model to run the program on"
    fi
    ${CC:-cc} -std=c11 $san prog.c $($PKG --cflags tfm) $($PKG --libs --static tfm) -o prog2 2>cc.err
    check "and with pkg-config --static, as tfm.h says" test -x prog2
fi

# ---- man pages ---------------------------------------------------------------------------

bad=""
for page in "$ROOT"/man/*.[15]; do
    s=${page##*.}
    cmp -s "$page" "$P/share/man/man$s/$(basename "$page")" || bad="$bad $(basename "$page")"
done
check "every man page is installed in man1 or man5${bad:+ (not:$bad)}" test -z "$bad"
if command -v man >/dev/null 2>&1; then
    for page in tokenize encode decode train score inspect-attn; do
        [ -f "$ROOT/man/$page.1" ] || continue
        got=$(MANPATH="$P/share/man" man -w "$page" 2>/dev/null)
        check "MANPATH=$PREFIX/share/man man $page finds the installed page" \
            test "$got" = "$P/share/man/man1/$page.1" -o "$got" = "$P/share/man/man1/$page.1.gz"
    done
    MANPATH="$P/share/man" MANPAGER=cat MANWIDTH=80 man tokenize >man.out 2>man.err
    check "man tokenize shows the page" grep -q 'tokenize.*learn and apply' man.out
    MANPATH="$P/share/man" MANPAGER=cat MANWIDTH=80 man 5 tfm-formats >man.out 2>man.err
    check "man 5 tfm-formats shows the page" grep -qi 'tensor stream' man.out
else
    skip "no man to read the pages with"
fi

# ---- uninstall ---------------------------------------------------------------------------

mk uninstall >uninstall.out 2>uninstall.err; rc=$?
check "make uninstall exits 0" test "$rc" -eq 0
left=$(find "$DEST" ! -type d | sed "s|^$DEST||" | tr '\n' ' ')
check "make uninstall removes every file install made${left:+ (left: $left)}" test -z "$left"
