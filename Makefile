# Makefile for the tfm toolkit: a Transformer as Unix filters.
#
#   make            build the programs and libtfm.a (build/release)
#   make deps       install missing Debian packages (apt-get)
#   make check      build and run every test, optimised and under ASan+UBSan
#   make demo       the main job on the sample task: learn a vocabulary, train a
#                   tiny model (~2 min), translate, score, draw attention
#   make bench      benchmarks (the CPU's FMA peak and memory bandwidth first,
#                   then OpenBLAS's sgemm; then each tool against its peer)
#   make bench-quality  tfm against the PyTorch reference: 30 min of training
#                   each on ../shared/data/enfr, test BLEU and chrF (~70 min)
#   make bench-curves   learning curves against the reference (~2.5 hours)
#   make bench-quant MODEL=M  a trained enfr model in int8 and bf16 against
#                   float32: test BLEU, chrF, identical sentences (~20 s, small)
#   make bench-placeholders  placeholders kept, msgfmt --check-format, term use,
#                   BLEU/chrF, constrained decoding speed on enfr (~70 min)
#   make bench-window   restricted self-attention against full: growth with the
#                   sentence length, long decodes (the bench's window section)
#   make bench-import   an imported base-sized OPUS-MT model against CTranslate2
#   make bench-import-quality  an imported small model fine-tuned: int8, placeholders
#   make bench-catalog MODEL=M  a real Debian catalog (apt-get download) through
#                   examples/Makefile with a French model: msgfmt --check, msgcmp, timing
#   make bench-distill  sequence-level knowledge distillation on enfr: a teacher
#                   (TEACHER=M, or trained here for hours, resumable), students on
#                   its translations and on the human targets (tests/bench/distill.sh)
#   make bench-shapes  shapes for CPUs (deep encoder, shallow decoder) against small,
#                   30 minutes each on enfr and enru, resumable: quality and decoding
#                   speed (tests/bench/shapes.sh)
#   make fuzz       libFuzzer targets for every parser, FUZZ_SECONDS each
#   make install    PREFIX=/usr/local DESTDIR=
#   V=1             show the commands

VERSION   := 0.1.0
PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD     ?= build/release
CC        ?= cc
OPT       ?= -O2 -march=x86-64-v2
SAN       ?=
# Line tables (-g1): file and line in the sanitizers' reports, in perf and
# in a debugger's backtrace, at three quarters of the build time of full
# debug information (make check's two builds: 59 s against 80); for
# variables in a debugger, make CFLAGS='-O0 -g'.
CFLAGS    ?= $(OPT) -g1
# A section per function and object, so that a program keeps only what it
# calls of libtfm.a (--gc-sections; see libtfm.a below).
TFM_CFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter \
             -pthread -Ilib -DTFM_VERSION='"$(VERSION)"' -ffunction-sections -fdata-sections $(SAN)
LDLIBS     = -lopenblas -lutf8proc -lcjson -lzip -lyaml -lz -lm -pthread
PROGRAM_LDFLAGS = -Wl,--gc-sections
# Open MPI, for training across processes: lib/train/dist.c alone includes
# mpi.h, and the programs that train (train, and the tests and tools that
# link the trainer) link libmpi.  (Evaluated where used, after make deps.)
MPI_CFLAGS = $(shell pkg-config --cflags ompi-c)
MPI_LIBS   = $(shell pkg-config --libs ompi-c)
FUZZ_SECONDS ?= 30

ifeq ($(V),1)
Q :=
else
Q := @
endif

# The Debian packages the build and the demo need; make check needs a few
# more for its guards (PyTorch for the training-parity harness, xz for the
# real corpora; ip, sshd, GNU parallel and rsync for the runs across
# network namespaces of tests/cli/test_netns.sh), and the benchmarks and
# the fuzzers theirs.
DEB_PACKAGES   = gcc make libopenblas-dev libopenblas-pthread-dev libutf8proc-dev libcjson-dev \
                 pkg-config libopenmpi-dev openmpi-bin python3-numpy libxml2-utils time \
                 libzip-dev libyaml-dev
CHECK_PACKAGES = python3-torch xz-utils sentencepiece gettext iproute2 openssh-server \
                 parallel rsync
BENCH_PACKAGES = sentencepiece python3-torch time xz-utils gettext
FUZZ_PACKAGES  = clang libclang-rt-14-dev

LIB_SRC   := $(sort $(wildcard lib/*/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB_HDR   := lib/tfm.h $(wildcard lib/tfm/*.h) $(wildcard lib/*/*.h)
# cmd/NAME.c is the program NAME; cmd/common/ holds the command-line layer
# they share (messages, exit codes, option parsing, model loading).
PROGRAMS  := $(basename $(notdir $(wildcard cmd/*.c)))
CLI_SRC   := $(sort $(wildcard cmd/common/*.c))
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
CLI_HDR   := $(wildcard cmd/common/*.h)
BINS      := $(PROGRAMS:%=$(BUILD)/bin/%)
UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(sort $(wildcard tests/bench/*.c))
BENCH_BINS:= $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)
TOOL_SRC  := $(sort $(wildcard tests/tools/*.c))
TOOL_BINS := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
# Each fuzz target also built with tests/fuzz/replay.c instead of libFuzzer:
# make check replays the corpora and crash reproducers with them.
REPLAY_BINS := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz-replay/%)

.PHONY: all deps deps-check deps-bench deps-fuzz check check-release check-asan demo bench bench-quality bench-placeholders bench-quant bench-curves bench-window bench-import bench-import-quality bench-catalog bench-finetune bench-distill bench-shapes fuzz install uninstall clean

# Objects are kept once made (the command-line layer's, cmd/common, are
# intermediate to make, which would delete them and relink every program
# at the next make).
.SECONDARY:

all: $(BINS) $(BUILD)/libtfm.a $(BUILD)/libtfm-internal.a

# The library and the tests see lib/ only; the programs also see their
# command-line layer, cmd/common.
$(BUILD)/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(TFM_CFLAGS) -c $< -o $@

# the test tools', the unit tests' and the benchmarks' shared helpers
$(TOOL_SRC:%.c=$(BUILD)/%.o): tests/tools/tool.h
$(UNIT_SRC:%.c=$(BUILD)/%.o): $(wildcard tests/unit/*.h)
$(BENCH_SRC:%.c=$(BUILD)/%.o): $(wildcard tests/bench/*.h)
# The tests' own code (unit tests, tools, fuzz harnesses) is built with
# TEST_OPT: make check's sanitizer build makes it at -O0, where -O1 doubled
# its compile time (33 CPU-s against 17) for no gain in the tests' run.
# (OPT itself, so that CFLAGS given by the user apply to all code alike;
# TEST_OPT is expanded once, here: left as "$(OPT)", the test objects' OPT
# would be made of itself.)
TEST_OPT  ?= $(OPT)
TEST_OPT  := $(TEST_OPT)
TEST_OBJ  := $(UNIT_SRC:%.c=$(BUILD)/%.o) $(TOOL_SRC:%.c=$(BUILD)/%.o) \
             $(FUZZ_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/fuzz/replay.o
$(TEST_OBJ): override OPT = $(TEST_OPT)

$(BUILD)/cmd/%.o: cmd/%.c $(LIB_HDR) $(CLI_HDR)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(TFM_CFLAGS) -Icmd/common -c $< -o $@

$(BUILD)/lib/train/dist.o: lib/train/dist.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	@pkg-config --exists ompi-c || { echo "Open MPI (libopenmpi-dev) is missing: make deps installs it"; exit 1; }
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(TFM_CFLAGS) $(MPI_CFLAGS) -c $< -o $@

# libtfm.a, the library the programs link and make install installs, shows
# the public API alone: the library's objects are linked into one (ld -r)
# whose symbols other than tfm_* are then made local (objcopy), so a
# program that links libtfm.a beside another library cannot collide with an
# internal name (tests/cli/test_symbols.sh).  lib/train/dist.o, the one
# object that calls Open MPI, stays a member of its own; a program that does
# not train drops it with the trainer (--gc-sections) and does not link MPI.
# libtfm-internal.a holds the same objects as they are, for the tests, tools
# and benchmarks, which also call the internals they test.
DIST_OBJ := $(BUILD)/lib/train/dist.o
$(BUILD)/libtfm-public.o: $(filter-out $(DIST_OBJ),$(LIB_OBJ))
	$(if $(Q),@echo "  LD -r   $@")
	$(Q)ld -r -o $@.all $^ && objcopy -w --keep-global-symbol='tfm_*' $@.all $@ && rm -f $@.all

$(BUILD)/libtfm.a: $(BUILD)/libtfm-public.o $(DIST_OBJ)
	$(if $(Q),@echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libtfm-internal.a: $(LIB_OBJ)
	$(if $(Q),@echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# A sanitizer build links its programs with the library's objects, and
# every program and test with only the shared libraries it calls: the
# sanitizers' metadata keeps all of libtfm.a's functions (one object) and
# their references alive, so each program loaded OpenBLAS, libzip with
# libcrypto and libyaml (each test binary Open MPI's libraries too), and
# each of the test suite's thousands of starts paid for them.  (The
# optimised build keeps libtfm.a: there it proves that the programs call
# the public API alone.)  And it links them at a fixed address (-no-pie):
# position-independent, a sanitizer program held some 60,000 relative
# relocations (the sanitizers' records of every global), which the dynamic
# loader wrote at each start, touching some 420 pages: a quarter of a start
# without leak checking, and this machine pays 11 us a page.
ifeq ($(SAN),)
PROGRAM_LIB = $(BUILD)/libtfm.a
else
PROGRAM_LIB = $(BUILD)/libtfm-internal.a
LINK_NEEDED = -Wl,--as-needed -no-pie
endif

$(BUILD)/bin/%: $(BUILD)/cmd/%.o $(CLI_OBJ) $(PROGRAM_LIB)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(TFM_CFLAGS) $(PROGRAM_LDFLAGS) $(LINK_NEEDED) $^ $(LDLIBS) -o $@

# Each filter links only the libraries it calls: a library loaded is start
# time (OpenBLAS's with its threads and libgfortran, libzip's with
# libcrypto), and a pipeline starts four programs per file.  tokenize
# calls no BLAS; only train reads zip and YAML files (train import).  (A
# sanitizer build links the others by need instead: PROGRAM_LIB above.
# By need, its tokenize still loaded OpenBLAS, whose references the linker
# dropped only afterwards, and started OpenBLAS's thread at every start.)
# encode, decode and inspect-attn link OpenBLAS statically (Debian's
# libopenblas-pthread-dev ships the archive; the usual shared library when
# it is missing): the dynamic loader's 12,000 symbol lookups for it and
# libgfortran were half of their start, paid twice (cmd/common/cli.c
# starts a program again to make OpenBLAS's threads block).  decode --help:
# 6-8 ms of CPU with the shared library, 3-4 ms static; each program grows
# by 25 MB of OpenBLAS's kernels for every CPU.  (Debian's serial OpenBLAS
# starts no threads at all, but it is not safe to call from two threads at
# once: encode's states then changed from run to run.)
STATIC_BLAS = $(firstword $(wildcard /usr/lib/*/openblas-pthread/libopenblas.a))
FILTER_LIBS = -lutf8proc -lcjson -lm -pthread
$(BUILD)/bin/tokenize: LDLIBS = $(FILTER_LIBS)
ifeq ($(SAN),)
$(BUILD)/bin/encode $(BUILD)/bin/decode $(BUILD)/bin/inspect-attn: LDLIBS = $(or $(STATIC_BLAS),-lopenblas) $(FILTER_LIBS)
$(BUILD)/bin/score: LDLIBS = -lopenblas $(FILTER_LIBS)
endif

# The programs that link the trainer link Open MPI; the filters do not.
$(BUILD)/tests/bench/allreduce.o: TFM_CFLAGS += $(MPI_CFLAGS)
$(BUILD)/bin/train $(UNIT_BINS) $(TOOL_BINS) $(REPLAY_BINS) $(BENCH_BINS): LDLIBS += $(MPI_LIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(BUILD)/libtfm-internal.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(TFM_CFLAGS) $(LINK_NEEDED) $^ $(LDLIBS) -o $@

$(BUILD)/tools/%: $(BUILD)/tests/tools/%.o $(BUILD)/libtfm-internal.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(TFM_CFLAGS) $(LINK_NEEDED) $^ $(LDLIBS) -o $@

$(BUILD)/fuzz-replay/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/replay.o $(BUILD)/libtfm-internal.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(TFM_CFLAGS) $(LINK_NEEDED) $^ $(LDLIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(BUILD)/libtfm-internal.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(TFM_CFLAGS) $(LINK_NEEDED) $^ $(LDLIBS) -o $@

# ---- set-up ----------------------------------------------------------------

# Installs only what is missing; runs apt-get update first only when needed.
deps: ; @$(call install_missing,$(DEB_PACKAGES))
deps-check: deps ; @$(call install_missing,$(CHECK_PACKAGES))
deps-bench: deps ; @$(call install_missing,$(BENCH_PACKAGES))
deps-fuzz: deps ; @$(call install_missing,$(FUZZ_PACKAGES))

define install_missing
	missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y -q $$missing || \
	    { $$SUDO apt-get update -q && $$SUDO apt-get install -y -q $$missing; }; \
	fi
endef

# ---- tests -----------------------------------------------------------------

# make check: both builds (each with -j, one after the other), then every
# test of both side by side (tests/run.sh, JOBS at a time: the CPU count);
# its last line is the total.  One test alone: tests/run.sh build/release
# test_quant (after make check, or make BUILD=... all tests).
NPROC := $(shell nproc 2>/dev/null || echo 2)
SAN_FLAGS = -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=undefined -DNN_NO_MULTIVERSION -static-libubsan
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1

check: deps-check
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) BUILD=build/release all tests
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) BUILD=build/asan OPT=-O1 TEST_OPT=-O0 SAN="$(SAN_FLAGS)" all tests
	$(Q){ $(SAN_ENV) sh tests/run.sh build/release build/asan; echo $$? >build/check.rc; } | \
	  tee build/check.log; exit "$$(cat build/check.rc)"

check-release:
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) BUILD=build/release all tests
	$(Q)sh tests/run.sh build/release

check-asan:
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) BUILD=build/asan OPT=-O1 TEST_OPT=-O0 SAN="$(SAN_FLAGS)" all tests
	$(Q)$(SAN_ENV) sh tests/run.sh build/asan

.PHONY: tests
tests: $(UNIT_BINS) $(BINS) $(TOOL_BINS) $(REPLAY_BINS)

# ---- demo ------------------------------------------------------------------

demo: deps all
	$(Q)sh tests/demo.sh $(BUILD)

# ---- benchmarks --------------------------------------------------------------

bench: deps-bench all $(BENCH_BINS) $(TOOL_BINS)
	$(Q)sh tests/bench/run.sh $(BUILD)

# tfm against the PyTorch reference on ../shared/data/enfr: 30 minutes of
# training each, then test BLEU and chrF (about 70 minutes; QUALITY_MINUTES).
bench-quality: deps-bench all
	$(Q)sh tests/bench/quality.sh $(BUILD)

# A float32 model trained on ../shared/data/enfr (bench-quality's
# build/bench/quality/tfm-run.st, say) quantized to int8 and bf16: test BLEU
# and chrF with beam 4, and the sentences identical to float32's.
bench-quant: all
	$(Q)test -n "$(MODEL)" || { echo "make bench-quant MODEL=FILE: a float32 model trained on enfr"; exit 2; }
	$(Q)sh tests/bench/quant_quality.sh $(BUILD) "$(MODEL)"

# Placeholders, constraints and glossaries on the enfr test set
# (tests/bench/placeholders.sh): placeholders kept, msgfmt --check-format,
# term use, BLEU/chrF and the speed of constrained beam search.  Trains two
# models of BENCH_MINUTES (30) unless PLAIN_MODEL and PH_MODEL are given.
bench-placeholders: deps-bench all
	$(Q)sh tests/bench/placeholders.sh $(BUILD)

# Fine-tuning on one domain of ../shared/data/enfr (the compiler and binutils
# diagnostics): a general model (30 minutes), fine-tuned for 5 (on the domain,
# and mixed with general data), and a model of the domain alone (35); BLEU and
# chrF on the domain's test and the general test (tests/bench/finetune.sh;
# about 85 minutes).
bench-finetune: all
	$(Q)sh tests/bench/finetune.sh $(BUILD)

# Sequence-level knowledge distillation on ../shared/data/enfr
# (tests/bench/distill.sh): the teacher, given (TEACHER=M, an imported
# OPUS-MT model say) or trained for TEACHER_TIME (4h; run again, it goes on
# from its checkpoints), translates the training sources; students of each
# shape of STUDENTS (small-cpu and small) learn STUDENT_TIME (30m) from
# its translations and from the human targets (MIX=1: both; INTER=1: the
# teacher's 4-best closest to the human target; SECOND_CYCLE=T: then a
# second cycle of T from their own weights), two at a time side by side;
# test BLEU, chrF and decoding speed of all.
bench-distill: all
	$(Q)sh tests/bench/distill.sh $(BUILD)

bench-shapes: all
	$(Q)sh tests/bench/shapes.sh $(BUILD)

# Restricted self-attention against full (tests/bench/window.sh; also a
# section of make bench): time and memory against n, long decodes.
bench-window: deps all $(BENCH_BINS) $(TOOL_BINS)
	$(Q)sh tests/bench/window.sh $(BUILD)

# Learning curves against the PyTorch reference: valid perplexity per 100
# updates to 1,500, two seeds a side, dropout at every site (~2.5 hours).
bench-curves: deps-bench all
	$(Q)sh tests/bench/curves.sh $(BUILD)

# An OPUS-MT directory of base size (made by tests/import/make_fixtures.py
# --base) imported by train import: encode | decode against CTranslate2 on the
# enfr test set (tests/bench/import.sh); skipped when CTranslate2 is not built.
bench-import: all
	$(Q)sh tests/bench/import.sh $(BUILD)

# The same kind of directory, small-shaped, imported and fine-tuned on enfr
# (400 updates), as a user would: float32 against int8 (BLEU, chrF) and
# decode --placeholders in the model's own pieces (kept, msgfmt), beam 4
# and greedy (tests/bench/import_quality.sh; about 15 minutes).
bench-import-quality: deps-bench all
	$(Q)sh tests/bench/import_quality.sh $(BUILD)

# issue 45's catalog bar: a real Debian catalog (apt-get download) through
# examples/Makefile with a French model: make bench-catalog MODEL=en-fr.st
bench-catalog: deps-bench all
	$(Q)sh tests/bench/catalog.sh $(BUILD) $(MODEL)

# ---- fuzzing (clang's libFuzzer) -----------------------------------------------
# A crash found is kept as build/fuzz/NAME-crash-*; with its fix, it goes into
# tests/fuzz/crashes/NAME/, which make check replays with the corpus
# (tests/cli/test_fuzz_replay.sh).  Undefined behaviour stops a run as a
# crash does (clang's UBSan otherwise reports and goes on, and the input is
# lost; it also checks more than gcc's, NULL + 0 among them).

FUZZ_BUILD = build/fuzz
FUZZ_FLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -Ilib -pthread -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)

$(FUZZ_BUILD)/%: tests/fuzz/%.c $(LIB_SRC) $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(Q)clang $(FUZZ_FLAGS) $(MPI_CFLAGS) -DTFM_VERSION='"$(VERSION)"' $< $(LIB_SRC) $(LDLIBS) $(MPI_LIBS) -o $@

fuzz: deps-fuzz $(FUZZ_BINS)
	$(Q)for f in $(FUZZ_BINS); do \
	  name=$$(basename $$f); corpus=tests/fuzz/corpus/$$name; \
	  work=$(FUZZ_BUILD)/corpus/$$name; mkdir -p $$work; \
	  echo "fuzz: $$name for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=0 \
	    -artifact_prefix=$(FUZZ_BUILD)/$$name- $$work $$corpus >$(FUZZ_BUILD)/$$name.log 2>&1 \
	    || { tail -40 $(FUZZ_BUILD)/$$name.log; echo "fuzz: $$name FAILED"; exit 1; }; \
	  grep -E '^#[0-9]+.*DONE' $(FUZZ_BUILD)/$$name.log | tail -1; \
	done

# ---- install -----------------------------------------------------------------

# The programs, libtfm.a with its headers (tfm.h and tfm/*.h) and a
# pkg-config file, the man pages, and the README with examples/Makefile.
# libtfm is static only, so tfm.pc names the libraries it needs in Libs.
BINDIR     = $(DESTDIR)$(PREFIX)/bin
LIBDIR     = $(DESTDIR)$(PREFIX)/lib
INCLUDEDIR = $(DESTDIR)$(PREFIX)/include
MANDIR     = $(DESTDIR)$(PREFIX)/share/man
DOCDIR     = $(DESTDIR)$(PREFIX)/share/doc/tfm
MAN1       = $(wildcard man/*.1)
MAN5       = $(wildcard man/*.5)

install: all
	install -d $(BINDIR) $(LIBDIR)/pkgconfig $(INCLUDEDIR)/tfm $(MANDIR)/man1 $(MANDIR)/man5 \
	  $(DOCDIR)/examples
	install -m 755 $(BINS) $(BINDIR)
	install -m 644 $(BUILD)/libtfm.a $(LIBDIR)
	install -m 644 lib/tfm.h $(INCLUDEDIR)
	install -m 644 lib/tfm/*.h $(INCLUDEDIR)/tfm
	install -m 644 $(MAN1) $(MANDIR)/man1
	install -m 644 $(MAN5) $(MANDIR)/man5
	install -m 644 README.md $(DOCDIR)
	install -m 644 examples/Makefile $(DOCDIR)/examples
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS@|$(LDLIBS) $(MPI_LIBS)|' \
	  tfm.pc.in >$(LIBDIR)/pkgconfig/tfm.pc

uninstall:
	rm -f $(PROGRAMS:%=$(BINDIR)/%) $(LIBDIR)/libtfm.a $(LIBDIR)/pkgconfig/tfm.pc \
	  $(INCLUDEDIR)/tfm.h $(patsubst lib/%,$(INCLUDEDIR)/%,$(wildcard lib/tfm/*.h)) \
	  $(MAN1:man/%=$(MANDIR)/man1/%) $(MAN5:man/%=$(MANDIR)/man5/%) \
	  $(DOCDIR)/README.md $(DOCDIR)/examples/Makefile
	rmdir $(INCLUDEDIR)/tfm $(DOCDIR)/examples $(DOCDIR) 2>/dev/null || true

clean:
	rm -rf build
