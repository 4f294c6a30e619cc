/* nbest.c - lines of n-best lists in the Moses / Marian form
 * "INDEX ||| HYPOTHESIS ||| FEATURES ||| SCORE" (tfm/metrics.h): reading one,
 * adding a feature to it as marian-scorer --n-best does, and writing one as
 * decode --nbest does. */
#include <stdint.h>
#include <string.h>

#include "metrics_internal.h"

/* Where "|||" next occurs in line[from, len), or len. */
static size_t find_bars(const char *line, size_t len, size_t from)
{
    const char *p = from < len ? memmem(line + from, len - from, "|||", 3) : NULL;
    return p ? (size_t)(p - line) : len;
}

/* line[*from, *to) without the spaces and tabs at either end. */
static void trim(const char *line, size_t *from, size_t *to)
{
    while (*from < *to && (line[*from] == ' ' || line[*from] == '\t')) (*from)++;
    while (*to > *from && (line[*to - 1] == ' ' || line[*to - 1] == '\t')) (*to)--;
}

tfm_status tfm_nbest_parse(const char *line, size_t len, tfm_nbest_entry *out, tfm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t bar1 = find_bars(line, len, 0), bar2 = find_bars(line, len, bar1 + 3);
    if (bar2 == len)
        return tfm_error_set(err, TFM_ERR_FORMAT, "not an n-best line: expected "
                             "'INDEX ||| IDS ||| FEATURES ||| SCORE' (Marian's form)");
    size_t from = 0, to = bar1;
    trim(line, &from, &to);
    size_t index = 0;
    for (size_t i = from; i < to; i++) {
        size_t digit = (size_t)(line[i] - '0');
        if (line[i] < '0' || line[i] > '9' || index > (SIZE_MAX - digit) / 10) {
            from = to; /* not a number, or too large for a size_t */
            break;
        }
        index = index * 10 + digit;
    }
    if (from == to)
        return tfm_error_set(err, TFM_ERR_FORMAT, "the first field of an n-best line must be "
                             "the 0-based number of its source line, not '%.*s'",
                             (int)(bar1 < 20 ? bar1 : 20), line);
    out->line = line;
    out->len = len;
    out->index = index;
    from = bar1 + 3;
    to = bar2;
    trim(line, &from, &to);
    out->hyp = line + from;
    out->hyp_len = to - from;
    out->features_at = bar2 + 3;
    out->score_at = find_bars(line, len, out->features_at);
    from = out->features_at;
    to = out->score_at;
    trim(line, &from, &to);
    out->features = line + from;
    out->features_len = to - from;
    return TFM_OK;
}

bool tfm_nbest_feature_name_ok(const char *name)
{
    size_t len = strlen(name);
    return len > 0 && strcspn(name, " \t|=") == len;
}

tfm_status tfm_nbest_add_feature(const tfm_nbest_entry *e, const char *name, double value,
                                 tfm_buf *out, tfm_error *err)
{
    if (!tfm_nbest_feature_name_ok(name))
        return tfm_error_set(err, TFM_ERR_ARG, "'%s' cannot name a feature: it must be a word "
                             "without spaces, '|' or '='", name);
    const char *line = e->line;
    bool ok = tfm_buf_append(out, line, e->features_at) == TFM_OK &&
              tfm_buf_putc(out, ' ') == TFM_OK &&
              tfm_buf_append(out, e->features, e->features_len) == TFM_OK &&
              (e->features_len == 0 || tfm_buf_putc(out, ' ') == TFM_OK) &&
              tfm_buf_printf(out, "%s= %.6f", name, value) == TFM_OK &&
              (e->score_at == e->len ||
               (tfm_buf_putc(out, ' ') == TFM_OK &&
                tfm_buf_append(out, line + e->score_at, e->len - e->score_at) == TFM_OK));
    return ok ? TFM_OK : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

tfm_status tfm_nbest_format(size_t index, const int32_t *ids, size_t n, double log_prob,
                            double score, tfm_buf *out)
{
    bool ok = tfm_buf_printf(out, "%zu ||| ", index) == TFM_OK &&
              tfm_ids_format(ids, n, out) == TFM_OK &&
              tfm_buf_printf(out, " ||| F0= %.6f ||| %.6f\n", log_prob, score) == TFM_OK;
    return ok ? TFM_OK : TFM_ERR_NOMEM;
}
