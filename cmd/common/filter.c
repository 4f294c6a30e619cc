/* filter.c - the command line of the batch filters (see filter.h). */
#include <string.h>

#include "filter.h"

cli_batch_options cli_batch_defaults(int batch_size, int batch_tokens)
{
    int threads = tfm_cpu_count();
    return (cli_batch_options){.batch_size = batch_size, .batch_tokens = batch_tokens,
                               .threads = threads < CLI_MAX_THREADS ? threads : CLI_MAX_THREADS,
                               .compute = TFM_COMPUTE_DEFAULT};
}

bool cli_batch_option(int c, const char *arg, cli_batch_options *o)
{
    switch (c) {
    case CLI_OPT_BATCH_SIZE: o->batch_size = (int)cli_parse_int("--batch-size", arg, 1, 1 << 20); break;
    case CLI_OPT_BATCH_TOKENS:
        o->batch_tokens = (int)cli_parse_int("--batch-tokens", arg, 1, 1 << 26);
        break;
    case CLI_OPT_THREADS: o->threads = (int)cli_parse_int("--threads", arg, 1, CLI_MAX_THREADS); break;
    case CLI_OPT_MAX_INPUT:
        o->max_input_length = (int)cli_parse_int("--max-input-length", arg, 1, 1 << 24);
        break;
    case CLI_OPT_COMPUTE_TYPE:
        if (!tfm_compute_type_parse(arg, &o->compute))
            cli_usage_error("--compute-type: '%s' is not one of: float32, int8, bf16, default", arg);
        break;
    default: return false;
    }
    return true;
}

tfm_model *cli_load_model_for(const char *path, const cli_batch_options *o)
{
    tfm_model *model;
    tfm_error err;
    cli_warn_unknown_isa();
    if (tfm_model_load_for_inference(path, o->compute, &model, &err) != TFM_OK)
        cli_fail(strstr(err.msg, path) ? NULL : path, 0, "%s", err.msg);
    return model;
}

int cli_max_input(const cli_batch_options *o, const tfm_model *m)
{
    const int max_positions = m->config.max_positions;
    if (o->max_input_length > max_positions)
        cli_usage_error("--max-input-length %d: the model takes at most %d positions",
                        o->max_input_length, max_positions);
    return o->max_input_length > 0 ? o->max_input_length : max_positions;
}

static void flush_output(void *ctx)
{
    (void)ctx;
    cli_flush();
}

tfm_batch_loop cli_batch_loop(const cli_batch_options *o, void *ctx)
{
    return (tfm_batch_loop){
        .ctx = ctx,
        .max_items = (size_t)o->batch_size * (size_t)o->threads,
        .max_cost = (size_t)o->batch_tokens * (size_t)o->threads,
        .threads = o->threads,
        .flush = flush_output,
    };
}

tfm_helper *cli_products_helper(const cli_batch_options *o)
{
    if (o->threads < 2) return NULL;
    tfm_helper *helper;
    tfm_error err;
    if (tfm_helper_create(&helper, &err) != TFM_OK) cli_fail(NULL, 0, "%s", err.msg);
    tfm_model_products_helper(helper);
    return helper;
}

void cli_products_helper_free(tfm_helper *helper)
{
    tfm_model_products_helper(NULL);
    tfm_helper_free(helper);
}

void cli_each_input(int argc, char **argv, void (*fn)(void *ctx, const char *name), void *ctx)
{
    if (optind >= argc) fn(ctx, "-");
    for (int i = optind; i < argc; i++) fn(ctx, argv[i]);
}

