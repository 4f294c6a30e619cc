/* tokenize - sub-word tokenization with byte-pair encoding.
 *
 *   tokenize learn --vocab-size N [FILE...] > VOCAB   learn a vocabulary
 *   tokenize -m VOCAB [FILE...]                       text lines -> id lines
 *   tokenize -d -m VOCAB [FILE...]                    id or piece lines -> text
 *   tokenize normalize [FILE...]                      text -> normalised text
 *   tokenize placeholders [FILE...]                   text -> its placeholders
 *   tokenize po-strings [--all] [FILE.po]             a catalog -> its strings
 *   tokenize po-merge [-o OUT] FILE.po TRANSLATIONS   the translations merged in
 *
 * With --placeholders, learning and encoding put the tokens <ph1> .. <ph32>
 * in place of each line's placeholders (%s, {0}, <b>, ...), and decoding
 * (--placeholders=SRC) puts back the placeholders of the source text's line.
 * With --glossary=FILE --constraints=OUT, encoding also writes to OUT, a
 * line per input line, the constraints (decode --constraints) that ask for
 * the target terms of the glossary's source terms found in the line.
 *
 * The program only parses options, reads lines and prints: the work is in
 * lib/text (tfm_text_filter for encoding, decoding and normalising, with
 * tfm_glossary for the constraints; tfm_bpe_learner_read and
 * tfm_bpe_learner_finish for learning; tfm_placeholders_scan), for a
 * SentencePiece model file, cmd/common/spm_filter.c over lib/text/spm_*.c
 * (tfm/spm.h), and, for PO catalogs, lib/io/po_read.c and lib/text/po_write.c
 * (tfm/po.h). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "filter.h"
#include "spm_filter.h"
#include "tfm/po.h"

/* The help; the %-conversions are the library's defaults (format_usage). */
static const char usage_format[] =
    "Usage: tokenize [OPTION]... -m VOCAB [FILE]...\n"
    "       tokenize -d [OPTION]... -m VOCAB [FILE]...\n"
    "       tokenize learn --vocab-size N [OPTION]... [FILE]...\n"
    "       tokenize normalize [OPTION]... [FILE]...\n"
    "       tokenize placeholders [--placeholder-classes=LIST] [FILE]...\n"
    "       tokenize po-strings [--all] [FILE.po]\n"
    "       tokenize po-merge [--all] [--no-fuzzy] [-o OUT.po] FILE.po TRANSLATIONS\n"
    "Sub-word tokenization with byte-pair encoding (BPE), as SentencePiece does it.\n"
    "Reads lines from the FILEs (or standard input; '-' is standard input) and\n"
    "writes one line for each line read, in order.\n"
    "\n"
    "Encoding and decoding:\n"
    "  -m, --model=VOCAB          a vocabulary file (from 'tokenize learn'), a model\n"
    "                             file, which carries its vocabulary, or a\n"
    "                             SentencePiece model (spm_train's .model): then\n"
    "                             ids, pieces and text are spm_encode's and\n"
    "                             spm_decode's, byte for byte\n"
    "  -d, --decode               decode id lines or piece lines back to text\n"
    "      --side=SIDE            of a model with a vocabulary per side: 'source' or\n"
    "                             'target' (default: source to encode, target with -d)\n"
    "      --output=FORMAT        encode to 'ids' or 'pieces' (default '%s')\n"
    "      --input=FORMAT         decode from 'auto', 'ids' or 'pieces' (default '%s')\n"
    "      --dropout=P            BPE-dropout: skip each merge with probability P\n"
    "      --seed=N               seed of the random choices (default %llu)\n"
    "      --threads=N            threads to use (default: the number of CPUs)\n"
    "      --strict               invalid UTF-8 is an error, not replaced by U+FFFD\n"
    "      --placeholders         encode each placeholder (%%s, {0}, <b>, &amp;, ...) as\n"
    "                             the token <phN>; needs a vocabulary learnt with\n"
    "                             'tokenize learn --placeholders'\n"
    "  -d --placeholders=SRC      decode each <phN> as the text of placeholder N of the\n"
    "                             same line of SRC, the source text; a <phN> that line\n"
    "                             lacks is dropped with a warning ('-d --placeholders\n"
    "                             SRC' also works)\n"
    "      --placeholder-classes=LIST  the placeholders to look for: 'all' (default),\n"
    "                             'none' or some of printf,python,qt,braces,dollar,\n"
    "                             tags,entities; the same when learning, encoding\n"
    "                             and decoding\n"
    "      --target-language=LANG put the token >>LANG<< first on every line, as a\n"
    "                             multilingual OPUS-MT model wants (>>fra<<: French)\n"
    "      --glossary=FILE        find the source terms of FILE (SOURCE<TAB>TARGET\n"
    "                             lines) in each line, as whole words, and write the\n"
    "                             constraints that ask 'decode --constraints' for\n"
    "                             their targets (man tokenize, GLOSSARIES)\n"
    "      --constraints=OUT      with --glossary: where the constraints go, a line per\n"
    "                             input line (empty when no term is found), written\n"
    "                             as it goes, so decode can read it in one pipeline\n"
    "\n"
    "Learning ('tokenize learn'):\n"
    "      --vocab-size=N         pieces in the vocabulary, specials and bytes included\n"
    "      --normalize=FORM       'nfkc', 'nfc' or 'none' (default '%s')\n"
    "      --case-fold            fold case (Unicode case folding) before anything else\n"
    "      --character-coverage=F share of character occurrences the alphabet covers;\n"
    "                             rarer characters are spelled with bytes (%g)\n"
    "      --max-piece-length=N   longest piece in characters (%d)\n"
    "      --input-sentence-size=N  learn from a random sample of N lines (0: all)\n"
    "      --user-symbols=A,B,... symbols always kept whole as one piece\n"
    "      --placeholders         reserve the pieces <ph1> .. <ph32> and learn from the\n"
    "                             lines with their placeholders replaced by them\n"
    "      --soft-vocab-limit     a corpus too small for N pieces gives fewer pieces\n"
    "                             instead of an error\n"
    "  -o, --output-file=FILE     write the vocabulary to FILE (atomically) instead\n"
    "                             of standard output\n"
    "      --seed, --threads, --strict as above\n"
    "\n"
    "Normalising ('tokenize normalize'):\n"
    "      --normalize, --case-fold, --strict as above, or -m VOCAB to normalise\n"
    "                             as that vocabulary does\n"
    "\n"
    "Listing placeholders ('tokenize placeholders'):\n"
    "      --placeholder-classes as above: print each line's placeholders, in order,\n"
    "                             separated by TABs (an empty line when it has none)\n"
    "\n"
    "Translation catalogs ('tokenize po-strings', 'tokenize po-merge'):\n"
    "  po-strings prints the text of the entries of a gettext catalog (.po or .pot)\n"
    "  that have no translation, a line per segment (the text between newlines of\n"
    "  a msgid, then of its msgid_plural; blank segments are left out); po-merge\n"
    "  reads the catalog again and TRANSLATIONS, a line per line po-strings printed,\n"
    "  and writes the catalog with each entry's msgstr (plural entries: as many as\n"
    "  the header's Plural-Forms says), every other line kept byte for byte\n"
    "      --all                  every entry but the header, translated or not\n"
    "      --no-fuzzy             do not mark the entries translated fuzzy\n"
    "  -o, --output-file=FILE     write the catalog to FILE (atomically) instead\n"
    "                             of standard output\n"
    "  An entry whose translation is missing, empty or loses a placeholder of a\n"
    "  format string stays untranslated and is named (FILE:LINE) on stderr.\n"
    "\n"
    "Common options:\n"
    CLI_COMMON_HELP
    "\n"
    "Invalid UTF-8 is replaced by U+FFFD with a warning naming the line. For every\n"
    "line X, 'tokenize -d' of 'tokenize' of X equals 'tokenize normalize' of X;\n"
    "with placeholders, the placeholders come back as they are in X (man tokenize,\n"
    "PLACEHOLDERS).\n"
    "Exit status: 0 on success, 1 on failure, 2 on a usage error; po-merge: 3 when\n"
    "the catalog is written but some entries stay untranslated.\n"
    "Example:\n"
    "  tokenize learn --vocab-size 8000 train.de train.en -o de-en.vocab\n"
    "  tokenize -m de-en.vocab < test.de | tokenize -d -m de-en.vocab\n"
    "  tokenize learn --placeholders --vocab-size 8000 po.src po.tgt -o po.vocab\n"
    "  tokenize --placeholders -m po.vocab < in.txt |\n"
    "    tokenize -d --placeholders=in.txt -m po.vocab\n"
    "  tokenize -m m.st --glossary terms.tsv --constraints c.txt < in.txt |\n"
    "    encode -m m.st | decode -m m.st --constraints c.txt | tokenize -d -m m.st\n"
    "  tokenize po-strings fr.pot > s.txt; tokenize -m m.st < s.txt | encode -m m.st |\n"
    "    decode -m m.st --placeholders=s.txt | tokenize -d -m m.st > fr.txt\n"
    "  tokenize po-merge -o fr.po fr.pot fr.txt\n";

enum {
    OPT_OUTPUT = 256,
    OPT_INPUT,
    OPT_DROPOUT,
    OPT_SEED,
    OPT_THREADS,
    OPT_STRICT,
    OPT_VOCAB_SIZE,
    OPT_NORMALIZE,
    OPT_CASE_FOLD,
    OPT_COVERAGE,
    OPT_MAX_PIECE,
    OPT_SENTENCE_SIZE,
    OPT_USER_SYMBOLS,
    OPT_SOFT_LIMIT,
    OPT_PLACEHOLDERS,
    OPT_PLACEHOLDER_CLASSES,
    OPT_GLOSSARY,
    OPT_CONSTRAINTS,
    OPT_SIDE,
    OPT_TARGET_LANGUAGE,
    OPT_ALL,
    OPT_NO_FUZZY,
};

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"decode", no_argument, NULL, 'd'},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"input", required_argument, NULL, OPT_INPUT},
    {"dropout", required_argument, NULL, OPT_DROPOUT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"vocab-size", required_argument, NULL, OPT_VOCAB_SIZE},
    {"normalize", required_argument, NULL, OPT_NORMALIZE},
    {"case-fold", no_argument, NULL, OPT_CASE_FOLD},
    {"character-coverage", required_argument, NULL, OPT_COVERAGE},
    {"max-piece-length", required_argument, NULL, OPT_MAX_PIECE},
    {"input-sentence-size", required_argument, NULL, OPT_SENTENCE_SIZE},
    {"user-symbols", required_argument, NULL, OPT_USER_SYMBOLS},
    {"soft-vocab-limit", no_argument, NULL, OPT_SOFT_LIMIT},
    {"placeholders", optional_argument, NULL, OPT_PLACEHOLDERS},
    {"placeholder-classes", required_argument, NULL, OPT_PLACEHOLDER_CLASSES},
    {"glossary", required_argument, NULL, OPT_GLOSSARY},
    {"constraints", required_argument, NULL, OPT_CONSTRAINTS},
    {"side", required_argument, NULL, OPT_SIDE},
    {"target-language", required_argument, NULL, OPT_TARGET_LANGUAGE},
    {"output-file", required_argument, NULL, 'o'},
    {"all", no_argument, NULL, OPT_ALL},
    {"no-fuzzy", no_argument, NULL, OPT_NO_FUZZY},
    CLI_COMMON_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

typedef enum {
    MODE_ENCODE, MODE_DECODE, MODE_LEARN, MODE_NORMALIZE, MODE_PLACEHOLDERS, MODE_PO_STRINGS,
    MODE_PO_MERGE
} tokenize_mode;

typedef struct options {
    tokenize_mode mode;
    const char *model;
    const char *output_file;
    tfm_filter_params filter; /* encode, decode, normalize */
    tfm_bpe_learn_params learn;
    char **user_symbols;
    const char *learn_only_option; /* the first option only 'learn' takes, as given */
    bool normalize_option_used;    /* --normalize or --case-fold */
    bool vocab_size_given;
    bool placeholders;             /* --placeholders */
    const char *placeholder_source; /* --placeholders=SRC */
    const char *after_placeholders; /* the argument after a bare --placeholders: SRC
                                       when decoding, an input otherwise */
    bool placeholder_classes_given;
    unsigned placeholder_classes;
    const char *glossary;          /* --glossary=FILE */
    const char *constraints;       /* --constraints=OUT */
    int side;                      /* --side: a tfm_side, or -1 (by the mode) */
    char target_token[80];         /* --target-language: ">>LANG<<", or "" */
    bool not_for_listing;          /* an option 'tokenize placeholders' does not take */
    bool po_all, no_fuzzy;         /* --all, --no-fuzzy */
    const char *po_only_option;    /* the first of them, as given */
    bool not_for_po;               /* an option 'tokenize po-*' does not take */
} options;

/* Prints the library's error for a line of an input, or for a file whose
 * message begins "line N: " (the vocabulary parser's form) as FILE:N. */
static _Noreturn void fail_with(const char *file, size_t line, const tfm_error *err)
{
    unsigned long n;
    int used = 0;
    if (line == 0 && sscanf(err->msg, "line %lu: %n", &n, &used) == 1 && used > 0)
        cli_fail(file, n, "%s", err->msg + used);
    cli_fail(file, line, "%s", err->msg);
}

/* Where a batch loop over a file stopped: a line (read or worked on), or
 * the file as a whole. */
static _Noreturn void fail_in(const char *file, const tfm_batch_failure *f)
{
    cli_flush();
    cli_fail(file, f->stage == TFM_BATCH_WORK ? 0 : f->item + 1, "%s", f->err.msg);
}

static tfm_vocab *load_vocab(const char *path, tfm_side side)
{
    tfm_vocab *vocab;
    tfm_error err;
    if (tfm_model_load_vocab(path, side, &vocab, &err) != TFM_OK) fail_with(path, 0, &err);
    return vocab;
}

/* ---- encoding, decoding, normalising ------------------------------------------------- */

/* Where a glossary's constraints go: a file written as it goes, each line
 * flushed before its ids line is written, so that 'decode --constraints'
 * reading OUT in step with the records (in the same pipeline) always finds
 * the line of the record it has.  Not atomic, as standard output is not: a
 * failed run leaves the lines written so far.  A FIFO (or anything but a
 * regular file) also gets the ids lines before it flushed, so that a reader
 * of both through pipes that fill never waits for a line held here. */
typedef struct constraints_out {
    const char *path;
    bool regular;       /* a regular file (or a new one) */
    FILE *fp;
} constraints_out;

static void constraints_open(constraints_out *o, const char *path)
{
    struct stat st;
    o->path = path;
    o->regular = stat(path, &st) != 0 || S_ISREG(st.st_mode);
    o->fp = fopen(path, "w"); /* a FIFO waits here for its reader */
    if (!o->fp) cli_fail(path, 0, "%s", strerror(errno));
}

static void constraints_close(constraints_out *o)
{
    if (fclose(o->fp) != 0) cli_fail(o->path, 0, "write error: %s", strerror(errno));
}

/* What a run's callbacks need. */
typedef struct run_ctx {
    const char *name;             /* the input, for warnings */
    constraints_out *constraints; /* or NULL */
} run_ctx;

/* Writes a line's result. */
static tfm_status write_line(void *ctx, size_t line, const char *text, size_t len,
                             size_t repaired, tfm_error *err)
{
    run_ctx *rc = ctx;
    if (repaired)
        cli_warn(rc->name, line, "invalid UTF-8 replaced by U+FFFD (%zu sequence%s)", repaired,
                 repaired == 1 ? "" : "s");
    cli_write_line(text, len);
    return TFM_OK;
}

/* Writes a line's constraints, just before the line itself. */
static tfm_status write_constraints(void *ctx, size_t line, const char *text, size_t len,
                                    size_t n_dropped, tfm_error *err)
{
    run_ctx *rc = ctx;
    constraints_out *o = rc->constraints;
    if (n_dropped)
        cli_warn(rc->name, line, "%zu more glossary term%s found than the %d constraints a line "
                 "may hold: the shortest left out", n_dropped, n_dropped == 1 ? "" : "s",
                 TFM_GLOSSARY_MAX_CONSTRAINTS);
    if (!o->regular) cli_flush();
    if (fwrite(text, 1, len, o->fp) != len || fputc('\n', o->fp) == EOF || fflush(o->fp) != 0)
        cli_fail(o->path, 0, "write error: %s", strerror(errno));
    return TFM_OK;
}

static void flush_output(void *ctx)
{
    cli_flush();
}

/* Placeholder tokens dropped from a decoded line. */
static void placeholders_dropped(void *ctx, size_t line, size_t n)
{
    run_ctx *rc = ctx;
    cli_warn(rc->name, line, "%zu placeholder token%s that the source line does not have dropped",
             n, n == 1 ? "" : "s");
}

typedef struct filter_job {
    tfm_text_filter *filter;
    const char *source;     /* --placeholders=SRC, or NULL */
    constraints_out *constraints; /* --constraints=OUT, or NULL */
} filter_job;

/* Runs one input through the filter. */
static void filter_file(void *ctx, const char *name)
{
    filter_job *job = ctx;
    cli_input in;
    cli_input_open(&in, name);
    tfm_batch_failure f;
    run_ctx rc = {.name = name, .constraints = job->constraints};
    if (tfm_text_filter_run(job->filter, in.lines, write_line, flush_output, &rc, &f) != TFM_OK) {
        if (job->source && tfm_text_filter_source_ended(job->filter)) {
            cli_flush();
            cli_fail(job->source, 0, "has fewer lines than the input: %s goes on at line %zu",
                     name, f.item + 1);
        }
        fail_in(name, &f);
    }
    cli_input_close(&in);
}

/* The glossary of --glossary: its source terms encoded with vocab, its
 * target terms with tgt_vocab (the model's target side). */
static tfm_glossary *load_glossary(const char *path, const tfm_vocab *vocab,
                                   const tfm_vocab *tgt_vocab)
{
    int fd = cli_open_input(path);
    tfm_glossary *g;
    tfm_error err;
    if (tfm_glossary_read_fd(fd, vocab, tgt_vocab, &g, &err) != TFM_OK) fail_with(path, 0, &err);
    cli_close_input(fd);
    cli_info("glossary %s: %d source terms", path, tfm_glossary_size(g));
    return g;
}

static int run_filter(const options *opt, int argc, char **argv)
{
    tfm_vocab *vocab = opt->model ? load_vocab(opt->model, (tfm_side)opt->side) : NULL;
    tfm_filter_params p = opt->filter;
    cli_input source = {0};
    if (opt->placeholder_source) {
        cli_input_open(&source, opt->placeholder_source);
        p.placeholder_source = source.lines;
        p.placeholders_dropped = placeholders_dropped;
    }
    /* (a glossary's target terms are the target side's, whichever side -m gives) */
    tfm_vocab *tgt_vocab = opt->glossary ? load_vocab(opt->model, TFM_TARGET) : NULL;
    tfm_glossary *glossary = opt->glossary ? load_glossary(opt->glossary, vocab, tgt_vocab) : NULL;
    constraints_out constraints = {0};
    filter_job job = {.source = opt->placeholder_source};
    if (glossary) {
        p.glossary = glossary;
        p.constraints = write_constraints;
        job.constraints = &constraints;
    }
    tfm_error err;
    if (tfm_text_filter_create(vocab, &p, &job.filter, &err) != TFM_OK)
        fail_with(opt->model, 0, &err);
    if (glossary) constraints_open(&constraints, opt->constraints);
    cli_each_input(argc, argv, filter_file, &job);
    cli_flush();
    if (tfm_text_filter_finish(job.filter, &err) != TFM_OK)
        fail_with(opt->placeholder_source, 0, &err);
    if (glossary) constraints_close(&constraints);
    if (opt->placeholder_source) cli_input_close(&source);
    tfm_text_filter_free(job.filter);
    tfm_glossary_free(glossary);
    tfm_vocab_free(tgt_vocab);
    tfm_vocab_free(vocab);
    return CLI_EXIT_OK;
}

/* ---- SentencePiece models ----------------------------------------------------------- */

/* A model file that spm_train wrote runs through cmd/common/spm_filter.c,
 * which encodes and decodes byte for byte as spm_encode and spm_decode do;
 * the options that only a vocabulary or a model file takes are refused. */
static int run_spm(const options *opt, int argc, char **argv)
{
    static const char *const why = "is not available with a SentencePiece model";
    if (opt->filter.dropout > 0) cli_usage_error("--dropout %s (%s)", why, opt->model);
    if (opt->placeholders) cli_usage_error("--placeholders %s (%s)", why, opt->model);
    if (opt->glossary) cli_usage_error("--glossary %s (%s)", why, opt->model);
    if (opt->target_token[0])
        cli_usage_error("--target-language %s (%s): a multilingual model's >>LANG<< tokens are "
                        "in the model's vocabulary: give the model imported by 'train import'",
                        why, opt->model);
    cli_spm_filter_params p = {.op = opt->filter.op, .output = opt->filter.output,
                               .input = opt->filter.input, .strict = opt->filter.strict,
                               .threads = opt->filter.threads};
    cli_spm_filter_run(opt->model, &p, argc, argv);
    return CLI_EXIT_OK;
}

/* ---- listing placeholders ------------------------------------------------------------ */

typedef struct list_job {
    unsigned classes;
    tfm_placeholders ph;
    tfm_buf out;
} list_job;

/* Prints the placeholders of each line of one input, TAB-separated. */
static void list_file(void *ctx, const char *name)
{
    list_job *job = ctx;
    cli_input in;
    cli_input_open(&in, name);
    const char *line;
    size_t len;
    tfm_error err;
    tfm_status s;
    while ((s = tfm_lines_next(in.lines, &line, &len, &err)) == TFM_OK) {
        if (tfm_placeholders_scan(line, len, job->classes, &job->ph, &err) != TFM_OK) {
            cli_flush();
            cli_fail(name, tfm_lines_number(in.lines), "%s", err.msg);
        }
        tfm_buf_clear(&job->out);
        tfm_status w = tfm_buf_append(&job->out, "", 0);
        for (size_t k = 0; k < job->ph.n && w == TFM_OK; k++) {
            if (k > 0) w = tfm_buf_putc(&job->out, '\t');
            if (w == TFM_OK)
                w = tfm_buf_append(&job->out, line + job->ph.items[k].start, job->ph.items[k].len);
        }
        if (w != TFM_OK) cli_fail(NULL, 0, "out of memory");
        cli_write_line(job->out.data, job->out.len);
        if (!tfm_lines_ready(in.lines)) cli_flush(); /* answer an interactive pipe at once */
    }
    if (s != TFM_EOF) {
        cli_flush();
        cli_fail(name, tfm_lines_number(in.lines) + 1, "%s", err.msg);
    }
    cli_input_close(&in);
}

static int run_list(const options *opt, int argc, char **argv)
{
    list_job job = {.classes = opt->placeholder_classes_given ? opt->placeholder_classes
                                                              : TFM_PH_ALL};
    tfm_placeholders_init(&job.ph);
    tfm_buf_init(&job.out);
    cli_each_input(argc, argv, list_file, &job);
    cli_flush();
    tfm_placeholders_free(&job.ph);
    tfm_buf_free(&job.out);
    return CLI_EXIT_OK;
}

/* ---- translation catalogs ---------------------------------------------------------- */

enum { EXIT_SOME_UNTRANSLATED = 3 }; /* po-merge: the catalog written, entries left out */

/* The whole of an input ('-': standard input), into b. */
static void read_whole(const char *name, tfm_buf *b)
{
    int fd = cli_open_input(name);
    tfm_error err;
    tfm_buf_init(b);
    if (tfm_read_upto(fd, b, UINT64_MAX, &err) != TFM_OK) cli_fail(name, 0, "%s", err.msg);
    if (tfm_buf_reserve(b, 0) != TFM_OK) cli_fail(NULL, 0, "out of memory");
    cli_close_input(fd);
}

/* An entry left untranslated: FILE:LINE of its msgid, and why. */
static void po_failed(void *ctx, size_t line, const char *why)
{
    cli_error(ctx, line, "%s", why);
}

static int run_po(const options *opt, int argc, char **argv)
{
    bool merge = opt->mode == MODE_PO_MERGE;
    const char *cmd = merge ? "po-merge" : "po-strings";
    if (opt->not_for_po || (!merge && (opt->output_file || opt->no_fuzzy)))
        cli_usage_error("'tokenize %s' takes only --all%s (and -q, -v)", cmd,
                        merge ? ", --no-fuzzy, -o" : "");
    if (argc - optind > 1 + merge || (merge && argc - optind < 2))
        cli_usage_error(merge ? "po-merge takes two files: the catalog and its translations"
                              : "po-strings takes one catalog");
    const char *name = optind < argc ? argv[optind] : "-";
    const char *tr_name = merge ? argv[optind + 1] : NULL;
    if (merge && strcmp(name, "-") == 0 && strcmp(tr_name, "-") == 0)
        cli_usage_error("po-merge: standard input cannot be both the catalog and the translations");
    tfm_buf in, tr = {0}, out;
    tfm_po *po;
    tfm_error err;
    read_whole(name, &in);
    if (tfm_po_parse(in.data, in.len, &po, &err) != TFM_OK) fail_with(name, 0, &err);
    tfm_buf_init(&out);
    size_t failed = 0;
    if (!merge) {
        if (tfm_po_strings(po, opt->po_all, &out, NULL, &err) != TFM_OK) cli_fail(name, 0, "%s", err.msg);
        if (out.len) cli_write(out.data, out.len);
        cli_flush();
    } else {
        if (po->charset_template)
            cli_warn(name, 0, "the header's charset is a template's CHARSET: the translations "
                     "written are UTF-8 (set charset=UTF-8)");
        read_whole(tr_name, &tr);
        tfm_po_merge_params p = tfm_po_merge_default_params();
        p.all = opt->po_all;
        p.fuzzy = !opt->no_fuzzy;
        p.failed = po_failed;
        p.ctx = (void *)name;
        tfm_status s = tfm_po_merge(po, &p, tr.data, tr.len, &out, &failed, &err);
        if (s == TFM_ERR_RANGE) cli_fail(tr_name, 0, "%s", err.msg);
        if (s != TFM_OK) fail_with(name, 0, &err);
        cli_output o;
        cli_output_open(&o, opt->output_file);
        cli_output_write(&o, out.data, out.len);
        cli_output_close(&o);
        if (failed) cli_error(name, 0, "%zu entr%s left untranslated", failed, failed == 1 ? "y" : "ies");
    }
    tfm_po_free(po);
    tfm_buf_free(&in);
    tfm_buf_free(&tr);
    tfm_buf_free(&out);
    return failed ? EXIT_SOME_UNTRANSLATED : CLI_EXIT_OK;
}

/* ---- learning ---------------------------------------------------------------------- */

typedef struct learn_job {
    tfm_bpe_learner *learner;
    const char *name;       /* the file being read */
    int64_t lines_read;
    double bytes_read;
    double start;           /* tfm_clock_seconds */
    double last_report;
    bool tty;
} learn_job;

/* Progress on stderr: one updating line on a terminal, a plain line every
 * ten seconds otherwise. */
static void learn_progress(void *ctx, const char *stage, int64_t done, int64_t total)
{
    learn_job *job = ctx;
    if (cli_verbosity < 1) return;
    double t = tfm_clock_seconds() - job->start;
    bool last = total > 0 && done >= total;
    if (!last && t - job->last_report < (job->tty ? 0.2 : 10.0)) return;
    job->last_report = t;
    char where[64];
    if (total > 0) snprintf(where, sizeof where, "%lld/%lld", (long long)done, (long long)total);
    else snprintf(where, sizeof where, "%lld", (long long)done);
    fprintf(stderr, "%stokenize: learn: %s %s (%.0f s)%s", job->tty ? "\r" : "", stage, where, t,
            job->tty ? "\033[K" : "\n");
    if (job->tty && last) fputc('\n', stderr);
}

/* After each batch of lines the learner took: warnings and progress. */
static void learn_added(void *ctx, const tfm_learn_batch *b)
{
    learn_job *job = ctx;
    if (b->repaired)
        cli_warn(job->name, 0, "lines %zu-%zu: %zu invalid UTF-8 sequence%s replaced by U+FFFD",
                 b->first_line, b->last_line, b->repaired, b->repaired == 1 ? "" : "s");
    job->lines_read += (int64_t)(b->last_line - b->first_line + 1);
    job->bytes_read += (double)b->bytes;
    learn_progress(job, "reading lines", job->lines_read, 0);
}

/* Adds the lines of one input to the learner. */
static void learn_file(void *ctx, const char *name)
{
    learn_job *job = ctx;
    cli_input in;
    cli_input_open(&in, name);
    job->name = name;
    tfm_batch_failure f;
    if (tfm_bpe_learner_read(job->learner, in.lines, learn_added, job, &f) != TFM_OK)
        fail_in(name, &f);
    cli_input_close(&in);
}

static int run_learn(options *opt, int argc, char **argv)
{
    learn_job job = {.tty = isatty(STDERR_FILENO), .start = tfm_clock_seconds(), .last_report = -1e9};
    opt->learn.n_threads = opt->filter.threads;
    opt->learn.seed = opt->filter.seed;
    opt->learn.norm.strict = opt->filter.strict;
    opt->learn.progress = learn_progress;
    opt->learn.progress_ctx = &job;
    tfm_error err;
    if (tfm_bpe_learner_create(&opt->learn, &job.learner, &err) != TFM_OK)
        cli_fail(NULL, 0, "%s", err.msg);
    cli_each_input(argc, argv, learn_file, &job);
    cli_info("read %lld lines (%.1f MB) in %.1f s", (long long)job.lines_read, job.bytes_read / 1e6,
             tfm_clock_seconds() - job.start);
    tfm_vocab *vocab;
    if (tfm_bpe_learner_finish(job.learner, &vocab, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    if (tfm_vocab_size(vocab) < opt->learn.vocab_size)
        cli_warn(NULL, 0, "the corpus supports only %d pieces; the vocabulary has %d, not %d",
                 tfm_vocab_size(vocab), tfm_vocab_size(vocab), opt->learn.vocab_size);
    if (tfm_vocab_merges(vocab) == 0)
        cli_warn(NULL, 0, "the alphabet fills the whole vocabulary, so no merges were learnt; use "
                          "a larger --vocab-size or a lower --character-coverage");
    tfm_status s = opt->output_file ? tfm_vocab_save(vocab, opt->output_file, &err)
                                    : tfm_vocab_write(vocab, stdout, &err);
    if (s != TFM_OK) cli_fail(opt->output_file ? opt->output_file : "standard output", 0, "%s", err.msg);
    cli_info("learnt %d pieces in %.1f s", tfm_vocab_size(vocab), tfm_clock_seconds() - job.start);
    tfm_vocab_free(vocab);
    tfm_bpe_learner_free(job.learner);
    return CLI_EXIT_OK;
}

/* ---- options ------------------------------------------------------------------------- */

/* Splits "a,b,c" into a NULL-terminated array of copies. */
static char **split_commas(const char *list, int *count)
{
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    char **out = calloc((size_t)n + 1, sizeof *out);
    if (!out) cli_fail(NULL, 0, "out of memory");
    int k = 0;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) cli_usage_error("--user-symbols: empty symbol in '%s'", list);
        out[k] = strndup(p, len);
        if (!out[k++]) cli_fail(NULL, 0, "out of memory");
        if (!end) break;
        p = end + 1;
    }
    *count = k;
    return out;
}

/* In the order of tfm_line_format. */
static const char *const output_formats[] = {"ids", "pieces", NULL}; /* from TFM_LINE_IDS */
static const char *const input_formats[] = {"auto", "ids", "pieces", NULL};

/* The help text with the library's defaults in it, so the two cannot differ. */
static void format_usage(char *out, size_t size)
{
    const tfm_filter_params f = tfm_filter_default_params();
    const tfm_bpe_learn_params l = tfm_bpe_learn_default_params();
    snprintf(out, size, usage_format, output_formats[f.output - TFM_LINE_IDS],
             input_formats[f.input], (unsigned long long)f.seed, tfm_norm_form_name(l.norm.form),
             l.character_coverage, l.max_piece_length);
}

static void parse_options(int argc, char **argv, options *opt)
{
    static char usage[sizeof usage_format + 64];
    format_usage(usage, sizeof usage);
    static const char *const forms[] = {"none", "nfc", "nfkc", NULL};
    static const char *const sides[] = {"source", "target", NULL}; /* tfm_side's order */
    int c;
    while ((c = getopt_long(argc, argv, "m:do:qvhV", long_options, NULL)) != -1) {
        bool learn_only = false;
        switch (c) {
        case 'm': opt->model = optarg; break;
        case 'd': opt->mode = opt->mode == MODE_ENCODE ? MODE_DECODE : opt->mode; break;
        case 'o': opt->output_file = optarg; learn_only = true; break;
        case OPT_OUTPUT:
            opt->filter.output =
                (tfm_line_format)(1 + cli_parse_choice("--output", optarg, output_formats));
            break;
        case OPT_INPUT:
            opt->filter.input = (tfm_line_format)cli_parse_choice("--input", optarg, input_formats);
            break;
        case OPT_DROPOUT: opt->filter.dropout = (float)cli_parse_double("--dropout", optarg, 0, 1); break;
        case OPT_SEED: opt->filter.seed = (uint64_t)cli_parse_int("--seed", optarg, 0, INT64_MAX); break;
        case OPT_THREADS: opt->filter.threads = (int)cli_parse_int("--threads", optarg, 1, 64); break;
        case OPT_STRICT: opt->filter.strict = true; break;
        case OPT_VOCAB_SIZE:
            opt->learn.vocab_size = (int32_t)cli_parse_int("--vocab-size", optarg, 1, 1 << 24);
            opt->vocab_size_given = true;
            learn_only = true;
            break;
        case OPT_NORMALIZE:
            opt->learn.norm.form = (tfm_norm_form)cli_parse_choice("--normalize", optarg, forms);
            opt->normalize_option_used = true;
            break;
        case OPT_CASE_FOLD: opt->learn.norm.case_fold = true; opt->normalize_option_used = true; break;
        case OPT_COVERAGE:
            opt->learn.character_coverage = cli_parse_double("--character-coverage", optarg, 0.5, 1);
            learn_only = true;
            break;
        case OPT_MAX_PIECE:
            opt->learn.max_piece_length = (int)cli_parse_int("--max-piece-length", optarg, 1, 1024);
            learn_only = true;
            break;
        case OPT_SENTENCE_SIZE:
            opt->learn.input_sentence_size =
                cli_parse_int("--input-sentence-size", optarg, 0, INT64_MAX);
            learn_only = true;
            break;
        case OPT_USER_SYMBOLS:
            opt->user_symbols = split_commas(optarg, &opt->learn.n_user_symbols);
            opt->learn.user_symbols = (const char *const *)opt->user_symbols;
            learn_only = true;
            break;
        case OPT_SOFT_LIMIT: opt->learn.soft_vocab_limit = true; learn_only = true; break;
        case OPT_PLACEHOLDERS:
            opt->placeholders = true;
            opt->placeholder_source = optarg;
            /* "-d --placeholders SRC": getopt cannot give an optional argument
             * that follows a space, and the mode may be set later. */
            opt->after_placeholders = NULL;
            if (!optarg && optind < argc && argv[optind][0] != '-')
                opt->after_placeholders = argv[optind];
            break;
        case OPT_PLACEHOLDER_CLASSES: {
            tfm_error err;
            if (tfm_placeholder_classes_parse(optarg, &opt->placeholder_classes, &err) != TFM_OK)
                cli_usage_error("--placeholder-classes: %s", err.msg);
            opt->placeholder_classes_given = true;
            break;
        }
        case OPT_GLOSSARY: opt->glossary = optarg; break;
        case OPT_CONSTRAINTS: opt->constraints = optarg; break;
        case OPT_SIDE: opt->side = cli_parse_choice("--side", optarg, sides); break;
        case OPT_ALL: opt->po_all = true; break;
        case OPT_NO_FUZZY: opt->no_fuzzy = true; break;
        case OPT_TARGET_LANGUAGE: {
            /* "fra" or ">>fra<<": the token of a multilingual OPUS-MT model */
            const size_t n = strlen(optarg);
            const bool whole = n > 4 && strncmp(optarg, ">>", 2) == 0 &&
                               strcmp(optarg + n - 2, "<<") == 0;
            if (n == 0 || n > 60 || strpbrk(optarg, " \t"))
                cli_usage_error("--target-language: '%s' is not a language code such as fra",
                                optarg);
            snprintf(opt->target_token, sizeof opt->target_token, whole ? "%s" : ">>%s<<",
                     optarg);
            opt->filter.first_piece = opt->target_token;
            break;
        }
        default: cli_common_option(c, usage);
        }
        if (learn_only && !opt->learn_only_option) opt->learn_only_option = argv[optind - 1];
        if (c != OPT_PLACEHOLDER_CLASSES && c != 'q' && c != 'v') opt->not_for_listing = true;
        if ((c == OPT_ALL || c == OPT_NO_FUZZY) && !opt->po_only_option)
            opt->po_only_option = argv[optind - 1];
        if (c != OPT_ALL && c != OPT_NO_FUZZY && c != 'o' && c != 'q' && c != 'v')
            opt->not_for_po = true;
    }
}

int main(int argc, char **argv)
{
    cli_init("tokenize", argv);
    options opt = {.mode = MODE_ENCODE, .filter = tfm_filter_default_params(),
                   .learn = tfm_bpe_learn_default_params(), .side = -1};
    /* The sub-commands come first: "tokenize learn ...", "tokenize normalize ...". */
    if (argc > 1 && strcmp(argv[1], "learn") == 0) opt.mode = MODE_LEARN;
    if (argc > 1 && strcmp(argv[1], "normalize") == 0) opt.mode = MODE_NORMALIZE;
    if (argc > 1 && strcmp(argv[1], "placeholders") == 0) opt.mode = MODE_PLACEHOLDERS;
    if (argc > 1 && strcmp(argv[1], "po-strings") == 0) opt.mode = MODE_PO_STRINGS;
    if (argc > 1 && strcmp(argv[1], "po-merge") == 0) opt.mode = MODE_PO_MERGE;
    if (opt.mode != MODE_ENCODE) {
        argv++;
        argc--;
    }
    parse_options(argc, argv, &opt);
    if (opt.mode == MODE_PLACEHOLDERS) {
        if (opt.not_for_listing)
            cli_usage_error("'tokenize placeholders' takes only --placeholder-classes (and -q, -v)");
        return run_list(&opt, argc, argv);
    }
    if (opt.mode == MODE_PO_STRINGS || opt.mode == MODE_PO_MERGE) return run_po(&opt, argc, argv);
    if (opt.po_only_option)
        cli_usage_error("%s is an option of 'tokenize po-strings' and 'tokenize po-merge'",
                        opt.po_only_option);
    static const char *const mode_names[] = {
        [MODE_DECODE] = "decoding (-d)", [MODE_LEARN] = "'tokenize learn'",
        [MODE_NORMALIZE] = "'tokenize normalize'"};
    if ((opt.glossary || opt.constraints) && opt.mode != MODE_ENCODE)
        cli_usage_error("%s is an option of encoding, not of %s",
                        opt.glossary ? "--glossary" : "--constraints", mode_names[opt.mode]);
    if (opt.glossary && !opt.constraints)
        cli_usage_error("--glossary needs --constraints=OUT, the file to write the constraints to");
    if (opt.constraints && !opt.glossary)
        cli_usage_error("--constraints=OUT needs --glossary=FILE, the terms to look for");
    if (opt.constraints && (opt.constraints[0] == 0 || strcmp(opt.constraints, "-") == 0))
        cli_usage_error("--constraints=OUT needs a file name: standard output holds the ids");
    if (opt.glossary && opt.filter.dropout > 0)
        cli_usage_error("--glossary and --dropout cannot be used together: the terms are found "
                        "in the deterministic segmentation");
    if (opt.mode == MODE_LEARN && !opt.vocab_size_given)
        cli_usage_error("learn: --vocab-size is required");
    if (opt.mode != MODE_LEARN && opt.learn_only_option)
        cli_usage_error("%s is an option of 'tokenize learn'", opt.learn_only_option);
    if (opt.mode == MODE_NORMALIZE && opt.model && opt.normalize_option_used)
        cli_usage_error("--normalize and --case-fold cannot be used with -m: the "
                        "vocabulary says how it normalises");
    if ((opt.mode == MODE_ENCODE || opt.mode == MODE_DECODE) && !opt.model)
        cli_usage_error("a vocabulary is required: -m VOCAB");
    if (opt.side >= 0 && !opt.model)
        cli_usage_error("--side goes with -m MODEL: it picks the vocabulary of one side");
    if (opt.side < 0) opt.side = opt.mode == MODE_DECODE ? TFM_TARGET : TFM_SOURCE;
    if ((opt.mode == MODE_ENCODE || opt.mode == MODE_DECODE) && opt.normalize_option_used)
        cli_usage_error("--normalize and --case-fold are options of 'tokenize learn' and "
                        "'tokenize normalize': the vocabulary says how it normalises");
    static const tfm_filter_op ops[] = {[MODE_ENCODE] = TFM_FILTER_ENCODE,
                                        [MODE_DECODE] = TFM_FILTER_DECODE,
                                        [MODE_NORMALIZE] = TFM_FILTER_NORMALIZE};
    if (opt.placeholder_classes_given && !opt.placeholders)
        cli_usage_error("--placeholder-classes goes with --placeholders");
    if (opt.placeholders && opt.mode == MODE_NORMALIZE)
        cli_usage_error("--placeholders is an option of learning, encoding and decoding");
    if (opt.placeholders && opt.mode == MODE_DECODE && !opt.placeholder_source &&
        opt.after_placeholders) {
        /* Take it out of the inputs, which getopt has moved to the end. */
        for (int i = optind; i < argc; i++) {
            if (argv[i] != opt.after_placeholders) continue;
            opt.placeholder_source = argv[i];
            for (int k = i; k + 1 < argc; k++) argv[k] = argv[k + 1];
            argc--;
            break;
        }
    }
    if (opt.placeholders && opt.mode == MODE_DECODE && !opt.placeholder_source)
        cli_usage_error("-d --placeholders needs the source text: --placeholders=SRC");
    if (opt.placeholder_source && opt.mode != MODE_DECODE)
        cli_usage_error("--placeholders=SRC is for decoding (-d); learning and encoding "
                        "take --placeholders alone");
    if (opt.placeholder_source && opt.placeholder_source[0] == 0)
        cli_usage_error("--placeholders=SRC: empty file name");
    if (opt.placeholder_source && strcmp(opt.placeholder_source, "-") == 0) {
        bool stdin_input = optind >= argc;
        for (int i = optind; i < argc; i++) stdin_input |= strcmp(argv[i], "-") == 0;
        if (stdin_input)
            cli_usage_error("--placeholders=-: standard input cannot be both the source text "
                            "and the input");
    }
    opt.filter.placeholders = opt.learn.placeholders = opt.placeholders;
    if (opt.placeholder_classes_given)
        opt.filter.placeholder_classes = opt.learn.placeholder_classes = opt.placeholder_classes;
    opt.filter.op = ops[opt.mode];
    opt.filter.norm = opt.learn.norm; /* normalize without -m */
    int status;
    if (opt.mode == MODE_LEARN) status = run_learn(&opt, argc, argv);
    else if (opt.model && cli_is_spm_file(opt.model)) status = run_spm(&opt, argc, argv);
    else status = run_filter(&opt, argc, argv);
    for (char **p = opt.user_symbols; p && *p; p++) free(*p);
    free(opt.user_symbols);
    return status;
}
