/* model_packed.c - a model's weights packed for the kernels of
 * lib/nn/packed.c (float32) and lib/nn/quant.c (int8, bf16): every linear
 * layer of the encoder and the decoder and the output projection, packed
 * once (tfm_model_pack_for_encoding / _for_decoding), and which kernel
 * runs them and why (decode -v). */
#include <assert.h>
#include <stdlib.h>

#include "model/model_internal.h" /* the quantized matrices */
#include "nn/layers.h"

/* ---- a model's weights ---------------------------------------------------- */

static void packed_layers_free(nn_packed_layer *layers, int n)
{
    for (int l = 0; layers && l < n; l++) {
        nn_packed_layer *L = &layers[l];
        nn_packed_linear *all[] = {&L->self_qkv, &L->self_out, &L->cross_q, &L->cross_kv,
                                   &L->cross_out, &L->fc1, &L->fc2};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) nn_packed_linear_free(all[i]);
    }
    free(layers);
}

void tfm_packed_model_free(tfm_packed_model *pm)
{
    if (!pm) return;
    packed_layers_free(pm->encoder, pm->n_encoder_layers);
    packed_layers_free(pm->decoder, pm->n_decoder_layers);
    nn_packed_linear_free(&pm->output);
    free(pm);
}

/* Packs the linear layer W [N, K] (weight, at its place in m's buffer) and
 * bias [N] in m's compute type: float32 from the floats, int8 or bf16 from
 * the model's quantized values (tfm_model_set_compute_type quantized a
 * float32 model first); or, when m's file holds the layer's panels in that
 * type (a packed model file, model_panels.c), points at them in place. */
static tfm_status pack_weight(const tfm_model *m, nn_packed_linear *p, const float *weight,
                              const float *bias, int N, int K)
{
    const tfm_file_panel *in_file = tfm_file_panels_find(m->file_panels, m->compute, weight);
    if (in_file) {
        const nn_kernel kernel = m->compute == TFM_COMPUTE_FLOAT32 ? nn_packed_best_kernel()
                                                                    : nn_quant_best_kernel(m->compute);
        return nn_borrow_panels(p, in_file->panels, in_file->scale, in_file->sums, bias, N, K,
                                kernel);
    }
    if (m->compute == TFM_COMPUTE_FLOAT32) {
        if (!m->float_weights) return TFM_ERR_ARG; /* its panels are in the file alone */
        return nn_pack_linear(p, weight, bias, N, K);
    }
    const nn_kernel kernel = nn_quant_best_kernel(m->compute);
    tfm_quantized_view v;
    if (!m->quantized || tfm_quantized_type(m->quantized) != m->compute ||
        !tfm_quantized_find(m->quantized, (size_t)(weight - m->data), &v) || (!v.q && !v.bf16))
        return TFM_ERR_ARG; /* released (tfm_model_release_quantized); else
                               tfm_model_set_compute_type prevents it */
    return m->compute == TFM_COMPUTE_INT8 ? nn_pack_int8(p, v.q, v.scale, bias, N, K, kernel)
                                           : nn_pack_bf16(p, v.bf16, bias, N, K, kernel);
}

/* Packs one layer (tfm_layer_matrices). */
static tfm_status pack_layer(const tfm_model *m, nn_packed_layer *L, const tfm_attention *self,
                             const tfm_attention *cross, const tfm_linear *fc1,
                             const tfm_linear *fc2, int D, int F)
{
    tfm_layer_matrix all[7];
    const int n = tfm_layer_matrices(L, self, cross, fc1, fc2, D, F, all);
    tfm_status st = TFM_OK;
    for (int i = 0; i < n && st == TFM_OK; i++)
        st = pack_weight(m, all[i].dst, all[i].weight, all[i].bias, all[i].N, all[i].K);
    return st;
}

/* The scratch a layer's products need at most (nn_packed_scratch_bytes). */
static size_t layer_scratch_bytes(const nn_packed_layer *L)
{
    const nn_packed_linear *all[] = {&L->self_qkv, &L->self_out, &L->cross_q, &L->cross_kv,
                                     &L->cross_out, &L->fc1, &L->fc2};
    size_t most = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        size_t b = nn_packed_scratch_bytes(all[i]);
        most = b > most ? b : most;
    }
    return most;
}

/* The model's packed weights, created empty on first use; NULL when float32
 * has no packed kernel on this CPU or memory ran out (*st says which). */
static tfm_packed_model *packed_model(tfm_model *m, tfm_status *st)
{
    *st = TFM_OK;
    if (!m->packed &&
        (m->compute != TFM_COMPUTE_FLOAT32 || nn_packed_best_kernel() != NN_KERNEL_SGEMM)) {
        m->packed = calloc(1, sizeof *m->packed);
        if (!m->packed) *st = TFM_ERR_NOMEM;
    }
    return m->packed;
}

/* Packs the layers of one stack: n layers, of the encoder (enc) or the
 * decoder (dec). */
static tfm_status pack_stack(tfm_model *m, const tfm_encoder_layer *enc,
                             const tfm_decoder_layer *dec, int n, nn_packed_layer **out,
                             size_t *scratch)
{
    const tfm_config *c = &m->config;
    const int D = c->d_model;
    nn_packed_layer *layers = calloc((size_t)n + 1, sizeof *layers);
    tfm_status st = layers ? TFM_OK : TFM_ERR_NOMEM;
    for (int l = 0; l < n && st == TFM_OK; l++) {
        if (enc) {
            st = pack_layer(m, &layers[l], &enc[l].self_attn, NULL, &enc[l].fc1, &enc[l].fc2, D,
                            c->d_ff);
        } else {
            /* k and v of encoder-decoder attention lie in a row too */
            assert(dec[l].encoder_attn.v_proj.weight ==
                   dec[l].encoder_attn.k_proj.weight + (size_t)D * D);
            assert(dec[l].encoder_attn.v_proj.bias == dec[l].encoder_attn.k_proj.bias + D);
            st = pack_layer(m, &layers[l], &dec[l].self_attn, &dec[l].encoder_attn, &dec[l].fc1,
                            &dec[l].fc2, D, c->d_ff);
        }
        size_t b = layer_scratch_bytes(&layers[l]);
        *scratch = b > *scratch ? b : *scratch;
    }
    if (st != TFM_OK) {
        packed_layers_free(layers, n);
        layers = NULL;
    }
    *out = layers;
    return st;
}

/* The message of a failed packing of part ("the encoder"). */
static tfm_status pack_failed(const tfm_model *m, tfm_status st, const char *part, tfm_error *err)
{
    if (st == TFM_ERR_NOMEM) return tfm_error_set(err, st, "out of memory packing %s", part);
    return tfm_error_set(err, st, "packing %s: the model holds no %s weights (any more)", part,
                         tfm_compute_type_name(m->compute));
}

tfm_status tfm_model_pack_for_encoding(tfm_model *m, tfm_error *err)
{
    tfm_status st;
    tfm_packed_model *pm = packed_model(m, &st);
    if (st != TFM_OK) return pack_failed(m, st, "the encoder", err);
    if (!pm || pm->encoder) return TFM_OK; /* no kernel, or packed already */
    const int NL = m->config.n_encoder_layers;
    st = pack_stack(m, m->params.encoder_layers, NULL, NL, &pm->encoder, &pm->scratch_bytes);
    if (st != TFM_OK) return pack_failed(m, st, "the encoder", err);
    pm->n_encoder_layers = NL;
    return TFM_OK;
}

tfm_status tfm_model_pack_for_decoding(tfm_model *m, tfm_error *err)
{
    tfm_status st;
    tfm_packed_model *pm = packed_model(m, &st);
    if (st != TFM_OK) return pack_failed(m, st, "the decoder", err);
    if (!pm || pm->decoder) return TFM_OK; /* no kernel, or packed already */
    const tfm_config *c = &m->config;
    const int NL = c->n_decoder_layers;
    nn_packed_layer *layers;
    st = pack_stack(m, NULL, m->params.decoder_layers, NL, &layers, &pm->scratch_bytes);
    if (st == TFM_OK)
        st = pack_weight(m, &pm->output, m->params.output_proj, m->params.output_bias,
                         c->tgt_vocab_size, c->d_model);
    if (st != TFM_OK) {
        packed_layers_free(layers, NL);
        nn_packed_linear_free(&pm->output);
        return pack_failed(m, st, "the decoder", err);
    }
    size_t b = nn_packed_scratch_bytes(&pm->output);
    pm->scratch_bytes = b > pm->scratch_bytes ? b : pm->scratch_bytes;
    pm->decoder = layers;
    pm->n_decoder_layers = NL;
    return TFM_OK;
}

/* The kernel of a model's packed weights (those of its first packed layer),
 * NN_KERNEL_SGEMM when none are packed. */
static nn_kernel model_kernel(const tfm_model *m)
{
    const tfm_packed_model *pm = m->packed;
    const nn_packed_layer *L = !pm ? NULL : pm->encoder ? pm->encoder : pm->decoder;
    return L ? L->self_qkv.kernel : NN_KERNEL_SGEMM;
}

const char *tfm_model_kernel_name(const tfm_model *m)
{
    switch (model_kernel(m)) {
    case NN_KERNEL_AVX512: return "AVX-512";
    case NN_KERNEL_AVX2: return "AVX2";
    case NN_KERNEL_INT8_VNNI: return "int8 AVX-512 VNNI";
    case NN_KERNEL_INT8_AVX512BW: return "int8 AVX-512BW";
    case NN_KERNEL_INT8_AVX2: return "int8 AVX2";
    case NN_KERNEL_INT8_C: return "int8 C";
    case NN_KERNEL_BF16_AVX512: return "bf16 AVX-512 BF16";
    case NN_KERNEL_BF16_AVX512BW: return "bf16 AVX-512BW (widened to float32)";
    case NN_KERNEL_BF16_AVX2: return "bf16 AVX2 (widened to float32)";
    case NN_KERNEL_BF16_C: return "bf16 C";
    case NN_KERNEL_SGEMM: break;
    }
    return "OpenBLAS sgemm";
}

const char *tfm_model_panels_source(const tfm_model *m)
{
    if (m->file_panels) return "weights: the panels of the packed model file, read in place";
    if (model_kernel(m) == NN_KERNEL_SGEMM) return "weights: as the file holds them (sgemm)";
    return "weights: packed at start ('train pack' writes a file whose panels are read in place)";
}

const char *tfm_model_kernel_reason(const tfm_model *m)
{
    if (nn_isa_asked_for() != NN_ASKED_ANY) return "TFM_ISA in the environment asks for no more";
    switch (model_kernel(m)) {
    case NN_KERNEL_AVX512: return "the CPU has AVX-512";
    case NN_KERNEL_AVX2: return "the CPU has AVX2 and FMA but not AVX-512";
    case NN_KERNEL_INT8_VNNI: return "the CPU has AVX-512 VNNI (vpdpbusd)";
    case NN_KERNEL_INT8_AVX512BW:
        return "the CPU has AVX-512BW but not VNNI (vpmaddubsw, 64 bytes at a time)";
    case NN_KERNEL_INT8_AVX2:
        return "the CPU has AVX2 but not AVX-512BW (vpmaddubsw, 32 bytes at a time; int8 "
               "measured faster than float32 at batch 1 and 64 there)";
    case NN_KERNEL_BF16_AVX512: return "the CPU has AVX-512 BF16 (vdpbf16ps)";
    case NN_KERNEL_BF16_AVX512BW: return "the CPU has AVX-512BW but not AVX-512 BF16";
    case NN_KERNEL_BF16_AVX2: return "the CPU has AVX2 but not AVX-512BW";
    case NN_KERNEL_INT8_C:
    case NN_KERNEL_BF16_C: return "the CPU has no AVX2 (plain C, the reference kernel)";
    case NN_KERNEL_SGEMM: break;
    }
    return "no weights are packed (a CPU without AVX2 and FMA, or nothing to pack)";
}

void tfm_model_products_helper(tfm_helper *helper)
{
    nn_packed_set_helper(helper);
}
