/* import_marian.c - train import: an OPUS-MT (Marian) model directory made
 * into a model of this toolkit, once, so that no program reads Marian's files
 * at translation time (DESIGN.md, "Models from elsewhere").
 *
 * The directory is the one decoder.yml describes: the first model of
 * `models:` (an .npz archive whose member special:model.yml holds the
 * training configuration), the vocabularies of `vocabs:` (source first,
 * target last: YAML maps from piece to id), and OPUS-MT's source.spm and
 * target.spm.  What the model file gets:
 *
 *   - the configuration: depths, d_model, heads, d_ff, the feed-forward
 *     activation, pre- or post-norm, the LayerNorm of the embeddings, tied
 *     embeddings, the output bias, Marian's sinusoids, the decoder's zero
 *     start, Marian's layer-norm epsilon (1e-9, its layerNorm's default),
 *     the alignment layer, </s> appended to the source;
 *   - the weights, transposed from Marian's [in, out] to [out, in];
 *   - a vocabulary per side: Marian's pieces in Marian's id order (the
 *     smaller side filled with unused control pieces up to the larger's
 *     size, so that the ids added next are the same on both sides), then
 *     <s> and <pad> (Marian has neither: the decoder starts from a zero
 *     vector, and padding is masked), each with its SentencePiece model
 *     attached (tfm_vocab_attach_spm).  The rows added to the embeddings
 *     are zeros and their output bias is -1e4, so that no probability goes
 *     to them (the searches also forbid <s> and <pad> by id).
 *
 * What this toolkit cannot run is refused with the option and its value,
 * as CTranslate2's converter refuses them and more: --type other than
 * transformer, an SSRU or RNN decoder (--transformer-decoder-autoreg),
 * --transformer-no-projection, other activations, pre/post-process
 * combinations other than the pre-norm and post-norm ones, factored
 * vocabularies, learned positions (Wpos), --right-left, encoder and decoder
 * FFNs of other widths or depths, --tied-embeddings-src.  A model trained
 * with --output-omit-bias gets a zero output bias. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "tfm/npz.h"
#include "tfm/spm.h"
#include "tfm/yaml.h"

typedef struct importer {
    const char *dir;
    tfm_npz *npz;
    const char *npz_name;   /* for messages */
    tfm_yaml *config;       /* special:model.yml */
    const tfm_yaml_node *root;
    tfm_tensor t;           /* scratch */
    tfm_error *err;
} importer;


/* ---- the configuration ---------------------------------------------------------------- */

/* The string value of key ("" when absent: Marian's default for the options
 * read here). */
static const char *config_string(importer *im, const char *key)
{
    const tfm_yaml_node *n = tfm_yaml_get(im->root, key);
    const char *s = "";
    size_t len;
    if (n && n->kind == TFM_YAML_SCALAR && tfm_yaml_string(n, &s, &len, NULL) != TFM_OK) s = "";
    return s;
}

static tfm_status config_int(importer *im, const char *key, int64_t lo, int64_t hi, int *out)
{
    const tfm_yaml_node *n = tfm_yaml_get(im->root, key);
    if (!n)
        return tfm_error_set(im->err, TFM_ERR_FORMAT, "%s: special:model.yml has no '%s'",
                             im->npz_name, key);
    int64_t v;
    tfm_status st = tfm_yaml_int(n, lo, hi, &v, im->err);
    if (st != TFM_OK) {
        tfm_error_prefix(im->err, "%s: special:model.yml: '%s'", im->npz_name, key);
        return st;
    }
    *out = (int)v;
    return TFM_OK;
}

static bool config_bool(importer *im, const char *key)
{
    const tfm_yaml_node *n = tfm_yaml_get(im->root, key);
    bool v = false;
    if (n && tfm_yaml_bool(n, &v, NULL) != TFM_OK) v = false;
    return v;
}

static tfm_status refuse(importer *im, const char *option, const char *value, const char *why)
{
    const char *quote = value[0] ? "" : "'"; /* an empty value shows as '' */
    return tfm_error_set(im->err, TFM_ERR_UNSUPPORTED,
                         "%s: the model was trained with --%s %s%s%s: %s", im->npz_name, option,
                         quote, value, quote, why);
}

/* Reads and checks the options of special:model.yml into c. */
static tfm_status read_config(importer *im, tfm_config *c)
{
    tfm_status st;
    const char *type = config_string(im, "type");
    if (strcmp(type, "transformer") != 0)
        return refuse(im, "type", type, "only the transformer is imported");
    const char *autoreg = config_string(im, "transformer-decoder-autoreg");
    if (autoreg[0] && strcmp(autoreg, "self-attention") != 0)
        return refuse(im, "transformer-decoder-autoreg", autoreg,
                      "the decoder must be self-attention (an SSRU or RNN decoder is not "
                      "supported)");
    if (config_bool(im, "transformer-no-projection"))
        return refuse(im, "transformer-no-projection", "true",
                      "attention without its output projection is not supported");
    /* (factored vocabularies are refused by their .fsv files: every model.yml
     * holds factors-combine and its like, set or not) */
    if (tfm_npz_find(im->npz, "Wpos", NULL))
        return refuse(im, "transformer-train-position-embeddings", "true",
                      "learned positions (Wpos) are not supported");

    const char *act = config_string(im, "transformer-ffn-activation");
    if (strcmp(act, "relu") == 0 || !act[0]) c->activation = TFM_ACT_RELU;
    else if (strcmp(act, "swish") == 0) c->activation = TFM_ACT_SWISH;
    else if (strcmp(act, "gelu") == 0) c->activation = TFM_ACT_GELU_SIGMOID;
    else
        return refuse(im, "transformer-ffn-activation", act,
                      "supported activations are relu, swish and gelu");

    const char *pre = config_string(im, "transformer-preprocess");
    const char *post = config_string(im, "transformer-postprocess");
    const char *top = config_string(im, "transformer-postprocess-top");
    const char *emb = config_string(im, "transformer-postprocess-emb");
    if (strcmp(pre, "n") == 0 && strcmp(post, "da") == 0 && strcmp(top, "n") == 0) {
        c->pre_norm = true;
    } else if (!pre[0] && strcmp(post, "dan") == 0 && !top[0]) {
        c->pre_norm = false;
    } else {
        return tfm_error_set(im->err, TFM_ERR_UNSUPPORTED,
                             "%s: the model was trained with --transformer-preprocess '%s' "
                             "--transformer-postprocess '%s' --transformer-postprocess-top '%s': "
                             "supported are post-norm ('' dan '') and pre-norm (n da n)",
                             im->npz_name, pre, post, top);
    }
    if (strcmp(emb, "") && strcmp(emb, "d") && strcmp(emb, "n") && strcmp(emb, "nd"))
        return refuse(im, "transformer-postprocess-emb", emb,
                      "supported values are '', d, n and nd");
    c->embedding_layer_norm = strchr(emb, 'n') != NULL;

    if ((st = config_int(im, "enc-depth", 1, 256, &c->n_encoder_layers))) return st;
    if ((st = config_int(im, "dec-depth", 1, 256, &c->n_decoder_layers))) return st;
    if ((st = config_int(im, "dim-emb", 2, 1 << 16, &c->d_model))) return st;
    if ((st = config_int(im, "transformer-heads", 1, 1 << 12, &c->n_heads))) return st;
    if ((st = config_int(im, "transformer-dim-ffn", 1, 1 << 18, &c->d_ff))) return st;
    /* a Marian model may differ in its encoder's and decoder's FFN width:
     * refuse it by name rather than read it wrong */
    const tfm_yaml_node *dec_ffn = tfm_yaml_get(im->root, "transformer-decoder-dim-ffn");
    int64_t dffn = 0;
    if (dec_ffn && tfm_yaml_int(dec_ffn, 0, 1 << 18, &dffn, NULL) == TFM_OK && dffn != 0 &&
        dffn != c->d_ff)
        return refuse(im, "transformer-decoder-dim-ffn", "(not the encoder's)",
                      "the encoder and the decoder must have the same d_ff");
    const tfm_yaml_node *depth = tfm_yaml_get(im->root, "transformer-ffn-depth");
    int64_t fd = 2;
    if (depth && tfm_yaml_int(depth, 0, 16, &fd, NULL) == TFM_OK && fd != 2 && fd != 0)
        return refuse(im, "transformer-ffn-depth", config_string(im, "transformer-ffn-depth"),
                      "feed-forward sublayers of two linear layers only");

    c->shared_embeddings = config_bool(im, "tied-embeddings-all");
    c->shared_decoder_embeddings = !c->shared_embeddings && config_bool(im, "tied-embeddings");
    if (config_bool(im, "right-left"))
        return refuse(im, "right-left", "true",
                      "a model that writes its output right to left is not supported");
    if (config_bool(im, "tied-embeddings-src"))
        return refuse(im, "tied-embeddings-src", "true",
                      "source and target embeddings tied without the output is not supported");

    const char *align = config_string(im, "transformer-guided-alignment-layer");
    c->alignment_layer = -1;
    if (strcmp(align, "last") == 0) {
        c->alignment_layer = c->n_decoder_layers - 1;
    } else if (align[0] && strcmp(align, "none") != 0) {
        char *end;
        errno = 0;
        long l = strtol(align, &end, 10);
        if (errno || *end || l < 1 || l > c->n_decoder_layers)
            return refuse(im, "transformer-guided-alignment-layer", align,
                          "expected 'last' or a decoder layer from 1");
        c->alignment_layer = (int)l - 1;
    }
    return TFM_OK;
}

/* ---- the vocabularies ----------------------------------------------------------------- */

/* The pieces of the vocabulary file yml_path (its size in *n). */
static tfm_status read_yml(importer *im, const char *yml_path, tfm_yaml_vocab **out, int *n)
{
    tfm_status st = tfm_yaml_vocab_load(yml_path, out, im->err);
    if (st != TFM_OK) {
        tfm_error_prefix(im->err, "%s", yml_path);
        return st;
    }
    const size_t count = (*out)->count;
    if (count > (1 << 24) - 2) {
        tfm_yaml_vocab_free(*out);
        *out = NULL;
        return tfm_error_set(im->err, TFM_ERR_RANGE, "%s: %zu pieces: too many", yml_path, count);
    }
    *n = (int)count;
    return TFM_OK;
}

/* ---- the weights ---------------------------------------------------------------------- */

/* Member name as float32 of rows x cols ([1, cols] or [cols] when rows is
 * 0: a bias or a LayerNorm's vector) into im->t.  required false: absent is
 * TFM_EOF, with no message. */
static tfm_status get(importer *im, const char *name, int64_t rows, int64_t cols, bool required)
{
    if (!tfm_npz_find(im->npz, name, NULL)) {
        if (!required) return TFM_EOF;
        return tfm_error_set(im->err, TFM_ERR_FORMAT, "%s: tensor '%s' is missing", im->npz_name,
                             name);
    }
    tfm_status st = tfm_npz_read(im->npz, name, &im->t, im->err);
    if (st != TFM_OK) {
        tfm_error_prefix(im->err, "%s", im->npz_name);
        return st;
    }
    const tfm_tensor *t = &im->t;
    bool ok = t->dtype == TFM_F32;
    if (ok && rows > 0) ok = t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols;
    if (ok && rows == 0)
        ok = (t->ndim == 1 && t->shape[0] == cols) ||
             (t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == cols);
    if (!ok) {
        char have[64];
        tfm_tensor_shape_str(t, have, sizeof have);
        return tfm_error_set(im->err, TFM_ERR_FORMAT,
                             "%s: tensor '%s' has shape %s, expected (%" PRId64 ", %" PRId64 ")%s",
                             im->npz_name, name, have, rows > 0 ? rows : 1, cols,
                             t->dtype == TFM_F32 ? "" : " float32");
    }
    return TFM_OK;
}

/* dst [out, in] = the transpose of Marian's W [in, out]. */
static tfm_status get_linear_weight(importer *im, const char *name, float *dst, int in, int out)
{
    tfm_status st = get(im, name, in, out, true);
    if (st != TFM_OK) return st;
    const float *w = (const float *)(const void *)im->t.data;
    for (int i = 0; i < in; i++)
        for (int o = 0; o < out; o++) dst[(size_t)o * in + i] = w[(size_t)i * out + o];
    return TFM_OK;
}

static tfm_status get_vector(importer *im, const char *name, float *dst, int n)
{
    tfm_status st = get(im, name, 0, n, true);
    if (st == TFM_OK) memcpy(dst, im->t.data, (size_t)n * sizeof *dst);
    return st;
}

/* prefix_W<s> and prefix_b<s> into a linear layer of in -> out. */
static tfm_status get_linear(importer *im, const char *prefix, const char *s, float *weight,
                             float *bias, int in, int out)
{
    char name[128];
    snprintf(name, sizeof name, "%s_W%s", prefix, s);
    tfm_status st = get_linear_weight(im, name, weight, in, out);
    snprintf(name, sizeof name, "%s_b%s", prefix, s);
    if (st == TFM_OK) st = get_vector(im, name, bias, out);
    return st;
}

/* A LayerNorm: prefix_ln_scale / _ln_bias, with "_pre" after them in a
 * pre-norm model. */
static tfm_status get_norm(importer *im, const char *prefix, bool pre, const tfm_layer_norm *ln,
                           int D)
{
    char name[128];
    snprintf(name, sizeof name, "%s_ln_scale%s", prefix, pre ? "_pre" : "");
    tfm_status st = get_vector(im, name, ln->weight, D);
    snprintf(name, sizeof name, "%s_ln_bias%s", prefix, pre ? "_pre" : "");
    if (st == TFM_OK) st = get_vector(im, name, ln->bias, D);
    return st;
}

static tfm_status get_attention(importer *im, const char *prefix, const tfm_attention *a, int D,
                                bool pre, const tfm_layer_norm *ln)
{
    tfm_status st = get_linear(im, prefix, "q", a->q_proj.weight, a->q_proj.bias, D, D);
    if (st == TFM_OK) st = get_linear(im, prefix, "k", a->k_proj.weight, a->k_proj.bias, D, D);
    if (st == TFM_OK) st = get_linear(im, prefix, "v", a->v_proj.weight, a->v_proj.bias, D, D);
    if (st == TFM_OK) st = get_linear(im, prefix, "o", a->out_proj.weight, a->out_proj.bias, D, D);
    char name[128];
    snprintf(name, sizeof name, "%s_Wo", prefix);
    if (st == TFM_OK) st = get_norm(im, name, pre, ln, D);
    return st;
}

static tfm_status get_ffn(importer *im, const char *prefix, const tfm_linear *fc1,
                          const tfm_linear *fc2, const tfm_layer_norm *ln, int D, int F, bool pre)
{
    tfm_status st = get_linear(im, prefix, "1", fc1->weight, fc1->bias, D, F);
    if (st == TFM_OK) st = get_linear(im, prefix, "2", fc2->weight, fc2->bias, F, D);
    char name[128];
    snprintf(name, sizeof name, "%s_ffn", prefix);
    if (st == TFM_OK) st = get_norm(im, name, pre, ln, D);
    return st;
}

/* An embedding matrix [V + 2, D] from name [V, D]: the two rows after it
 * (<s>, <pad>) stay zero. */
static tfm_status get_embedding(importer *im, const char *name, float *dst, int V, int D)
{
    tfm_status st = get(im, name, V, D, true);
    if (st == TFM_OK) memcpy(dst, im->t.data, (size_t)V * D * sizeof *dst);
    return st;
}

static tfm_status read_weights(importer *im, tfm_model *m, int Vs, int Vt)
{
    const tfm_config *c = &m->config;
    const tfm_params *p = &m->params;
    const int D = c->d_model, F = c->d_ff;
    const bool pre = c->pre_norm;
    tfm_status st;
    char prefix[64];

    if (c->shared_embeddings) {
        st = get_embedding(im, "Wemb", p->src_embed, Vs, D);
    } else {
        st = get_embedding(im, tfm_npz_find(im->npz, "encoder_Wemb", NULL) ? "encoder_Wemb"
                                                                           : "Wemb",
                           p->src_embed, Vs, D);
        if (st == TFM_OK) st = get_embedding(im, "decoder_Wemb", p->tgt_embed, Vt, D);
        if (st == TFM_OK && !c->shared_decoder_embeddings) {
            /* the output layer's own matrix: [D, V] (W) or [V, D] (Wt) */
            if (tfm_npz_find(im->npz, "decoder_ff_logit_out_Wt", NULL))
                st = get_embedding(im, "decoder_ff_logit_out_Wt", p->output_proj, Vt, D);
            else
                st = get_linear_weight(im, "decoder_ff_logit_out_W", p->output_proj, D, Vt);
        }
    }
    /* a model trained with --output-omit-bias has none: zeros */
    if (st == TFM_OK && (tfm_npz_find(im->npz, "decoder_ff_logit_out_b", NULL) ||
                         !config_bool(im, "output-omit-bias")))
        st = get_vector(im, "decoder_ff_logit_out_b", p->output_bias, Vt);
    for (int v = Vt; v < c->tgt_vocab_size; v++) p->output_bias[v] = IMPORT_ABSENT_BIAS;

    for (int l = 0; st == TFM_OK && l < c->n_encoder_layers; l++) {
        const tfm_encoder_layer *L = &p->encoder_layers[l];
        snprintf(prefix, sizeof prefix, "encoder_l%d_self", l + 1);
        st = get_attention(im, prefix, &L->self_attn, D, pre, &L->self_attn_layer_norm);
        snprintf(prefix, sizeof prefix, "encoder_l%d_ffn", l + 1);
        if (st == TFM_OK)
            st = get_ffn(im, prefix, &L->fc1, &L->fc2, &L->final_layer_norm, D, F, pre);
    }
    for (int l = 0; st == TFM_OK && l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *L = &p->decoder_layers[l];
        snprintf(prefix, sizeof prefix, "decoder_l%d_self", l + 1);
        st = get_attention(im, prefix, &L->self_attn, D, pre, &L->self_attn_layer_norm);
        snprintf(prefix, sizeof prefix, "decoder_l%d_context", l + 1);
        if (st == TFM_OK)
            st = get_attention(im, prefix, &L->encoder_attn, D, pre, &L->encoder_attn_layer_norm);
        snprintf(prefix, sizeof prefix, "decoder_l%d_ffn", l + 1);
        if (st == TFM_OK)
            st = get_ffn(im, prefix, &L->fc1, &L->fc2, &L->final_layer_norm, D, F, pre);
    }
    if (st == TFM_OK && pre) st = get_norm(im, "encoder_top", false, &p->encoder_layer_norm, D);
    if (st == TFM_OK && pre) st = get_norm(im, "decoder_top", false, &p->decoder_layer_norm, D);
    if (st == TFM_OK && c->embedding_layer_norm)
        st = get_norm(im, "encoder_emb", true, &p->encoder_embedding_norm, D);
    if (st == TFM_OK && c->embedding_layer_norm)
        st = get_norm(im, "decoder_emb", true, &p->decoder_embedding_norm, D);
    return st;
}

/* ---- the whole ---------------------------------------------------------------------------- */

/* dim-vocabs: the source's and the target's sizes. */
static tfm_status vocab_sizes(importer *im, int *vs, int *vt)
{
    const tfm_yaml_node *n = tfm_yaml_get(im->root, "dim-vocabs");
    if (!n || n->kind != TFM_YAML_SEQUENCE || n->count < 2)
        return tfm_error_set(im->err, TFM_ERR_FORMAT,
                             "%s: special:model.yml: 'dim-vocabs' is not a list of two sizes",
                             im->npz_name);
    int64_t a, b;
    tfm_status st = tfm_yaml_int(n->children[0], 1, (1 << 24) - 2, &a, im->err);
    if (st == TFM_OK) st = tfm_yaml_int(n->children[n->count - 1], 1, (1 << 24) - 2, &b, im->err);
    if (st != TFM_OK) {
        tfm_error_prefix(im->err, "%s: special:model.yml: 'dim-vocabs'", im->npz_name);
        return st;
    }
    *vs = (int)a;
    *vt = (int)b;
    return TFM_OK;
}

tfm_status tfm_model_import_marian(const char *dir, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    importer im = {.dir = dir, .err = err};
    tfm_tensor_init(&im.t);
    tfm_yaml *decoder = NULL;
    tfm_vocab *src = NULL, *tgt = NULL;
    tfm_model *m = NULL;
    const char **models = NULL, **vocabs = NULL;
    size_t n_models = 0, n_vocabs = 0;
    char *path = import_path(dir, "decoder.yml"), *npz_path = NULL, *yml[2] = {NULL, NULL};
    char *spm[2] = {import_path(dir, "source.spm"), import_path(dir, "target.spm")};
    tfm_buf text;
    tfm_buf_init(&text);
    tfm_status st = path && spm[0] && spm[1] ? TFM_OK
                                             : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");

    if (st == TFM_OK && (st = tfm_yaml_load(path, &decoder, err)) != TFM_OK)
        tfm_error_prefix(err, "%s", path);
    if (st == TFM_OK) {
        const tfm_yaml_node *root = tfm_yaml_root(decoder);
        st = tfm_yaml_get_strings(root, "models", &models, &n_models, err);
        if (st == TFM_OK) st = tfm_yaml_get_strings(root, "vocabs", &vocabs, &n_vocabs, err);
        if (st == TFM_OK && (n_models == 0 || n_vocabs == 0))
            st = tfm_error_set(err, TFM_ERR_FORMAT, "'%s' names no %s", "models",
                               n_models == 0 ? "model" : "vocabulary");
        if (st != TFM_OK) tfm_error_prefix(err, "%s", path);
    }
    if (st == TFM_OK) {
        npz_path = import_path(dir, models[0]);
        yml[0] = import_path(dir, vocabs[0]);
        yml[1] = import_path(dir, vocabs[n_vocabs - 1]);
        for (size_t i = 0; i < n_vocabs; i++) {
            const size_t len = strlen(vocabs[i]);
            if (len > 4 && strcmp(vocabs[i] + len - 4, ".fsv") == 0)
                st = tfm_error_set(err, TFM_ERR_UNSUPPORTED,
                                   "%s: vocabulary '%s' is factored (.fsv): factored "
                                   "vocabularies are not supported",
                                   path, vocabs[i]);
        }
        if (st == TFM_OK && (!npz_path || !yml[0] || !yml[1]))
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    im.npz_name = npz_path;
    if (st == TFM_OK && (st = tfm_npz_open(npz_path, &im.npz, err)) != TFM_OK)
        tfm_error_prefix(err, "%s", npz_path);
    if (st == TFM_OK && (st = tfm_npz_read_text(im.npz, "special:model.yml", &text, err)) != TFM_OK)
        tfm_error_prefix(err, "%s", npz_path);
    if (st == TFM_OK && (st = tfm_yaml_parse(text.data, text.len, &im.config, err)) != TFM_OK)
        tfm_error_prefix(err, "%s: special:model.yml", npz_path);
    im.root = im.config ? tfm_yaml_root(im.config) : NULL;

    tfm_config c;
    tfm_config_preset("base", &c, NULL);
    c.dropout = 0.1f;
    c.positions = TFM_POS_SINUSOIDAL_CONCAT;
    c.output_bias = true;
    c.decoder_start_zero = true;
    c.layer_norm_eps = 1e-9f;
    int vs = 0, vt = 0;
    if (st == TFM_OK) st = read_config(&im, &c);
    if (st == TFM_OK) st = vocab_sizes(&im, &vs, &vt);
    int32_t eos[2], unk[2];
    tfm_yaml_vocab *yv[2] = {NULL, NULL};
    int ns = 0, nt = 0;
    if (st == TFM_OK) st = read_yml(&im, yml[0], &yv[0], &ns);
    if (st == TFM_OK) st = read_yml(&im, yml[1], &yv[1], &nt);
    if (st == TFM_OK && (ns != vs || nt != vt))
        st = tfm_error_set(err, TFM_ERR_FORMAT,
                           "the vocabularies hold %d and %d pieces, but the model's dim-vocabs "
                           "says %d and %d (%s, %s)",
                           ns, nt, vs, vt, yml[0], yml[1]);
    const int n_real = vs > vt ? vs : vt;
    if (st == TFM_OK)
        st = import_side_vocab(yv[0]->pieces, yv[0]->lens, yv[0]->count, yml[0], spm[0], n_real,
                               &src, &eos[0], &unk[0], err);
    if (st == TFM_OK)
        st = import_side_vocab(yv[1]->pieces, yv[1]->lens, yv[1]->count, yml[1], spm[1], n_real,
                               &tgt, &eos[1], &unk[1], err);
    tfm_yaml_vocab_free(yv[0]);
    tfm_yaml_vocab_free(yv[1]);
    if (st == TFM_OK && (eos[0] != eos[1] || unk[0] != unk[1]))
        st = tfm_error_set(err, TFM_ERR_FORMAT, "%s and %s put </s> and <unk> at different ids",
                           yml[0], yml[1]);
    if (st == TFM_OK && c.shared_embeddings && vs != vt)
        st = tfm_error_set(err, TFM_ERR_FORMAT,
                           "%s: tied-embeddings-all, but the vocabularies hold %d and %d pieces",
                           npz_path, vs, vt);
    if (st == TFM_OK) import_specials(&c, n_real, eos[1], unk[1]);
    if (st == TFM_OK && (st = tfm_config_validate(&c, err)) != TFM_OK)
        tfm_error_prefix(err, "%s", npz_path);
    if (st == TFM_OK) st = tfm_model_create_sides(&c, src, tgt, 0, &m, err);
    if (st == TFM_OK) {
        memset(m->data, 0, tfm_params_count(&c) * sizeof *m->data);
        st = read_weights(&im, m, vs, vt);
    }
    if (st == TFM_OK) {
        *out = m;
        m = NULL;
    }
    tfm_model_free(m);
    tfm_vocab_free(src);
    tfm_vocab_free(tgt);
    tfm_tensor_free(&im.t);
    tfm_yaml_free(im.config);
    tfm_npz_free(im.npz);
    tfm_yaml_free(decoder);
    tfm_buf_free(&text);
    free(models);
    free(vocabs);
    free(path);
    free(npz_path);
    free(yml[0]);
    free(yml[1]);
    free(spm[0]);
    free(spm[1]);
    return st;
}
