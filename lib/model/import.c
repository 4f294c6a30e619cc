/* import.c - tfm_model_import: the importer of a model from elsewhere
 * chosen by what its directory holds, decoder.yml (OPUS-MT: import_marian.c)
 * or config.json (Hugging Face: import_hf.c). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/model_internal.h"

/* True when dir/name can be opened. */
static bool has_file(const char *dir, const char *name)
{
    char *path = import_path(dir, name);
    FILE *fp = path ? fopen(path, "rb") : NULL;
    free(path);
    if (fp) fclose(fp);
    return fp != NULL;
}

tfm_status tfm_model_import(const char *dir, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    if (has_file(dir, "decoder.yml")) return tfm_model_import_marian(dir, out, err);
    if (has_file(dir, "config.json")) return tfm_model_import_hf(dir, out, err);
    return tfm_error_set(err, TFM_ERR_IO, "%s: neither decoder.yml (an OPUS-MT model) nor "
                                          "config.json (a Hugging Face one) is there", dir);
}
