/* model_matrices.c - the matrices of a model that the inference kernels
 * multiply by, as they take them (lib/nn/packed.c, quant.c), and the names
 * of a model's tensors by their places: what packing a model in memory
 * (model_packed.c), reading a packed model file (model_panels.c) and
 * writing one (model_pack_file.c) walk alike. */
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "nn/layers.h"

int tfm_layer_matrices(nn_packed_layer *L, const tfm_attention *self, const tfm_attention *cross,
                       const tfm_linear *fc1, const tfm_linear *fc2, int D, int F,
                       tfm_layer_matrix out[7])
{
    int n = 0;
    const tfm_linear *q = &self->q_proj, *o = &self->out_proj;
    out[n++] = (tfm_layer_matrix){&L->self_qkv, q->weight, q->bias, 3 * D, D};
    out[n++] = (tfm_layer_matrix){&L->self_out, o->weight, o->bias, D, D};
    if (cross) {
        const tfm_linear *cq = &cross->q_proj, *ck = &cross->k_proj, *co = &cross->out_proj;
        out[n++] = (tfm_layer_matrix){&L->cross_q, cq->weight, cq->bias, D, D};
        out[n++] = (tfm_layer_matrix){&L->cross_kv, ck->weight, ck->bias, 2 * D, D};
        out[n++] = (tfm_layer_matrix){&L->cross_out, co->weight, co->bias, D, D};
    }
    out[n++] = (tfm_layer_matrix){&L->fc1, fc1->weight, fc1->bias, F, D};
    out[n++] = (tfm_layer_matrix){&L->fc2, fc2->weight, fc2->bias, D, F};
    return n;
}

void tfm_model_visit_packed(const tfm_model *m, tfm_packed_visit_fn fn, void *ctx)
{
    const tfm_config *c = &m->config;
    const tfm_params *p = &m->params;
    const int D = c->d_model, F = c->d_ff;
    nn_packed_layer unused;
    tfm_layer_matrix all[7];
    for (int l = 0; l < c->n_encoder_layers; l++) {
        const tfm_encoder_layer *E = &p->encoder_layers[l];
        const int n =
            tfm_layer_matrices(&unused, &E->self_attn, NULL, &E->fc1, &E->fc2, D, F, all);
        for (int i = 0; i < n; i++) fn(ctx, all[i].weight, all[i].N, all[i].K);
    }
    for (int l = 0; l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *T = &p->decoder_layers[l];
        const int n = tfm_layer_matrices(&unused, &T->self_attn, &T->encoder_attn, &T->fc1,
                                         &T->fc2, D, F, all);
        for (int i = 0; i < n; i++) fn(ctx, all[i].weight, all[i].N, all[i].K);
    }
    fn(ctx, p->output_proj, c->tgt_vocab_size, D);
}

static void add_name(void *ctx, const char *name, int ndim, const int64_t *shape, float *data)
{
    (void)ndim;
    (void)shape;
    tfm_tensor_names *t = ctx;
    if (t->out_of_memory) return;
    const float **d = realloc(t->data, (t->n + 1) * sizeof *d);
    if (d) t->data = d;
    char **nm = realloc(t->name, (t->n + 1) * sizeof *nm);
    if (nm) t->name = nm;
    char *copy = strdup(name);
    if (!d || !nm || !copy) {
        free(copy);
        t->out_of_memory = true;
        return;
    }
    t->data[t->n] = data;
    t->name[t->n++] = copy;
}

void tfm_tensor_names_free(tfm_tensor_names *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->name[i]);
    free(t->name);
    free(t->data);
}

const char *tfm_tensor_name_at(const tfm_tensor_names *t, const float *weight)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->data[i] == weight) return t->name[i];
    return NULL;
}

bool tfm_tensor_names_of(const tfm_model *m, tfm_tensor_names *t)
{
    *t = (tfm_tensor_names){0};
    tfm_params_visit(&m->config, &m->params, add_name, t);
    if (!t->out_of_memory) return true;
    tfm_tensor_names_free(t);
    return false;
}

int tfm_model_embeddings(const tfm_model *m, const float *at[2], int rows[2])
{
    at[0] = m->params.src_embed;
    rows[0] = m->config.src_vocab_size;
    if (m->params.tgt_embed == at[0]) return 1;
    at[1] = m->params.tgt_embed;
    rows[1] = m->config.tgt_vocab_size;
    return 2;
}
