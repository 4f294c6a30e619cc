/* import_hf.c - train import of a Hugging Face Marian directory (an OPUS-MT
 * model as transformers' convert_marian_to_pytorch.py converts it):
 * config.json (model_type "marian"), model.safetensors, vocab.json (or
 * source's vocab.json and target_vocab.json when the sides have their own),
 * source.spm and target.spm.
 *
 * The result is the model import_marian.c makes of the OPUS-MT directory
 * the conversion started from: the same configuration, the same weights
 * (transformers keeps them [out, in] under the names this toolkit uses,
 * behind "model."), the same vocabularies.  transformers appends <pad> to
 * Marian's pieces and starts the decoder from its zero row; here <pad> is
 * taken off and the Marian construction (<s>, <pad> after the pieces, the
 * decoder's zero start) is used, so the two imports give one model.
 *
 * Refused, by the key and its value: another model_type; normalize_before
 * (transformers' Marian is post-norm); normalize_embedding;
 * scale_embedding false; an activation other than relu and swish
 * (transformers' "gelu" is the erf form, which Marian does not use and this
 * toolkit does not run); encoder and decoder of different widths or heads. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "tfm/io.h"

typedef struct hf_importer {
    const char *dir;
    char *config_path, *weights_path;
    cJSON *config;
    tfm_safetensors *f;
    tfm_error *err;
} hf_importer;


/* The whole file at path, NUL-terminated, at most max bytes. */
static tfm_status slurp(const char *path, size_t max, tfm_buf *out, tfm_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return tfm_error_set(err, TFM_ERR_IO, "%s: cannot open", path);
    char chunk[65536];
    size_t n;
    tfm_status st = TFM_OK;
    while (st == TFM_OK && (n = fread(chunk, 1, sizeof chunk, fp)) > 0) {
        if (out->len + n > max)
            st = tfm_error_set(err, TFM_ERR_FORMAT, "%s: larger than %zu bytes", path, max);
        else if (tfm_buf_append(out, chunk, n) != TFM_OK)
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (st == TFM_OK && ferror(fp)) st = tfm_error_set(err, TFM_ERR_IO, "%s: read failed", path);
    fclose(fp);
    return st;
}

static tfm_status parse_json(const char *path, cJSON **out, tfm_error *err)
{
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_status st = slurp(path, (size_t)64 << 20, &b, err);
    if (st == TFM_OK) {
        *out = cJSON_ParseWithLength(b.data ? b.data : "", b.len);
        if (!*out) st = tfm_error_set(err, TFM_ERR_FORMAT, "%s: not valid JSON", path);
    }
    tfm_buf_free(&b);
    return st;
}

/* config[key] as an integer in [lo, hi]. */
static tfm_status get_int(hf_importer *im, const char *key, int lo, int hi, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(im->config, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble ||
        v->valuedouble < lo || v->valuedouble > hi)
        return tfm_error_set(im->err, TFM_ERR_FORMAT, "%s: '%s' is %s, expected an integer "
                             "from %d to %d", im->config_path, key, v ? "not that" : "missing",
                             lo, hi);
    *out = (int)v->valuedouble;
    return TFM_OK;
}

/* config[key] as a bool; absent: dflt. */
static bool get_bool(hf_importer *im, const char *key, bool dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(im->config, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static tfm_status refuse(hf_importer *im, const char *key, const char *value, const char *why)
{
    return tfm_error_set(im->err, TFM_ERR_UNSUPPORTED, "%s: \"%s\": %s: %s", im->config_path, key,
                         value, why);
}

static tfm_status read_config(hf_importer *im, tfm_config *c)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(im->config, "model_type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "marian") != 0)
        return refuse(im, "model_type", cJSON_IsString(type) ? type->valuestring : "(none)",
                      "only Marian models are imported");
    if (get_bool(im, "normalize_before", false))
        return refuse(im, "normalize_before", "true", "transformers' Marian is post-norm");
    if (get_bool(im, "normalize_embedding", false))
        return refuse(im, "normalize_embedding", "true", "not supported");
    if (!get_bool(im, "scale_embedding", true))
        return refuse(im, "scale_embedding", "false", "embeddings are scaled by sqrt(d_model)");
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(im->config, "activation_function");
    const char *a = cJSON_IsString(act) ? act->valuestring : "";
    if (strcmp(a, "swish") == 0 || strcmp(a, "silu") == 0) c->activation = TFM_ACT_SWISH;
    else if (strcmp(a, "relu") == 0) c->activation = TFM_ACT_RELU;
    else
        return refuse(im, "activation_function", a,
                      "supported are relu and swish (transformers' gelu is the erf form)");
    tfm_status st;
    int dec_heads, dec_ffn;
    if ((st = get_int(im, "d_model", 2, 1 << 16, &c->d_model))) return st;
    if ((st = get_int(im, "encoder_layers", 1, 256, &c->n_encoder_layers))) return st;
    if ((st = get_int(im, "decoder_layers", 1, 256, &c->n_decoder_layers))) return st;
    if ((st = get_int(im, "encoder_attention_heads", 1, 1 << 12, &c->n_heads))) return st;
    if ((st = get_int(im, "decoder_attention_heads", 1, 1 << 12, &dec_heads))) return st;
    if ((st = get_int(im, "encoder_ffn_dim", 1, 1 << 18, &c->d_ff))) return st;
    if ((st = get_int(im, "decoder_ffn_dim", 1, 1 << 18, &dec_ffn))) return st;
    if (dec_heads != c->n_heads || dec_ffn != c->d_ff)
        return refuse(im, "decoder_ffn_dim", "(not the encoder's)",
                      "the encoder and the decoder must have the same heads and d_ff");
    c->shared_embeddings = get_bool(im, "share_encoder_decoder_embeddings", true);
    c->shared_decoder_embeddings = !c->shared_embeddings && get_bool(im, "tie_word_embeddings",
                                                                      true);
    return TFM_OK;
}

/* The pieces of vocab.json in their ids (0 .. n-1 each once), <pad> taken
 * off the end. */
typedef struct hf_vocab {
    const char **pieces;
    size_t *lens;
    size_t count;
    cJSON *json;
} hf_vocab;

static void hf_vocab_free(hf_vocab *v)
{
    free(v->pieces);
    free(v->lens);
    cJSON_Delete(v->json);
}

static tfm_status read_vocab(const char *path, hf_vocab *v, tfm_error *err)
{
    memset(v, 0, sizeof *v);
    tfm_status st = parse_json(path, &v->json, err);
    if (st != TFM_OK) return st;
    const int n = cJSON_GetArraySize(v->json);
    if (!cJSON_IsObject(v->json) || n < 3)
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: not an object of pieces and ids", path);
    v->pieces = calloc((size_t)n, sizeof *v->pieces);
    v->lens = calloc((size_t)n, sizeof *v->lens);
    if (!v->pieces || !v->lens) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    const cJSON *item;
    cJSON_ArrayForEach(item, v->json)
    {
        const double id = item->valuedouble;
        if (!cJSON_IsNumber(item) || id < 0 || id >= n || id != (double)(int)id)
            return tfm_error_set(err, TFM_ERR_FORMAT, "%s: piece '%.40s' has id %s, expected "
                                 "0 to %d", path, item->string, cJSON_IsNumber(item) ? "out of "
                                 "range" : "not a number", n - 1);
        if (v->pieces[(int)id])
            return tfm_error_set(err, TFM_ERR_FORMAT, "%s: pieces '%.40s' and '%.40s' have id %d",
                                 path, v->pieces[(int)id], item->string, (int)id);
        v->pieces[(int)id] = item->string;
        v->lens[(int)id] = strlen(item->string);
    }
    v->count = (size_t)n;
    if (strcmp(v->pieces[n - 1], "<pad>") != 0)
        return tfm_error_set(err, TFM_ERR_FORMAT, "%s: the last piece is '%.40s', expected "
                             "'<pad>' (transformers' Marian vocabularies end with it)",
                             path, v->pieces[n - 1]);
    v->count--;
    return TFM_OK;
}

/* The tensor called name (without "model." when bare) as float32 rows x
 * cols ([cols] when rows is 0, [1, cols] too), copied into dst. */
static tfm_status get(hf_importer *im, const char *name, int rows, int cols, float *dst)
{
    const void *data;
    int64_t shape[2] = {rows ? rows : cols, cols};
    tfm_status st;
    if (rows == 0) {
        st = tfm_safetensors_get(im->f, name, TFM_F32, 1, shape, &data, NULL);
        shape[0] = 1;
        if (st != TFM_OK) st = tfm_safetensors_get(im->f, name, TFM_F32, 2, shape, &data, im->err);
    } else {
        st = tfm_safetensors_get(im->f, name, TFM_F32, 2, shape, &data, im->err);
    }
    if (st != TFM_OK) {
        tfm_error_prefix(im->err, "%s", im->weights_path);
        return st;
    }
    memcpy(dst, data, (size_t)(rows ? rows : 1) * (size_t)cols * sizeof *dst);
    return TFM_OK;
}

static tfm_status get_linear(hf_importer *im, const char *prefix, const tfm_linear *l, int out,
                             int in)
{
    char name[320];
    snprintf(name, sizeof name, "%s.weight", prefix);
    tfm_status st = get(im, name, out, in, l->weight);
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (st == TFM_OK) st = get(im, name, 0, out, l->bias);
    return st;
}

static tfm_status get_norm(hf_importer *im, const char *prefix, const tfm_layer_norm *n, int D)
{
    char name[320];
    snprintf(name, sizeof name, "%s.weight", prefix);
    tfm_status st = get(im, name, 0, D, n->weight);
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (st == TFM_OK) st = get(im, name, 0, D, n->bias);
    return st;
}

static tfm_status get_attention(hf_importer *im, const char *prefix, const tfm_attention *a,
                                int D)
{
    const char *names[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    const tfm_linear *lin[4] = {&a->q_proj, &a->k_proj, &a->v_proj, &a->out_proj};
    tfm_status st = TFM_OK;
    char name[320]; /* prefix (under 256 bytes) and a suffix */
    for (int i = 0; i < 4 && st == TFM_OK; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, names[i]);
        st = get_linear(im, name, lin[i], D, D);
    }
    return st;
}

/* pre.NAME (attention) and pre.NAME_layer_norm */
static tfm_status get_sublayer(hf_importer *im, const char *pre, const char *name,
                               const tfm_attention *a, const tfm_layer_norm *ln, int D)
{
    char at[256];
    snprintf(at, sizeof at, "%s.%s", pre, name);
    tfm_status st = get_attention(im, at, a, D);
    snprintf(at, sizeof at, "%s.%s_layer_norm", pre, name);
    if (st == TFM_OK) st = get_norm(im, at, ln, D);
    return st;
}

/* pre.fc1, pre.fc2 and pre.final_layer_norm */
static tfm_status get_ffn(hf_importer *im, const char *pre, const tfm_linear *fc1,
                          const tfm_linear *fc2, const tfm_layer_norm *ln, int D, int F)
{
    char at[256];
    snprintf(at, sizeof at, "%s.fc1", pre);
    tfm_status st = get_linear(im, at, fc1, F, D);
    snprintf(at, sizeof at, "%s.fc2", pre);
    if (st == TFM_OK) st = get_linear(im, at, fc2, D, F);
    snprintf(at, sizeof at, "%s.final_layer_norm", pre);
    if (st == TFM_OK) st = get_norm(im, at, ln, D);
    return st;
}

static tfm_status read_weights(hf_importer *im, tfm_model *m, int V)
{
    const tfm_config *c = &m->config;
    const tfm_params *p = &m->params;
    const int D = c->d_model, F = c->d_ff;
    char pre[128];
    /* the embeddings hold V + 1 rows (<pad> last); the pieces' V are taken */
    const int Vp = V + 1;
    float *rows = malloc((size_t)Vp * D * sizeof *rows);
    if (!rows) return tfm_error_set(im->err, TFM_ERR_NOMEM, "out of memory");
    tfm_status st = get(im, "model.encoder.embed_tokens.weight", Vp, D, rows);
    if (st == TFM_OK) memcpy(p->src_embed, rows, (size_t)V * D * sizeof *rows);
    if (st == TFM_OK && !c->shared_embeddings) {
        st = get(im, "model.decoder.embed_tokens.weight", Vp, D, rows);
        if (st == TFM_OK) memcpy(p->tgt_embed, rows, (size_t)V * D * sizeof *rows);
        if (st == TFM_OK && !c->shared_decoder_embeddings) {
            st = get(im, "lm_head.weight", Vp, D, rows);
            if (st == TFM_OK) memcpy(p->output_proj, rows, (size_t)V * D * sizeof *rows);
        }
    }
    if (st == TFM_OK) st = get(im, "final_logits_bias", 0, Vp, rows);
    if (st == TFM_OK) memcpy(p->output_bias, rows, (size_t)V * sizeof *rows);
    for (int v = V; v < c->tgt_vocab_size; v++) p->output_bias[v] = IMPORT_ABSENT_BIAS;
    free(rows);

    for (int l = 0; st == TFM_OK && l < c->n_encoder_layers; l++) {
        const tfm_encoder_layer *L = &p->encoder_layers[l];
        snprintf(pre, sizeof pre, "model.encoder.layers.%d", l);
        st = get_sublayer(im, pre, "self_attn", &L->self_attn, &L->self_attn_layer_norm, D);
        if (st == TFM_OK) st = get_ffn(im, pre, &L->fc1, &L->fc2, &L->final_layer_norm, D, F);
    }
    for (int l = 0; st == TFM_OK && l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *L = &p->decoder_layers[l];
        snprintf(pre, sizeof pre, "model.decoder.layers.%d", l);
        st = get_sublayer(im, pre, "self_attn", &L->self_attn, &L->self_attn_layer_norm, D);
        if (st == TFM_OK)
            st = get_sublayer(im, pre, "encoder_attn", &L->encoder_attn,
                              &L->encoder_attn_layer_norm, D);
        if (st == TFM_OK) st = get_ffn(im, pre, &L->fc1, &L->fc2, &L->final_layer_norm, D, F);
    }
    return st;
}

tfm_status tfm_model_import_hf(const char *dir, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    hf_importer im = {.dir = dir, .err = err};
    im.config_path = import_path(dir, "config.json");
    im.weights_path = import_path(dir, "model.safetensors");
    char *vocab_path = import_path(dir, "vocab.json");
    char *tgt_vocab_path = import_path(dir, "target_vocab.json");
    char *spm[2] = {import_path(dir, "source.spm"), import_path(dir, "target.spm")};
    hf_vocab vocab[2];
    memset(vocab, 0, sizeof vocab);
    tfm_vocab *src = NULL, *tgt = NULL;
    tfm_model *m = NULL;
    tfm_status st = im.config_path && im.weights_path && vocab_path && tgt_vocab_path && spm[0] &&
                            spm[1]
                        ? TFM_OK
                        : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (st == TFM_OK) st = parse_json(im.config_path, &im.config, err);
    tfm_config c;
    tfm_config_preset("base", &c, NULL);
    c.positions = TFM_POS_SINUSOIDAL_CONCAT;
    c.output_bias = true;
    c.decoder_start_zero = true;
    /* Marian's epsilon, as the OPUS-MT import (transformers' nn.LayerNorm
     * runs the converted model with 1e-5): one model from either directory */
    c.layer_norm_eps = 1e-9f;
    c.alignment_layer = -1;
    if (st == TFM_OK) st = read_config(&im, &c);
    /* a vocabulary per side only when the model says so (separate_vocabs in
     * tokenizer_config.json, and target_vocab.json) */
    FILE *probe = st == TFM_OK ? fopen(tgt_vocab_path, "rb") : NULL;
    const bool separate = probe != NULL;
    if (probe) fclose(probe);
    if (st == TFM_OK) st = read_vocab(vocab_path, &vocab[0], err);
    if (st == TFM_OK) st = separate ? read_vocab(tgt_vocab_path, &vocab[1], err)
                                    : read_vocab(vocab_path, &vocab[1], err);
    const int vs = (int)vocab[0].count, vt = (int)vocab[1].count;
    const int n_real = vs > vt ? vs : vt;
    int32_t eos[2], unk[2];
    if (st == TFM_OK)
        st = import_side_vocab(vocab[0].pieces, vocab[0].lens, vocab[0].count, vocab_path, spm[0],
                               n_real, &src, &eos[0], &unk[0], err);
    if (st == TFM_OK)
        st = import_side_vocab(vocab[1].pieces, vocab[1].lens, vocab[1].count,
                               separate ? tgt_vocab_path : vocab_path, spm[1], n_real, &tgt,
                               &eos[1], &unk[1], err);
    if (st == TFM_OK && (eos[0] != eos[1] || unk[0] != unk[1]))
        st = tfm_error_set(err, TFM_ERR_FORMAT, "the vocabularies put </s> and <unk> at "
                                                "different ids");
    if (st == TFM_OK && c.shared_embeddings && vs != vt)
        st = tfm_error_set(err, TFM_ERR_FORMAT, "%s: shared embeddings, but the vocabularies "
                           "hold %d and %d pieces", im.config_path, vs, vt);
    if (st == TFM_OK) {
        import_specials(&c, n_real, eos[1], unk[1]);
        if ((st = tfm_config_validate(&c, err)) != TFM_OK)
            tfm_error_prefix(err, "%s", im.config_path);
    }
    if (st == TFM_OK && (st = tfm_safetensors_open(im.weights_path, &im.f, err)) != TFM_OK)
        tfm_error_prefix(err, "%s", im.weights_path);
    if (st == TFM_OK) st = tfm_model_create_sides(&c, src, tgt, 0, &m, err);
    if (st == TFM_OK) {
        memset(m->data, 0, tfm_params_count(&c) * sizeof *m->data);
        st = read_weights(&im, m, vs);
    }
    if (st == TFM_OK) {
        *out = m;
        m = NULL;
    }
    tfm_model_free(m);
    tfm_vocab_free(src);
    tfm_vocab_free(tgt);
    hf_vocab_free(&vocab[0]);
    hf_vocab_free(&vocab[1]);
    tfm_safetensors_free(im.f);
    cJSON_Delete(im.config);
    free(im.config_path);
    free(im.weights_path);
    free(vocab_path);
    free(tgt_vocab_path);
    free(spm[0]);
    free(spm[1]);
    return st;
}
