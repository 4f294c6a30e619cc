/* fuzz_ids.c - libFuzzer target for the id-line parser: whatever the bytes,
 * parsing returns a status, and a line that parses formats back to ids that
 * parse to the same ids. */
#include <stdlib.h>
#include <string.h>

#include "tfm.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tfm_ids ids, again;
    tfm_ids_init(&ids);
    tfm_ids_init(&again);
    tfm_error err;
    int32_t limit = size > 0 ? (int32_t)(data[0] * 1000) : 0;
    if (tfm_ids_parse((const char *)data, size, limit, &ids, &err) == TFM_OK) {
        tfm_buf text;
        tfm_buf_init(&text);
        if (tfm_ids_format(ids.data, ids.len, &text) != TFM_OK) abort();
        if (tfm_ids_parse(text.data, text.len, limit, &again, &err) != TFM_OK) abort();
        if (again.len != ids.len || (ids.len && memcmp(again.data, ids.data, ids.len * 4))) abort();
        tfm_buf_free(&text);
    } else if (err.msg[0] == 0) {
        abort(); /* every failure must say what is wrong */
    }
    tfm_ids_free(&ids);
    tfm_ids_free(&again);
    return 0;
}
