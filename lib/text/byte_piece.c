/* byte_piece.c - the byte pieces "<0xNN>" of byte fallback, as SentencePiece
 * spells them: which byte such a piece stands for.  A file of its own
 * because both the vocabulary (vocab.c) and the SentencePiece model
 * (spm_model.c) read them, and the vocabulary also calls the model. */
#include <string.h>

#include "text/encode_internal.h"

int tfm_byte_of_piece(const char *text, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(text, "<0x", 3) != 0 || text[5] != '>') return -1;
    const char *hi = text[3] ? memchr(hex, text[3], 16) : NULL;
    const char *lo = text[4] ? memchr(hex, text[4], 16) : NULL;
    if (!hi || !lo) return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}
