/* fuzz_nbest.c - libFuzzer target for the n-best line parser: whatever the
 * bytes, parsing returns a status (a failure says why); the fields of a line
 * that parses lie inside it, trimmed; and the line with a feature added
 * parses again to the same index and hypothesis, with that feature last. */
#include <stdlib.h>
#include <string.h>

#include "tfm.h"

static bool inside(const tfm_nbest_entry *e, const char *p, size_t n)
{
    return p >= e->line && (size_t)(p - e->line) + n <= e->len;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *line = (const char *)data;
    tfm_nbest_entry e, again;
    tfm_error err;
    err.msg[0] = 0;
    if (tfm_nbest_parse(line, size, &e, &err) != TFM_OK) {
        if (err.msg[0] == 0) abort(); /* every failure must say what is wrong */
        return 0;
    }
    if (!inside(&e, e.hyp, e.hyp_len) || !inside(&e, e.features, e.features_len) ||
        e.features_at > e.score_at || e.score_at > e.len)
        abort();
    if (e.hyp_len && (blank(e.hyp[0]) || blank(e.hyp[e.hyp_len - 1]))) abort();
    if (e.features_len && (blank(e.features[0]) || blank(e.features[e.features_len - 1]))) abort();
    tfm_buf out;
    tfm_buf_init(&out);
    static const char added[] = "Score= -1.000000";
    if (tfm_nbest_add_feature(&e, TFM_NBEST_FEATURE, -1.0, &out, &err) != TFM_OK) abort();
    if (tfm_nbest_parse(out.data, out.len, &again, &err) != TFM_OK) abort();
    size_t want = e.features_len + (e.features_len ? 1 : 0) + strlen(added);
    if (again.index != e.index || again.hyp_len != e.hyp_len ||
        memcmp(again.hyp, e.hyp, e.hyp_len) != 0 || again.features_len != want ||
        memcmp(again.features, e.features, e.features_len) != 0 ||
        memcmp(again.features + want - strlen(added), added, strlen(added)) != 0 ||
        again.len - again.score_at != e.len - e.score_at)
        abort();
    tfm_buf_free(&out);
    return 0;
}
