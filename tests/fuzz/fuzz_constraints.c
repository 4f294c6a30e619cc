/* fuzz_constraints.c - libFuzzer target for what steers a constrained search:
 * decode's --constraints lines, glossaries, and the constraints made from a
 * source line's placeholders.  For any bytes x:
 *   - x as a constraints line either parses, into at most 64 constraints
 *     whose alternatives are non-empty id sequences below the vocabulary size
 *     and not <pad>, <s> or </s>, or fails with a message that names the
 *     constraint ("constraint N: ...");
 *   - x as a glossary either parses or fails naming a line ("line N: "); a
 *     parsed one, matched against x's own encoding, gives a constraints line
 *     that parses back into as many constraints as terms were found;
 *   - x as a source line gives placeholder constraints with one one-token
 *     constraint per numbered placeholder (at most 64), the placeholder
 *     tokens of the line limited to their counts, the others banned.
 * Any difference aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"
#include "tfm/search.h"
#include "tfm/text.h"

#include "ph_vocab.h"

#define M PH_VOCAB_MARKER

/* The vocabulary: ph_vocab.h's, with a few merges. */
static const char *const merges[] = {M "f", "fi", M "fi", "le", M "file", "%s", NULL};

/* A parsed constraints set's properties. */
static void check_parsed(const tfm_constraints *c, int32_t vocab_size)
{
    if (c->n > TFM_MAX_CONSTRAINTS || c->n_alts < c->n) abort();
    for (int a = 0; a < c->n_alts; a++) {
        if (c->alt_len[a] < 1 || c->alt_of[a] < 0 || c->alt_of[a] >= c->n) abort();
        for (int j = 0; j < c->alt_len[a]; j++) {
            int32_t id = c->ids.data[c->alt_start[a] + j];
            if (id < 0 || id >= vocab_size || id == TFM_ID_PAD || id == TFM_ID_BOS ||
                id == TFM_ID_EOS)
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static tfm_vocab *v;
    static tfm_bpe *b;
    ph_tokenizer_once(merges, &v, &b);
    const char *x = (const char *)data;
    const int32_t V = tfm_vocab_size(v);
    tfm_constraints *c = tfm_constraints_create();
    if (!c) abort();
    tfm_error err;

    /* x as a constraints line */
    if (tfm_constraints_parse(c, x, size, V, &err) == TFM_OK)
        check_parsed(c, V);
    else if (strncmp(err.msg, "constraint ", 11) != 0 && err.status != TFM_ERR_NOMEM)
        abort();

    /* x as a glossary, matched against x's own encoding */
    tfm_glossary *g = NULL;
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_buf line;
    tfm_buf_init(&line);
    if (tfm_glossary_parse(x, size, v, NULL, &g, &err) == TFM_OK) {
        tfm_term_matches m;
        tfm_term_matches_init(&m);
        if (tfm_bpe_encode(b, NULL, x, size, &ids, NULL, NULL) != TFM_OK) abort();
        if (tfm_glossary_match(g, ids.data, ids.len, &m, &err) != TFM_OK) abort();
        if (tfm_glossary_constraints(g, &m, &line, &err) != TFM_OK) abort();
        tfm_constraints_clear(c);
        if (tfm_constraints_parse(c, line.data ? line.data : "", line.len, V, &err) != TFM_OK)
            abort();
        check_parsed(c, V);
        if ((size_t)c->n != m.n_found) abort();
        tfm_term_matches_free(&m);
        tfm_glossary_free(g);
    } else if (strncmp(err.msg, "line ", 5) != 0 && err.status != TFM_ERR_NOMEM) {
        abort();
    }

    /* x as a source line: its placeholders' constraints */
    tfm_constraints_clear(c);
    tfm_placeholders p;
    tfm_placeholders_init(&p);
    if (tfm_placeholders_scan(x, size, TFM_PH_ALL, &p, NULL) != TFM_OK) abort();
    if (tfm_constraints_add_placeholders(c, v, x, size, TFM_PH_ALL, &err) != TFM_OK) abort();
    int numbered = 0, count[TFM_PH_TOKENS + 1] = {0};
    for (size_t k = 0; k < p.n; k++)
        if (p.items[k].index > 0) {
            numbered++;
            count[p.items[k].index]++;
        }
    if (c->n != (numbered < TFM_MAX_CONSTRAINTS ? numbered : TFM_MAX_CONSTRAINTS)) abort();
    for (int i = 0; i < c->n_limited; i++) {
        int k = 0;
        for (int j = 1; j <= TFM_PH_TOKENS; j++)
            if (tfm_vocab_placeholder_id(v, j) == c->limited[i]) k = j;
        if (k == 0 || c->limit[i] != count[k]) abort();
    }
    for (int j = 1; j <= TFM_PH_TOKENS; j++) {
        bool banned = false;
        for (size_t i = 0; i < c->banned.len; i++)
            banned |= tfm_vocab_placeholder_id(v, j) == c->banned.data[i];
        if (banned != (count[j] == 0)) abort();
    }

    tfm_placeholders_free(&p);
    tfm_ids_free(&ids);
    tfm_buf_free(&line);
    tfm_constraints_free(c);
    return 0;
}
