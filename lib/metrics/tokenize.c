/* tokenize.c - sacreBLEU's tokenizers, reimplemented on code points.
 *
 * BLEU's tokenizers (sacrebleu/tokenizers/):
 *   13a   tokenizer_13a.py + tokenizer_re.py: mteval-v13a's rules.  Drop
 *         "<skipped>", join "-\n" and "\n", unescape &quot; &amp; &lt; &gt;,
 *         pad the line with a space on each side, then
 *           1. put spaces around each of  { | } ~ [ \ ] ^ _ ` space ! " # $ % &
 *              ( ) * + : ; < = > ? @ /
 *           2. "X." -> "X . "   when X is not a digit (also for ',')
 *           3. ".X" -> " . X"   when X is not a digit (also for ',')
 *           4. "9-" -> "9 - "
 *         and join the words with single spaces.
 *   intl  tokenizer_intl.py (mteval-v14 international):
 *           1. "XP" -> "X P "  when X is not a number and P is punctuation
 *           2. "PX" -> " P X"  when X is not a number
 *           3. each symbol S -> " S "
 *         with Unicode categories N, P and S, no padding.
 *   zh    tokenizer_zh.py: strip, put spaces around each character of the
 *         CJK ranges below, then 13a's steps 1-4 (no unescaping, no padding).
 *   char  every character separated by a space.
 *   none  the line unchanged.
 * Each numbered step is one re.sub() pass, which scans left to right and
 * never lets two matches overlap: "a.,b" gives "a . ,b" after step 2, not
 * "a . , b".  The passes here scan the same way, so they agree with the
 * regular expressions character for character.
 *
 * TER's tokenizer (tokenizer_ter.py, TercomTokenizer): lowercase unless
 * case-sensitive; when normalized, unescape, pad, 13a's step 1, "'s " ->
 * " 's ", 13a's steps 2-4; when no_punct, delete . , ? : ; ! " ( ); then join
 * the words with single spaces. */
#include <string.h>
#include <utf8proc.h>

#include "metrics_internal.h"

typedef bool (*cp_class)(int32_t cp);

/* out = in.replace(pat, rep): non-overlapping, left to right. */
static tfm_status replace_all(const tfm_ids *in, tfm_ids *out, const char *pat, const char *rep)
{
    size_t np = strlen(pat), nr = strlen(rep);
    tfm_ids_clear(out);
    size_t i = 0;
    while (i < in->len) {
        bool match = i + np <= in->len;
        for (size_t k = 0; match && k < np; k++) match = in->data[i + k] == (unsigned char)pat[k];
        if (match) {
            for (size_t k = 0; k < nr; k++)
                if (tfm_cp_push(out, (unsigned char)rep[k]) != TFM_OK) return TFM_ERR_NOMEM;
            i += np;
        } else {
            if (tfm_cp_push(out, in->data[i]) != TFM_OK) return TFM_ERR_NOMEM;
            i++;
        }
    }
    return TFM_OK;
}

/* re.sub(r"(C)", r" \1 ", in) for a character class C. */
static inline tfm_status space_around(const tfm_ids *in, tfm_ids *out, cp_class c)
{
    tfm_ids_clear(out);
    for (size_t i = 0; i < in->len; i++) {
        int32_t cp = in->data[i];
        bool hit = c(cp);
        if ((hit && tfm_cp_push(out, ' ') != TFM_OK) || tfm_cp_push(out, cp) != TFM_OK ||
            (hit && tfm_cp_push(out, ' ') != TFM_OK))
            return TFM_ERR_NOMEM;
    }
    return TFM_OK;
}

/* re.sub(r"(A)(B)", r"\1 \2 ", in) when space_before is false, and
 * re.sub(r"(A)(B)", r" \1 \2", in) when it is true. */
static inline tfm_status pair_sub(const tfm_ids *in, tfm_ids *out, cp_class a, cp_class b,
                           bool space_before)
{
    tfm_ids_clear(out);
    size_t i = 0;
    while (i < in->len) {
        if (i + 1 < in->len && a(in->data[i]) && b(in->data[i + 1])) {
            if ((space_before && tfm_cp_push(out, ' ') != TFM_OK) || tfm_cp_push(out, in->data[i]) != TFM_OK ||
                tfm_cp_push(out, ' ') != TFM_OK || tfm_cp_push(out, in->data[i + 1]) != TFM_OK ||
                (!space_before && tfm_cp_push(out, ' ') != TFM_OK))
                return TFM_ERR_NOMEM;
            i += 2;
        } else {
            if (tfm_cp_push(out, in->data[i]) != TFM_OK) return TFM_ERR_NOMEM;
            i++;
        }
    }
    return TFM_OK;
}

/* out = " ".join(in.split()) */
static tfm_status join_words(const tfm_ids *in, tfm_ids *out)
{
    tfm_ids_clear(out);
    bool pending_space = false;
    for (size_t i = 0; i < in->len; i++) {
        int32_t cp = in->data[i];
        if (tfm_py_isspace(cp)) {
            pending_space = out->len > 0;
            continue;
        }
        if ((pending_space && tfm_cp_push(out, ' ') != TFM_OK) || tfm_cp_push(out, cp) != TFM_OK)
            return TFM_ERR_NOMEM;
        pending_space = false;
    }
    return TFM_OK;
}

static tfm_status copy_ids(const tfm_ids *in, tfm_ids *out)
{
    tfm_ids_clear(out);
    for (size_t i = 0; i < in->len; i++)
        if (tfm_cp_push(out, in->data[i]) != TFM_OK) return TFM_ERR_NOMEM;
    return TFM_OK;
}

static void swap_ids(tfm_ids *a, tfm_ids *b)
{
    tfm_ids t = *a;
    *a = *b;
    *b = t;
}

/* ---- character classes ---------------------------------------------------------- */

/* 13a's step 1: [\{-\~\[-\` -\&\(-\+\:-\@\/] */
static bool is_13a_punct(int32_t c)
{
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

static bool is_digit(int32_t c) { return c >= '0' && c <= '9'; }
static bool not_digit(int32_t c) { return !is_digit(c); }
static bool is_period_comma(int32_t c) { return c == '.' || c == ','; }
static bool is_dash(int32_t c) { return c == '-'; }

/* Unicode general categories N (Nd, Nl, No), P (Pc ... Po) and S (Sm ... So),
 * as \p{N}, \p{P} and \p{S} of the regex module. */
static bool is_number(int32_t c)
{
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

static bool not_number(int32_t c) { return !is_number(c); }

static bool is_punctuation(int32_t c)
{
    utf8proc_category_t k = utf8proc_category(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

static bool is_symbol(int32_t c)
{
    utf8proc_category_t k = utf8proc_category(c);
    return k >= UTF8PROC_CATEGORY_SM && k <= UTF8PROC_CATEGORY_SO;
}

/* tokenizer_zh.py's _UCODE_RANGES.  Two entries of that table are written
 * '\u20000' and '\u2f800' (meant as U+20000 and U+2F800), which Python reads
 * as two-character strings ("\u2000" + "0"); compared with one character
 * they select U+2001..U+2A6D and U+2F81..U+2FA1.  Those are the ranges
 * sacreBLEU really uses, punctuation such as U+2014 and U+201C included, so
 * they are the ranges here. */
static bool is_chinese(int32_t c)
{
    static const int32_t ranges[][2] = {
        {0x3400, 0x4DB5}, {0x4E00, 0x9FA5}, {0x9FA6, 0x9FBB}, {0xF900, 0xFA2D},
        {0xFA30, 0xFA6A}, {0xFA70, 0xFAD9}, {0x2001, 0x2A6D}, {0x2F81, 0x2FA1},
        {0xFF00, 0xFFEF}, {0x2E80, 0x2EFF}, {0x3000, 0x303F}, {0x31C0, 0x31EF},
        {0x2F00, 0x2FDF}, {0x2FF0, 0x2FFF}, {0x3100, 0x312F}, {0x31A0, 0x31BF},
        {0xFE10, 0xFE1F}, {0xFE30, 0xFE4F}, {0x2600, 0x26FF}, {0x2700, 0x27BF},
        {0x3200, 0x32FF}, {0x3300, 0x33FF},
    };
    if (c < 0x2001) return false;
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (c >= ranges[i][0] && c <= ranges[i][1]) return true;
    return false;
}

static bool is_ter_punct(int32_t c)
{
    return c == '.' || c == ',' || c == '?' || c == ':' || c == ';' || c == '!' || c == '"' ||
           c == '(' || c == ')';
}

/* ---- the tokenizers ---------------------------------------------------------------- */

/* tokenizer_re.py: 13a's steps 1-4 and the final join; a holds the input
 * and is used as scratch, the result is in out. */
static bool contains(const tfm_ids *t, int32_t cp)
{
    for (size_t i = 0; i < t->len; i++)
        if (t->data[i] == cp) return true;
    return false;
}

/* tokenizer_re.py: 13a's steps 1-4 and the final join; a holds the input
 * and is used as scratch, the result is in out.  Steps 2 and 3 can only
 * match at a '.' or ',', step 4 at a '-': lines without them skip those
 * passes, which gives the same result. */
static tfm_status regexp_steps(tfm_ids *a, tfm_ids *out)
{
    bool period_comma = contains(a, '.') || contains(a, ','), dash = contains(a, '-');
    if (space_around(a, out, is_13a_punct) != TFM_OK) return TFM_ERR_NOMEM;
    if (period_comma) {
        if (pair_sub(out, a, not_digit, is_period_comma, false) != TFM_OK ||
            pair_sub(a, out, is_period_comma, not_digit, true) != TFM_OK)
            return TFM_ERR_NOMEM;
    }
    if (dash) {
        if (pair_sub(out, a, is_digit, is_dash, false) != TFM_OK) return TFM_ERR_NOMEM;
        swap_ids(a, out);
    }
    return join_words(out, a) == TFM_OK ? (swap_ids(a, out), TFM_OK) : TFM_ERR_NOMEM;
}

/* &quot; &amp; &lt; &gt; in that order, each a pass of its own (so
 * "&amp;quot;" becomes "&quot;", as in sacreBLEU). */
static tfm_status unescape(tfm_ids *a, tfm_ids *b)
{
    static const char *const from[] = {"&quot;", "&amp;", "&lt;", "&gt;"};
    static const char *const to[] = {"\"", "&", "<", ">"};
    if (!contains(a, '&')) return TFM_OK;
    for (int k = 0; k < 4; k++) {
        if (replace_all(a, b, from[k], to[k]) != TFM_OK) return TFM_ERR_NOMEM;
        swap_ids(a, b);
    }
    return TFM_OK;
}

static tfm_status pad(const tfm_ids *in, tfm_ids *out)
{
    tfm_ids_clear(out);
    if (tfm_cp_push(out, ' ') != TFM_OK) return TFM_ERR_NOMEM;
    for (size_t i = 0; i < in->len; i++)
        if (tfm_cp_push(out, in->data[i]) != TFM_OK) return TFM_ERR_NOMEM;
    return tfm_cp_push(out, ' ');
}

static tfm_status tokenize_13a(const tfm_ids *in, tfm_ids *out, tfm_ids *tmp)
{
    /* Each replacement pass runs only when its pattern can occur. */
    if (copy_ids(in, tmp) != TFM_OK) return TFM_ERR_NOMEM;
    if (contains(tmp, '<')) {
        if (replace_all(tmp, out, "<skipped>", "") != TFM_OK) return TFM_ERR_NOMEM;
        swap_ids(out, tmp);
    }
    if (contains(tmp, '\n')) {
        if (replace_all(tmp, out, "-\n", "") != TFM_OK || replace_all(out, tmp, "\n", " ") != TFM_OK)
            return TFM_ERR_NOMEM;
    }
    if (unescape(tmp, out) != TFM_OK || pad(tmp, out) != TFM_OK) return TFM_ERR_NOMEM;
    swap_ids(out, tmp);
    return regexp_steps(tmp, out);
}

static tfm_status tokenize_intl(const tfm_ids *in, tfm_ids *out, tfm_ids *tmp)
{
    if (pair_sub(in, tmp, not_number, is_punctuation, false) != TFM_OK ||
        pair_sub(tmp, out, is_punctuation, not_number, true) != TFM_OK ||
        space_around(out, tmp, is_symbol) != TFM_OK)
        return TFM_ERR_NOMEM;
    return join_words(tmp, out);
}

static tfm_status tokenize_zh(const tfm_ids *in, tfm_ids *out, tfm_ids *tmp)
{
    if (tfm_py_strip(in, out) != TFM_OK || space_around(out, tmp, is_chinese) != TFM_OK)
        return TFM_ERR_NOMEM;
    return regexp_steps(tmp, out);
}

static tfm_status tokenize_char(const tfm_ids *in, tfm_ids *out)
{
    tfm_ids_clear(out);
    for (size_t i = 0; i < in->len; i++)
        if ((i > 0 && tfm_cp_push(out, ' ') != TFM_OK) || tfm_cp_push(out, in->data[i]) != TFM_OK)
            return TFM_ERR_NOMEM;
    return TFM_OK;
}

tfm_status tfm_bleu_tokenize_cps(tfm_bleu_tok tok, const tfm_ids *in, tfm_ids *out, tfm_ids *tmp)
{
    switch (tok) {
    case TFM_BLEU_TOK_13A: return tokenize_13a(in, out, tmp);
    case TFM_BLEU_TOK_INTL: return tokenize_intl(in, out, tmp);
    case TFM_BLEU_TOK_ZH: return tokenize_zh(in, out, tmp);
    case TFM_BLEU_TOK_CHAR: return tokenize_char(in, out);
    case TFM_BLEU_TOK_NONE: return copy_ids(in, out);
    }
    return TFM_ERR_ARG;
}

/* tokenizer_ter.py's _normalize_general_and_western. */
static tfm_status ter_normalize(tfm_ids *a, tfm_ids *b)
{
    /* Lines hold no '\n' when they come from a file, but an API caller may
     * pass one: "\n-" joins, "\n" is a space. */
    if (replace_all(a, b, "\n-", "") != TFM_OK || replace_all(b, a, "\n", " ") != TFM_OK ||
        unescape(a, b) != TFM_OK || pad(a, b) != TFM_OK || space_around(b, a, is_13a_punct) != TFM_OK ||
        replace_all(a, b, "'s ", " 's ") != TFM_OK)
        return TFM_ERR_NOMEM;
    /* The rule "'s$" -> " 's" can never match: the padding leaves a space at
     * the end of the line. */
    if (pair_sub(b, a, not_digit, is_period_comma, false) != TFM_OK ||
        pair_sub(a, b, is_period_comma, not_digit, true) != TFM_OK ||
        pair_sub(b, a, is_digit, is_dash, false) != TFM_OK)
        return TFM_ERR_NOMEM;
    return TFM_OK; /* the result is in a */
}

tfm_status tfm_ter_tokenize_cps(const tfm_metric_params *p, const tfm_ids *in, tfm_ids *out,
                                tfm_ids *tmp)
{
    if (in->len == 0) {
        tfm_ids_clear(out);
        return TFM_OK;
    }
    if (p->case_sensitive ? copy_ids(in, tmp) != TFM_OK : tfm_py_lower(in, tmp) != TFM_OK)
        return TFM_ERR_NOMEM;
    if (p->normalized && ter_normalize(tmp, out) != TFM_OK) return TFM_ERR_NOMEM;
    if (p->no_punct) {
        tfm_ids_clear(out);
        for (size_t i = 0; i < tmp->len; i++)
            if (!is_ter_punct(tmp->data[i]) && tfm_cp_push(out, tmp->data[i]) != TFM_OK)
                return TFM_ERR_NOMEM;
        swap_ids(out, tmp);
    }
    return join_words(tmp, out);
}

/* ---- public entry points -------------------------------------------------------------- */

static tfm_status nomem(tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

/* Decodes in, applies fn, encodes the result into out. */
static tfm_status run_on_text(tfm_bleu_tok tok, const tfm_metric_params *p, const char *in,
                              size_t len, tfm_buf *out, tfm_error *err)
{
    tfm_ids a, b, c;
    tfm_ids_init(&a);
    tfm_ids_init(&b);
    tfm_ids_init(&c);
    tfm_buf_clear(out);
    tfm_status s = tfm_py_decode(in, len, &a);
    if (s == TFM_OK) s = p ? tfm_ter_tokenize_cps(p, &a, &b, &c) : tfm_bleu_tokenize_cps(tok, &a, &b, &c);
    if (s == TFM_OK) s = tfm_py_encode(b.data, b.len, out);
    if (s == TFM_OK && !out->data) s = tfm_buf_append(out, "", 0); /* "" rather than NULL */
    tfm_ids_free(&a);
    tfm_ids_free(&b);
    tfm_ids_free(&c);
    if (s == TFM_ERR_ARG) return tfm_error_set(err, s, "unknown tokenizer %d", (int)tok);
    return s == TFM_OK ? TFM_OK : nomem(err);
}

tfm_status tfm_bleu_tokenize(tfm_bleu_tok tok, const char *in, size_t len, tfm_buf *out,
                             tfm_error *err)
{
    return run_on_text(tok, NULL, in, len, out, err);
}

tfm_status tfm_ter_tokenize(const tfm_metric_params *p, const char *in, size_t len, tfm_buf *out,
                            tfm_error *err)
{
    return run_on_text(TFM_BLEU_TOK_NONE, p, in, len, out, err);
}
