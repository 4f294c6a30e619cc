/* format_guess.c - telling a file of id lines from a file of text by its
 * first lines, as train --input-format auto, score -m and inspect-attn do
 * without --text.
 *
 * A line of text can be all numbers ("42", "2026") and a file of strings
 * can start with empty lines, so no single line decides: a file is ids
 * when most of its non-empty lines among the first ones seen are id lines
 * (an id file with a bad line then fails at that line, naming it, rather
 * than being read as text), else text.  Evidence is thin when few lines
 * were seen, when each held a single number, or when some were not id
 * lines: the programs then say in one line what they assumed. */
#include <stdio.h>

#include "tfm/text.h"

static bool blank(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r') return false;
    return true;
}

void tfm_format_guess_add(tfm_format_guess *g, const char *line, size_t len)
{
    if (blank(line, len)) return;
    const int ids = tfm_id_line_count(line, len);
    if (g->lines == 0) g->single_ids = true;
    g->lines++;
    if (ids > 0) g->id_lines++;
    g->single_ids = g->single_ids && ids == 1;
}

bool tfm_format_guess_ids(const tfm_format_guess *g)
{
    return 2 * g->id_lines > g->lines;
}

bool tfm_format_guess_note(const tfm_format_guess *g, const char *hint, char *out, size_t size)
{
    if (g->lines == 0 || !tfm_format_guess_ids(g)) return false;
    if (g->id_lines >= TFM_GUESS_THIN && !g->single_ids && g->id_lines == g->lines) return false;
    const char *what = g->single_ids ? "of a single number each" : "of ids";
    if (g->id_lines < g->lines)
        snprintf(out, size, "read as id lines: %zu of its first %zu non-empty lines are id "
                 "lines; give %s if it is text", g->id_lines, g->lines, hint);
    else
        snprintf(out, size, "read as id lines: %s%zu non-empty line%s %s; give %s if it is text",
                 g->lines < TFM_GUESS_THIN ? "it has only " : "its first ", g->lines,
                 g->lines == 1 ? "" : "s", what, hint);
    return true;
}
