/* yaml.c - YAML documents as a small tree of raw scalars, and Marian's
 * vocabularies (vocab.yml) as pieces by id (tfm/yaml.h says what is
 * accepted and refused).
 *
 * libyaml does the reading (its event parser: scanning, quoting, escapes,
 * flow and block styles, UTF-8 and UTF-16); we keep scalars as the strings
 * it gives, unresolved, and refuse what a configuration or a vocabulary
 * must not hold.  Neither reader recurses: the tree is built with a stack
 * of open containers, so the depth limit is ours to set, not the C
 * stack's.  The nodes, their child arrays and their strings live in one
 * arena freed at once.
 *
 * The vocabulary reader does not build a tree: it takes the events of one
 * mapping of scalar pairs straight into an array of entries, one string
 * buffer and a hash of pieces, so a 64k-line vocab.yml costs a few
 * allocations and some milliseconds. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "tfm/io.h"
#include "tfm/yaml.h"

/* The longest part of a value quoted in a message. */
#define QUOTE_MAX 48
/* The size of the arena's blocks (larger requests get blocks of their own). */
#define ARENA_BLOCK ((size_t)64 << 10)

/* ---- messages from libyaml ------------------------------------------------------- */

/* Writes s[0..len) for a message into out: cut to QUOTE_MAX bytes (at a
 * character boundary) with "..." after, control bytes as \xNN. */
static void quote(const char *s, size_t len, char *out, size_t size)
{
    size_t pos = 0;
    for (size_t i = 0; i < len && pos + 8 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= QUOTE_MAX && (c & 0xc0) != 0x80) {
            memcpy(out + pos, "...", 3);
            pos += 3;
            break;
        }
        if (c < 0x20 || c == 0x7f) pos += (size_t)snprintf(out + pos, size - pos, "\\x%02x", c);
        else out[pos++] = (char)c;
    }
    out[pos] = 0;
}

/* The byte of data at libyaml's mark (line and column from 0, counted in
 * characters), or -1 when it cannot be found. */
static int byte_at(const unsigned char *data, size_t size, yaml_mark_t m)
{
    size_t i = 0, line = 0;
    while (line < m.line) {
        const unsigned char *nl = memchr(data + i, '\n', size - i);
        if (!nl) return -1;
        i = (size_t)(nl - data) + 1;
        line++;
    }
    for (size_t col = 0; i < size && col < m.column; i++)
        if ((data[i] & 0xc0) != 0x80) col++;
    while (i < size && (data[i] & 0xc0) == 0x80) i++;
    return i < size ? data[i] : -1;
}

/* The failure of libyaml's parser, as "line L, column C: what (context)". */
static tfm_status parser_failure(const yaml_parser_t *p, const void *data, size_t size,
                                 tfm_error *err)
{
    if (p->error == YAML_MEMORY_ERROR)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    yaml_mark_t m = p->problem_mark;
    const char *problem = p->problem ? p->problem : "cannot be read";
    if (p->error == YAML_READER_ERROR)
        return tfm_error_set(err, TFM_ERR_FORMAT, "byte %zu: %s (YAML is UTF-8 or UTF-16)",
                             p->problem_offset + 1, problem);
    tfm_error_set(err, TFM_ERR_FORMAT, "line %zu, column %zu: %s", m.line + 1, m.column + 1,
                  problem);
    if (p->context)
        tfm_error_append(err, " (%s at line %zu, column %zu)", p->context,
                         p->context_mark.line + 1, p->context_mark.column + 1);
    if (!strstr(problem, "tab") && byte_at(data, size, m) == '\t')
        tfm_error_append(err, ": a tab, where YAML allows only spaces for indentation");
    return TFM_ERR_FORMAT;
}

/* Starts libyaml on data[0..size), refusing inputs over the size limit. */
static tfm_status parser_start(yaml_parser_t *p, const void *data, size_t size, tfm_error *err)
{
    if (size > TFM_YAML_MAX_SIZE)
        return tfm_error_set(err, TFM_ERR_RANGE, "the input is %zu bytes: more than the %zu "
                             "a YAML file may have", size, TFM_YAML_MAX_SIZE);
    if (!yaml_parser_initialize(p)) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    yaml_parser_set_input_string(p, data ? data : (const void *)"", data ? size : 0);
    return TFM_OK;
}

static const char *event_what(yaml_event_type_t t)
{
    switch (t) {
    case YAML_SCALAR_EVENT: return "a scalar";
    case YAML_SEQUENCE_START_EVENT: return "a sequence";
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_ALIAS_EVENT: return "an alias";
    default: return "something else";
    }
}

static tfm_status alias_failure(const yaml_event_t *ev, tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                         "line %zu, column %zu: aliases (*%s) are not supported",
                         ev->start_mark.line + 1, ev->start_mark.column + 1,
                         ev->data.alias.anchor ? (const char *)ev->data.alias.anchor : "");
}

static tfm_status second_document_failure(const yaml_event_t *ev, tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                         "line %zu, column %zu: a second document: one is expected",
                         ev->start_mark.line + 1, ev->start_mark.column + 1);
}

static tfm_status nul_failure(const yaml_event_t *ev, tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_FORMAT,
                         "line %zu, column %zu: a scalar holds a NUL character (\\0)",
                         ev->start_mark.line + 1, ev->start_mark.column + 1);
}

/* ---- the arena --------------------------------------------------------------------- */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, size;
    max_align_t data[];
} arena_block;

/* size bytes aligned for any type, or NULL; freed with the arena. */
static void *arena_alloc(arena_block **head, size_t size)
{
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_block *b = *head;
    if (!b || b->size - b->used < size) {
        size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->used = 0;
        b->size = cap;
        /* A block made for one large request goes behind the current one,
         * which keeps its room for the small ones. */
        if (*head && cap > ARENA_BLOCK) {
            b->next = (*head)->next;
            (*head)->next = b;
        } else {
            b->next = *head;
            *head = b;
        }
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    return p;
}

static void arena_free(arena_block *b)
{
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
}

/* ---- documents --------------------------------------------------------------------- */

struct tfm_yaml {
    arena_block *arena;
    const tfm_yaml_node *root;
};

/* An open sequence or mapping while its children are read: where its
 * children start on the stack of pending children. */
typedef struct open_node {
    tfm_yaml_node *node;
    size_t first;
} open_node;

typedef struct builder {
    tfm_yaml *doc;
    tfm_buf open;      /* open_node[]: the containers being read, outermost first */
    tfm_buf pending;   /* tfm_yaml_node *[]: children of the open containers */
    size_t n_open, n_pending, n_nodes;
    tfm_error *err;
} builder;

static tfm_status push(tfm_buf *b, size_t *n, const void *item, size_t size)
{
    if (!tfm_buf_array(b, *n + 1, size)) return TFM_ERR_NOMEM;
    memcpy(b->data + *n * size, item, size);
    (*n)++;
    return TFM_OK;
}

static const char *kind_name(tfm_yaml_kind k)
{
    return k == TFM_YAML_SCALAR ? "a scalar" : k == TFM_YAML_SEQUENCE ? "a sequence"
                                                                      : "a mapping";
}

/* Checks that a mapping's keys differ (its children are key, value, ...). */
static tfm_status check_keys(builder *b, tfm_yaml_node *const *kids, size_t pairs)
{
    if (pairs < 2) return TFM_OK;
    tfm_strmap *seen = tfm_strmap_create(pairs);
    if (!seen) return tfm_error_set(b->err, TFM_ERR_NOMEM, "out of memory");
    tfm_status st = TFM_OK;
    for (size_t i = 0; i < pairs && st == TFM_OK; i++) {
        const tfm_yaml_node *k = kids[2 * i];
        bool inserted;
        int64_t *first = tfm_strmap_upsert(seen, k->str, k->len, (int64_t)i, &inserted);
        if (!first) {
            st = tfm_error_set(b->err, TFM_ERR_NOMEM, "out of memory");
        } else if (!inserted) {
            char q[QUOTE_MAX * 4 + 8];
            quote(k->str, k->len, q, sizeof q);
            st = tfm_error_set(b->err, TFM_ERR_FORMAT,
                               "line %zu, column %zu: the key '%s' comes twice in one mapping "
                               "(first at line %zu)", k->line, k->column, q,
                               kids[2 * (size_t)*first]->line);
        }
    }
    tfm_strmap_free(seen);
    return st;
}

/* Adds node as the next child of the innermost open container, or as the
 * root; a key must be a scalar. */
static tfm_status add_child(builder *b, tfm_yaml_node *node)
{
    if (b->n_open == 0) {
        b->doc->root = node;
        return TFM_OK;
    }
    const open_node *parent = (const open_node *)b->open.data + b->n_open - 1;
    size_t index = b->n_pending - parent->first;
    if (parent->node->kind == TFM_YAML_MAPPING) {
        if (index % 2 == 0 && node->kind != TFM_YAML_SCALAR)
            return tfm_error_set(b->err, TFM_ERR_FORMAT,
                                 "line %zu, column %zu: a key must be a scalar, not %s",
                                 node->line, node->column, kind_name(node->kind));
        if (index % 2 == 1) {
            const tfm_yaml_node *key = ((tfm_yaml_node **)b->pending.data)[b->n_pending - 1];
            node->key = key->str;
        }
    }
    if (push(&b->pending, &b->n_pending, &node, sizeof node) != TFM_OK)
        return tfm_error_set(b->err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

static tfm_status new_node(builder *b, tfm_yaml_kind kind, const yaml_event_t *ev,
                           tfm_yaml_node **out)
{
    if (b->n_nodes >= TFM_YAML_MAX_NODES)
        return tfm_error_set(b->err, TFM_ERR_RANGE,
                             "line %zu, column %zu: more than %zu nodes in one document",
                             ev->start_mark.line + 1, ev->start_mark.column + 1,
                             TFM_YAML_MAX_NODES);
    tfm_yaml_node *n = arena_alloc(&b->doc->arena, sizeof *n);
    if (!n) return tfm_error_set(b->err, TFM_ERR_NOMEM, "out of memory");
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->line = ev->start_mark.line + 1;
    n->column = ev->start_mark.column + 1;
    n->str = "";
    b->n_nodes++;
    *out = n;
    return TFM_OK;
}

static tfm_status on_scalar(builder *b, const yaml_event_t *ev)
{
    size_t len = ev->data.scalar.length;
    const char *value = (const char *)ev->data.scalar.value;
    if (memchr(value, 0, len)) return nul_failure(ev, b->err);
    tfm_yaml_node *n;
    tfm_status st = new_node(b, TFM_YAML_SCALAR, ev, &n);
    if (st != TFM_OK) return st;
    char *s = arena_alloc(&b->doc->arena, len + 1);
    if (!s) return tfm_error_set(b->err, TFM_ERR_NOMEM, "out of memory");
    memcpy(s, value, len);
    s[len] = 0;
    n->str = s;
    n->len = len;
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag;
    return add_child(b, n);
}

static tfm_status on_start(builder *b, tfm_yaml_kind kind, const yaml_event_t *ev)
{
    if (b->n_open >= TFM_YAML_MAX_DEPTH)
        return tfm_error_set(b->err, TFM_ERR_RANGE,
                             "line %zu, column %zu: nesting deeper than %d levels",
                             ev->start_mark.line + 1, ev->start_mark.column + 1,
                             TFM_YAML_MAX_DEPTH);
    tfm_yaml_node *n;
    tfm_status st = new_node(b, kind, ev, &n);
    if (st == TFM_OK) st = add_child(b, n);
    if (st != TFM_OK) return st;
    open_node o = {n, b->n_pending};
    if (push(&b->open, &b->n_open, &o, sizeof o) != TFM_OK)
        return tfm_error_set(b->err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

static tfm_status on_end(builder *b)
{
    open_node o = ((open_node *)b->open.data)[--b->n_open];
    size_t n = b->n_pending - o.first;
    /* no children: pending may not be allocated yet (NULL + 0 is undefined) */
    tfm_yaml_node **kids = n > 0 ? (tfm_yaml_node **)b->pending.data + o.first : NULL;
    if (o.node->kind == TFM_YAML_MAPPING) {
        tfm_status st = check_keys(b, kids, n / 2);
        if (st != TFM_OK) return st;
    }
    if (n > 0) {
        const tfm_yaml_node **copy = arena_alloc(&b->doc->arena, n * sizeof *copy);
        if (!copy) return tfm_error_set(b->err, TFM_ERR_NOMEM, "out of memory");
        memcpy(copy, kids, n * sizeof *copy);
        o.node->children = copy;
    }
    o.node->count = o.node->kind == TFM_YAML_MAPPING ? n / 2 : n;
    b->n_pending = o.first;
    return TFM_OK;
}

tfm_status tfm_yaml_parse(const void *data, size_t size, tfm_yaml **out, tfm_error *err)
{
    *out = NULL;
    yaml_parser_t p;
    tfm_status st = parser_start(&p, data, size, err);
    if (st != TFM_OK) return st;
    tfm_yaml *doc = calloc(1, sizeof *doc);
    builder b = {.doc = doc, .err = err};
    tfm_buf_init(&b.open);
    tfm_buf_init(&b.pending);
    if (!doc) st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    int documents = 0;
    bool done = false;
    while (st == TFM_OK && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            st = parser_failure(&p, data, size, err);
            break;
        }
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1) st = second_document_failure(&ev, err);
            break;
        case YAML_ALIAS_EVENT: st = alias_failure(&ev, err); break;
        case YAML_SCALAR_EVENT: st = on_scalar(&b, &ev); break;
        case YAML_SEQUENCE_START_EVENT: st = on_start(&b, TFM_YAML_SEQUENCE, &ev); break;
        case YAML_MAPPING_START_EVENT: st = on_start(&b, TFM_YAML_MAPPING, &ev); break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: st = on_end(&b); break;
        case YAML_STREAM_END_EVENT: done = true; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    tfm_buf_free(&b.open);
    tfm_buf_free(&b.pending);
    if (st != TFM_OK) {
        tfm_yaml_free(doc);
        return st;
    }
    *out = doc;
    return TFM_OK;
}

/* Reads a whole file of at most TFM_YAML_MAX_SIZE bytes into b. */
static tfm_status read_file(const char *path, tfm_buf *b, tfm_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfm_error_set(err, TFM_ERR_IO, "%s: %s", path, strerror(errno));
    tfm_status st = tfm_read_upto(fd, b, (uint64_t)TFM_YAML_MAX_SIZE + 1, err);
    close(fd);
    if (st == TFM_ERR_IO) tfm_error_prefix(err, "%s", path);
    if (st == TFM_OK && b->len > TFM_YAML_MAX_SIZE)
        st = tfm_error_set(err, TFM_ERR_RANGE, "%s is larger than the %zu bytes a YAML file "
                           "may have", path, TFM_YAML_MAX_SIZE);
    return st;
}

tfm_status tfm_yaml_load(const char *path, tfm_yaml **out, tfm_error *err)
{
    *out = NULL;
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_status st = read_file(path, &b, err);
    if (st == TFM_OK) st = tfm_yaml_parse(b.data, b.len, out, err);
    tfm_buf_free(&b);
    return st;
}

void tfm_yaml_free(tfm_yaml *doc)
{
    if (!doc) return;
    arena_free(doc->arena);
    free(doc);
}

const tfm_yaml_node *tfm_yaml_root(const tfm_yaml *doc) { return doc->root; }

/* ---- looking things up ------------------------------------------------------------- */

const tfm_yaml_node *tfm_yaml_get(const tfm_yaml_node *map, const char *key)
{
    if (!map || map->kind != TFM_YAML_MAPPING || !key) return NULL;
    size_t len = strlen(key);
    for (size_t i = 0; i < map->count; i++) {
        const tfm_yaml_node *k = map->children[2 * i];
        if (k->len == len && memcmp(k->str, key, len) == 0) return map->children[2 * i + 1];
    }
    return NULL;
}

/* "line L, column C: 'key': expected WHAT, found X" (X quoted, or the kind
 * of a node that is not a scalar). */
static tfm_status expected(const tfm_yaml_node *n, tfm_status status, const char *what,
                           tfm_error *err)
{
    if (!n) return tfm_error_set(err, TFM_ERR_ARG, "expected %s, found no node", what);
    char q[QUOTE_MAX * 4 + 8], key[QUOTE_MAX * 4 + 8];
    if (n->kind == TFM_YAML_SCALAR) {
        q[0] = '\'';
        quote(n->str, n->len, q + 1, sizeof q - 2);
        strcat(q, "'");
    } else {
        snprintf(q, sizeof q, "%s", kind_name(n->kind));
    }
    tfm_error_set(err, status, "line %zu, column %zu: ", n->line, n->column);
    if (n->key) {
        quote(n->key, strlen(n->key), key, sizeof key);
        tfm_error_append(err, "'%s': ", key);
    }
    tfm_error_append(err, "expected %s, found %s", what, q);
    return status;
}

tfm_status tfm_yaml_string(const tfm_yaml_node *n, const char **s, size_t *len,
                           tfm_error *err)
{
    if (!n || n->kind != TFM_YAML_SCALAR)
        return expected(n, TFM_ERR_FORMAT, "a string", err);
    *s = n->str;
    if (len) *len = n->len;
    return TFM_OK;
}

tfm_status tfm_yaml_int(const tfm_yaml_node *n, int64_t min, int64_t max, int64_t *out,
                        tfm_error *err)
{
    if (!n || n->kind != TFM_YAML_SCALAR)
        return expected(n, TFM_ERR_FORMAT, "an integer", err);
    const char *s = n->str;
    size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
    if (n->len == i) return expected(n, TFM_ERR_FORMAT, "an integer", err);
    for (size_t j = i; j < n->len; j++)
        if (s[j] < '0' || s[j] > '9') return expected(n, TFM_ERR_FORMAT, "an integer", err);
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    char range[96];
    snprintf(range, sizeof range, "an integer from %" PRId64 " to %" PRId64, min, max);
    if (errno == ERANGE || v < min || v > max) return expected(n, TFM_ERR_RANGE, range, err);
    *out = v;
    return TFM_OK;
}

tfm_status tfm_yaml_bool(const tfm_yaml_node *n, bool *out, tfm_error *err)
{
    /* YAML 1.1's booleans (https://yaml.org/type/bool.html), which Marian's
     * yaml-cpp reads too. */
    static const char *const words[][2] = {
        {"true", "false"}, {"True", "False"}, {"TRUE", "FALSE"}, {"yes", "no"},
        {"Yes", "No"},     {"YES", "NO"},     {"on", "off"},     {"On", "Off"},
        {"ON", "OFF"},     {"y", "n"},        {"Y", "N"},
    };
    const char *what = "true or false (or yes/no, on/off)";
    if (!n || n->kind != TFM_YAML_SCALAR) return expected(n, TFM_ERR_FORMAT, what, err);
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        for (int v = 0; v < 2; v++)
            if (strcmp(n->str, words[i][v]) == 0) {
                *out = v == 0;
                return TFM_OK;
            }
    return expected(n, TFM_ERR_FORMAT, what, err);
}

tfm_status tfm_yaml_double(const tfm_yaml_node *n, double *out, tfm_error *err)
{
    const char *what = "a number";
    if (!n || n->kind != TFM_YAML_SCALAR || n->len == 0)
        return expected(n, TFM_ERR_FORMAT, what, err);
    /* strtod also reads "inf", "nan" and hexadecimal: only decimal here. */
    bool digit = false;
    for (size_t i = 0; i < n->len; i++) {
        char c = n->str[i];
        if (c >= '0' && c <= '9') digit = true;
        else if (c != '+' && c != '-' && c != '.' && c != 'e' && c != 'E')
            return expected(n, TFM_ERR_FORMAT, what, err);
    }
    char *end;
    errno = 0;
    double v = strtod(n->str, &end);
    if (!digit || end != n->str + n->len) return expected(n, TFM_ERR_FORMAT, what, err);
    if (!isfinite(v)) return expected(n, TFM_ERR_RANGE, "a finite number", err);
    *out = v;
    return TFM_OK;
}

tfm_status tfm_yaml_strings(const tfm_yaml_node *n, const char ***out, size_t *count,
                            tfm_error *err)
{
    *out = NULL;
    *count = 0;
    const char *what = "a list of strings";
    if (!n || n->kind == TFM_YAML_MAPPING) return expected(n, TFM_ERR_FORMAT, what, err);
    size_t k = n->kind == TFM_YAML_SCALAR ? 1 : n->count;
    for (size_t i = 0; n->kind == TFM_YAML_SEQUENCE && i < k; i++)
        if (n->children[i]->kind != TFM_YAML_SCALAR)
            return expected(n->children[i], TFM_ERR_FORMAT, "a string", err);
    if (k == 0) return TFM_OK;
    const char **list = malloc(k * sizeof *list);
    if (!list) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < k; i++)
        list[i] = n->kind == TFM_YAML_SCALAR ? n->str : n->children[i]->str;
    *out = list;
    *count = k;
    return TFM_OK;
}

tfm_status tfm_yaml_get_strings(const tfm_yaml_node *map, const char *key, const char ***out,
                                size_t *count, tfm_error *err)
{
    const tfm_yaml_node *n = tfm_yaml_get(map, key);
    if (!n) {
        *out = NULL;
        *count = 0;
        if (map && map->kind != TFM_YAML_MAPPING)
            return expected(map, TFM_ERR_FORMAT, "a mapping", err);
        return tfm_error_set(err, TFM_ERR_FORMAT, "missing key '%s'", key);
    }
    return tfm_yaml_strings(n, out, count, err);
}

/* ---- Marian vocabularies ----------------------------------------------------------- */

/* One line of a vocabulary as read, before the ids are checked. */
typedef struct vocab_entry {
    size_t offset, len;   /* the piece, in the text buffer */
    int64_t id;
    size_t line;
} vocab_entry;

typedef struct vocab_object {
    tfm_yaml_vocab pub;
    char *text;           /* every piece, each followed by a NUL */
    const char **pieces;
    size_t *lens;
} vocab_object;

void tfm_yaml_vocab_free(tfm_yaml_vocab *v)
{
    if (!v) return;
    vocab_object *o = (vocab_object *)v;
    free(o->text);
    free(o->pieces);
    free(o->lens);
    free(o);
}

/* "line L: piece 'x' ..." */
static tfm_status piece_failure(tfm_error *err, tfm_status status, size_t line,
                                const char *piece, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static tfm_status piece_failure(tfm_error *err, tfm_status status, size_t line,
                                const char *piece, size_t len, const char *fmt, ...)
{
    char q[QUOTE_MAX * 4 + 8], rest[400];
    quote(piece, len, q, sizeof q);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    return tfm_error_set(err, status, "line %zu: piece '%s' %s", line, q, rest);
}

/* Reads an id: decimal digits only, below INT32_MAX. */
static tfm_status parse_id(const yaml_event_t *ev, size_t line, const char *piece,
                           size_t piece_len, int64_t *id, tfm_error *err)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    bool negative = len > 1 && s[0] == '-';
    uint64_t v = 0;
    size_t i = negative ? 1 : 0;
    if (i == len) v = UINT64_MAX;
    for (; i < len && v != UINT64_MAX; i++) {
        if (s[i] < '0' || s[i] > '9') v = UINT64_MAX;
        else if (v > INT32_MAX) break;
        else v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v != UINT64_MAX && !negative && v < INT32_MAX) {
        *id = (int64_t)v;
        return TFM_OK;
    }
    char q[QUOTE_MAX * 4 + 8];
    quote(s, len, q, sizeof q);
    if (v == UINT64_MAX)
        return piece_failure(err, TFM_ERR_FORMAT, line, piece, piece_len,
                             "has the id '%s', which is not an integer", q);
    if (negative)
        return piece_failure(err, TFM_ERR_RANGE, line, piece, piece_len,
                             "has the negative id %s", q);
    return piece_failure(err, TFM_ERR_RANGE, line, piece, piece_len,
                         "has the id %s: ids are below 2^31 - 1", q);
}

/* The reader's state: the entries read so far, and a hash table of their
 * pieces (entry number + 1 in each used slot, open addressing, at most half
 * full) that points into text rather than copying each piece as a
 * tfm_strmap would: a 64k-piece vocabulary then costs no allocation a
 * line. */
typedef struct vocab_reader {
    tfm_buf text;         /* the pieces, each with a NUL after it */
    tfm_buf entries;      /* vocab_entry[] */
    size_t n;
    uint32_t *slots;
    uint64_t *hashes;     /* the hash of each entry's piece */
    size_t n_slots;       /* a power of two */
    tfm_error *err;
} vocab_reader;

/* The slot of piece (hash h) in r's table: the slot holding it, or the
 * empty slot where it goes. */
static size_t vocab_slot(const vocab_reader *r, const char *piece, size_t len, uint64_t h)
{
    const vocab_entry *e = (const vocab_entry *)r->entries.data;
    size_t mask = r->n_slots - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t k = r->slots[i];
        if (k == 0) return i;
        const vocab_entry *f = &e[k - 1];
        if (r->hashes[k - 1] == h && f->len == len &&
            memcmp(r->text.data + f->offset, piece, len) == 0)
            return i;
    }
}

/* Makes room in the table for one more entry. */
static tfm_status vocab_grow(vocab_reader *r)
{
    if ((r->n + 1) * 2 <= r->n_slots) return TFM_OK;
    if (r->n >= UINT32_MAX / 4) return TFM_ERR_NOMEM;
    size_t cap = r->n_slots ? r->n_slots * 2 : 1024;
    uint32_t *slots = calloc(cap, sizeof *slots);
    uint64_t *hashes = realloc(r->hashes, cap / 2 * sizeof *hashes);
    if (!slots || !hashes) {
        free(slots);
        if (hashes) r->hashes = hashes;
        return TFM_ERR_NOMEM;
    }
    r->hashes = hashes;
    for (size_t k = 0; k < r->n; k++) {
        size_t i = hashes[k] & (cap - 1);
        while (slots[i]) i = (i + 1) & (cap - 1);
        slots[i] = (uint32_t)k + 1;
    }
    free(r->slots);
    r->slots = slots;
    r->n_slots = cap;
    return TFM_OK;
}

/* Takes one pair: key event k (a scalar, the piece) and value event v. */
static tfm_status vocab_pair(vocab_reader *r, const yaml_event_t *k, const yaml_event_t *v)
{
    const char *piece = (const char *)k->data.scalar.value;
    size_t len = k->data.scalar.length;
    size_t line = k->start_mark.line + 1;
    if (memchr(piece, 0, len)) return nul_failure(k, r->err);
    if (v->type == YAML_ALIAS_EVENT) return alias_failure(v, r->err);
    if (v->type != YAML_SCALAR_EVENT)
        return piece_failure(r->err, TFM_ERR_FORMAT, line, piece, len,
                             "has %s as its id: expected an integer", event_what(v->type));
    int64_t id = 0;
    tfm_status st = parse_id(v, line, piece, len, &id, r->err);
    if (st != TFM_OK) return st;
    if (vocab_grow(r) != TFM_OK) return tfm_error_set(r->err, TFM_ERR_NOMEM, "out of memory");
    uint64_t h = tfm_hash_bytes(piece, len);
    size_t slot = vocab_slot(r, piece, len, h);
    if (r->slots[slot])
        return piece_failure(r->err, TFM_ERR_FORMAT, line, piece, len,
                             "comes twice (first at line %zu)",
                             ((const vocab_entry *)r->entries.data)[r->slots[slot] - 1].line);
    vocab_entry e = {r->text.len, len, id, line};
    if (tfm_buf_append(&r->text, piece, len) != TFM_OK || tfm_buf_putc(&r->text, 0) != TFM_OK ||
        push(&r->entries, &r->n, &e, sizeof e) != TFM_OK)
        return tfm_error_set(r->err, TFM_ERR_NOMEM, "out of memory");
    r->hashes[r->n - 1] = h;
    r->slots[slot] = (uint32_t)r->n;
    return TFM_OK;
}

/* Reads the events of the document into r: one mapping of scalar pairs. */
static tfm_status vocab_events(yaml_parser_t *p, const void *data, size_t size,
                               vocab_reader *r)
{
    /* where we are: 0 before the mapping, 1 inside it, 2 after it */
    int stage = 0, documents = 0;
    yaml_event_t key = {0};
    bool have_key = false;
    tfm_status st = TFM_OK;
    for (bool done = false; st == TFM_OK && !done;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(p, &ev)) {
            st = parser_failure(p, data, size, r->err);
            break;
        }
        bool keep = false;
        switch (ev.type) {
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT:
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1) st = second_document_failure(&ev, r->err);
            break;
        default:
            /* the mapping, or a part of one inside it (a piece or an id) */
            if (ev.type == YAML_MAPPING_START_EVENT && stage == 0) {
                stage = 1;
            } else if (ev.type == YAML_ALIAS_EVENT) {
                st = alias_failure(&ev, r->err);
            } else if (stage != 1) {
                st = tfm_error_set(r->err, TFM_ERR_FORMAT,
                                   "line %zu, column %zu: a vocabulary is one mapping from "
                                   "piece to id, not %s", ev.start_mark.line + 1,
                                   ev.start_mark.column + 1, event_what(ev.type));
            } else if (ev.type == YAML_MAPPING_END_EVENT) {
                stage = 2;
            } else if (!have_key && ev.type != YAML_SCALAR_EVENT) {
                st = tfm_error_set(r->err, TFM_ERR_FORMAT,
                                   "line %zu, column %zu: a piece must be a scalar, not %s",
                                   ev.start_mark.line + 1, ev.start_mark.column + 1,
                                   event_what(ev.type));
            } else if (!have_key) {
                key = ev;
                have_key = keep = true;
            } else {
                st = vocab_pair(r, &key, &ev);
                yaml_event_delete(&key);
                have_key = false;
            }
        }
        if (!keep) yaml_event_delete(&ev);
    }
    if (have_key) yaml_event_delete(&key);
    if (st == TFM_OK && stage == 0)
        st = tfm_error_set(r->err, TFM_ERR_FORMAT, "the vocabulary is empty: no document");
    return st;
}

/* Places each entry at its id: every id of 0 .. n-1 exactly once. */
static tfm_status vocab_place(vocab_reader *r, vocab_object *o)
{
    const vocab_entry *e = (const vocab_entry *)r->entries.data;
    size_t n = r->n;
    size_t *at = malloc(n * sizeof *at);  /* the entry of each id, or SIZE_MAX */
    if (!at) return tfm_error_set(r->err, TFM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) at[i] = SIZE_MAX;
    size_t beyond = SIZE_MAX;  /* the first entry whose id is n or more */
    tfm_status st = TFM_OK;
    for (size_t i = 0; i < n && st == TFM_OK; i++) {
        if ((uint64_t)e[i].id >= n) {
            if (beyond == SIZE_MAX) beyond = i;
        } else if (at[e[i].id] != SIZE_MAX) {
            const vocab_entry *f = &e[at[e[i].id]];
            char q[QUOTE_MAX * 4 + 8];
            quote(r->text.data + f->offset, f->len, q, sizeof q);
            st = piece_failure(r->err, TFM_ERR_FORMAT, e[i].line, r->text.data + e[i].offset,
                               e[i].len, "has the id %" PRId64 ", which piece '%s' has "
                               "already (line %zu)", e[i].id, q, f->line);
        } else {
            at[e[i].id] = i;
        }
    }
    if (st == TFM_OK && beyond != SIZE_MAX) {
        size_t gap = 0;
        while (gap < n && at[gap] != SIZE_MAX) gap++;
        st = piece_failure(r->err, TFM_ERR_FORMAT, e[beyond].line,
                           r->text.data + e[beyond].offset, e[beyond].len,
                           "has the id %" PRId64 ", but the vocabulary has %zu entries, so ids "
                           "go from 0 to %zu, and no piece has the id %zu", e[beyond].id, n,
                           n - 1, gap);
    }
    if (st == TFM_OK) {
        o->pieces = malloc(n * sizeof *o->pieces);
        o->lens = malloc(n * sizeof *o->lens);
        if (!o->pieces || !o->lens) st = tfm_error_set(r->err, TFM_ERR_NOMEM, "out of memory");
    }
    if (st == TFM_OK) {
        o->text = r->text.data;   /* taken over */
        tfm_buf_init(&r->text);
        for (size_t id = 0; id < n; id++) {
            o->pieces[id] = o->text + e[at[id]].offset;
            o->lens[id] = e[at[id]].len;
        }
        o->pub.count = n;
        o->pub.pieces = o->pieces;
        o->pub.lens = o->lens;
    }
    free(at);
    return st;
}

tfm_status tfm_yaml_vocab_parse(const void *data, size_t size, tfm_yaml_vocab **out,
                                tfm_error *err)
{
    *out = NULL;
    yaml_parser_t p;
    tfm_status st = parser_start(&p, data, size, err);
    if (st != TFM_OK) return st;
    vocab_reader r = {.err = err};
    tfm_buf_init(&r.text);
    tfm_buf_init(&r.entries);
    vocab_object *o = calloc(1, sizeof *o);
    if (!o) st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (st == TFM_OK) st = vocab_events(&p, data, size, &r);
    if (st == TFM_OK && r.n == 0)
        st = tfm_error_set(err, TFM_ERR_FORMAT, "the vocabulary is empty: its mapping has no "
                           "entries");
    if (st == TFM_OK) st = vocab_place(&r, o);
    yaml_parser_delete(&p);
    free(r.slots);
    free(r.hashes);
    tfm_buf_free(&r.text);
    tfm_buf_free(&r.entries);
    if (st != TFM_OK) {
        if (o) tfm_yaml_vocab_free(&o->pub);
        return st;
    }
    *out = &o->pub;
    return TFM_OK;
}

tfm_status tfm_yaml_vocab_load(const char *path, tfm_yaml_vocab **out, tfm_error *err)
{
    *out = NULL;
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_status st = read_file(path, &b, err);
    if (st == TFM_OK) st = tfm_yaml_vocab_parse(b.data, b.len, out, err);
    tfm_buf_free(&b);
    return st;
}
