/* hash.c - open-addressing hash maps (linear probing, power-of-two tables,
 * load factor at most 1/2) from 64-bit keys and from byte strings. */
#include <stdlib.h>
#include <string.h>

#include "tfm/core.h"

uint64_t tfm_hash_bytes(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i = 0;
    /* Eight bytes at a time, then the tail: FNV-1a over words, mixed at the end. */
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static size_t table_size_for(size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    return cap;
}

/* ---- 64-bit keys ---- */

struct tfm_map64 {
    uint64_t *keys;
    int64_t *values;
    unsigned char *used;
    size_t cap, count;
};

tfm_map64 *tfm_map64_create(size_t expected)
{
    tfm_map64 *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = table_size_for(expected);
    m->keys = malloc(m->cap * sizeof *m->keys);
    m->values = malloc(m->cap * sizeof *m->values);
    m->used = calloc(m->cap, 1);
    if (!m->keys || !m->values || !m->used) {
        tfm_map64_free(m);
        return NULL;
    }
    return m;
}

void tfm_map64_free(tfm_map64 *m)
{
    if (!m) return;
    free(m->keys);
    free(m->values);
    free(m->used);
    free(m);
}

size_t tfm_map64_count(const tfm_map64 *m)
{
    return m->count;
}

static size_t map64_slot(const tfm_map64 *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    size_t i = mix64(key) & mask;
    while (m->used[i] && m->keys[i] != key) i = (i + 1) & mask;
    return i;
}

int64_t *tfm_map64_find(const tfm_map64 *m, uint64_t key)
{
    size_t i = map64_slot(m, key);
    return m->used[i] ? &m->values[i] : NULL;
}

static bool map64_grow(tfm_map64 *m)
{
    tfm_map64 bigger = {0};
    bigger.cap = m->cap * 2;
    bigger.keys = malloc(bigger.cap * sizeof *bigger.keys);
    bigger.values = malloc(bigger.cap * sizeof *bigger.values);
    bigger.used = calloc(bigger.cap, 1);
    if (!bigger.keys || !bigger.values || !bigger.used) {
        free(bigger.keys);
        free(bigger.values);
        free(bigger.used);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        size_t j = map64_slot(&bigger, m->keys[i]);
        bigger.used[j] = 1;
        bigger.keys[j] = m->keys[i];
        bigger.values[j] = m->values[i];
    }
    free(m->keys);
    free(m->values);
    free(m->used);
    bigger.count = m->count;
    *m = bigger;
    return true;
}

int64_t *tfm_map64_upsert(tfm_map64 *m, uint64_t key, int64_t init, bool *inserted)
{
    size_t i = map64_slot(m, key);
    if (m->used[i]) {
        if (inserted) *inserted = false;
        return &m->values[i];
    }
    if ((m->count + 1) * 2 > m->cap) {
        if (!map64_grow(m)) return NULL;
        i = map64_slot(m, key);
    }
    m->used[i] = 1;
    m->keys[i] = key;
    m->values[i] = init;
    m->count++;
    if (inserted) *inserted = true;
    return &m->values[i];
}

bool tfm_map64_remove(tfm_map64 *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    size_t i = map64_slot(m, key);
    if (!m->used[i]) return false;
    m->used[i] = 0;
    m->count--;
    /* Backward-shift deletion keeps every probe chain unbroken. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->used[j]) break;
        size_t home = mix64(m->keys[j]) & mask;
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->keys[i] = m->keys[j];
            m->values[i] = m->values[j];
            m->used[i] = 1;
            m->used[j] = 0;
            i = j;
        }
    }
    return true;
}

bool tfm_map64_next(const tfm_map64 *m, size_t *iter, uint64_t *key, int64_t *value)
{
    while (*iter < m->cap) {
        size_t i = (*iter)++;
        if (m->used[i]) {
            if (key) *key = m->keys[i];
            if (value) *value = m->values[i];
            return true;
        }
    }
    return false;
}

/* ---- string keys ---- */

typedef struct {
    char *key;   /* NULL: empty slot */
    size_t len;
    uint64_t hash;
    int64_t value;
} str_slot;

struct tfm_strmap {
    str_slot *slots;
    size_t cap, count;
    bool borrowing; /* the keys are the caller's: neither copied nor freed */
};

static tfm_strmap *strmap_create(size_t expected, bool borrowing)
{
    tfm_strmap *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = table_size_for(expected);
    m->borrowing = borrowing;
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->slots) {
        free(m);
        return NULL;
    }
    return m;
}

tfm_strmap *tfm_strmap_create(size_t expected)
{
    return strmap_create(expected, false);
}

tfm_strmap *tfm_strmap_create_borrowing(size_t expected)
{
    return strmap_create(expected, true);
}

void tfm_strmap_free(tfm_strmap *m)
{
    if (!m) return;
    if (!m->borrowing)
        for (size_t i = 0; i < m->cap; i++) free(m->slots[i].key);
    free(m->slots);
    free(m);
}

size_t tfm_strmap_count(const tfm_strmap *m)
{
    return m->count;
}

static size_t strmap_slot(const tfm_strmap *m, const char *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    for (;;) {
        const str_slot *s = &m->slots[i];
        if (!s->key) return i;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return i;
        i = (i + 1) & mask;
    }
}

int64_t *tfm_strmap_find(const tfm_strmap *m, const char *key, size_t len)
{
    size_t i = strmap_slot(m, key, len, tfm_hash_bytes(key, len));
    return m->slots[i].key ? &m->slots[i].value : NULL;
}

static bool strmap_grow(tfm_strmap *m)
{
    size_t cap = m->cap * 2;
    str_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < m->cap; i++) {
        str_slot *s = &m->slots[i];
        if (!s->key) continue;
        size_t j = s->hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

int64_t *tfm_strmap_upsert(tfm_strmap *m, const char *key, size_t len, int64_t init,
                           bool *inserted)
{
    uint64_t h = tfm_hash_bytes(key, len);
    size_t i = strmap_slot(m, key, len, h);
    if (m->slots[i].key) {
        if (inserted) *inserted = false;
        return &m->slots[i].value;
    }
    if ((m->count + 1) * 2 > m->cap) {
        if (!strmap_grow(m)) return NULL;
        i = strmap_slot(m, key, len, h);
    }
    char *copy = (char *)key; /* borrowed: the caller's bytes */
    if (!m->borrowing) {
        copy = malloc(len + 1);
        if (!copy) return NULL;
        if (len) memcpy(copy, key, len);
        copy[len] = 0;
    }
    m->slots[i] = (str_slot){.key = copy, .len = len, .hash = h, .value = init};
    m->count++;
    if (inserted) *inserted = true;
    return &m->slots[i].value;
}

bool tfm_strmap_next(const tfm_strmap *m, size_t *iter, const char **key, size_t *len,
                     int64_t *value)
{
    while (*iter < m->cap) {
        const str_slot *s = &m->slots[(*iter)++];
        if (s->key) {
            if (key) *key = s->key;
            if (len) *len = s->len;
            if (value) *value = s->value;
            return true;
        }
    }
    return false;
}
