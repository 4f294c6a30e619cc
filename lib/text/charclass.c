/* charclass.c - which characters may share a piece, and which may be in a
 * piece at all.
 *
 * The classes follow SentencePiece's split_by_unicode_script and
 * split_by_number: a learnt piece never mixes letters of two scripts, nor
 * digits with anything but digits, nor letters with punctuation.  The
 * scripts are decided by Unicode block ranges, which is coarse but stable
 * and needs no script table: utf8proc gives the general category (letter,
 * mark, number, punctuation, ...) and the block ranges below give the
 * script of letters and marks. */
#include <utf8proc.h>

#include "tfm/text.h"

typedef struct script_range {
    int32_t first, last;
    tfm_char_class cls;
} script_range;

/* Letters and marks by block, sorted by first code point.  Ranges not listed
 * are TFM_CLASS_OTHER_SCRIPT keyed by block. */
static const script_range script_ranges[] = {
    {0x0041, 0x005A, TFM_CLASS_LATIN},
    {0x0061, 0x007A, TFM_CLASS_LATIN},
    {0x00AA, 0x00AA, TFM_CLASS_LATIN},
    {0x00B5, 0x00B5, TFM_CLASS_GREEK},   /* micro sign, a Greek mu */
    {0x00BA, 0x00BA, TFM_CLASS_LATIN},
    {0x00C0, 0x02AF, TFM_CLASS_LATIN},   /* Latin-1, Extended-A/B, IPA */
    {0x02B0, 0x02B8, TFM_CLASS_LATIN},   /* modifier letters of Latin script */
    {0x02B9, 0x02FF, TFM_CLASS_COMMON},  /* other modifier letters */
    /* Combining diacritical marks follow whatever letter they accent. */
    {0x0300, 0x036F, TFM_CLASS_ANY},
    {0x0370, 0x03FF, TFM_CLASS_GREEK},
    {0x0400, 0x052F, TFM_CLASS_CYRILLIC},
    {0x0530, 0x058F, TFM_CLASS_ARMENIAN},
    {0x0590, 0x05FF, TFM_CLASS_HEBREW},
    {0x0600, 0x06FF, TFM_CLASS_ARABIC},
    {0x0750, 0x077F, TFM_CLASS_ARABIC},  /* Arabic Supplement */
    {0x0870, 0x08FF, TFM_CLASS_ARABIC},  /* Arabic Extended-B, -A */
    {0x0900, 0x0DFF, TFM_CLASS_INDIC},   /* Devanagari ... Sinhala, one key per block */
    {0x0E00, 0x0E7F, TFM_CLASS_THAI},
    {0x1100, 0x11FF, TFM_CLASS_HANGUL},  /* Jamo */
    {0x1AB0, 0x1AFF, TFM_CLASS_ANY},     /* combining diacritical marks extended */
    {0x1C80, 0x1C8F, TFM_CLASS_CYRILLIC},
    {0x1D00, 0x1DBF, TFM_CLASS_LATIN},   /* phonetic extensions */
    {0x1DC0, 0x1DFF, TFM_CLASS_ANY},     /* combining diacritical marks supplement */
    {0x1E00, 0x1EFF, TFM_CLASS_LATIN},   /* Latin Extended Additional */
    {0x1F00, 0x1FFF, TFM_CLASS_GREEK},   /* Greek Extended */
    {0x20D0, 0x20FF, TFM_CLASS_ANY},     /* combining marks for symbols */
    {0x2C60, 0x2C7F, TFM_CLASS_LATIN},   /* Latin Extended-C */
    {0x2DE0, 0x2DFF, TFM_CLASS_CYRILLIC},
    {0x2E80, 0x2FDF, TFM_CLASS_HAN},     /* radicals */
    {0x3005, 0x3007, TFM_CLASS_HAN},
    {0x3021, 0x3029, TFM_CLASS_HAN},
    {0x3031, 0x3035, TFM_CLASS_HAN},     /* kana repeat marks */
    {0x3038, 0x303C, TFM_CLASS_HAN},
    {0x3040, 0x30FF, TFM_CLASS_HAN},     /* Hiragana, Katakana (U+30FC included) */
    {0x3130, 0x318F, TFM_CLASS_HANGUL},  /* compatibility Jamo */
    {0x31F0, 0x31FF, TFM_CLASS_HAN},
    {0x3400, 0x4DBF, TFM_CLASS_HAN},
    {0x4E00, 0x9FFF, TFM_CLASS_HAN},
    {0xA640, 0xA69F, TFM_CLASS_CYRILLIC},
    {0xA720, 0xA7FF, TFM_CLASS_LATIN},   /* Latin Extended-D */
    {0xA960, 0xA97F, TFM_CLASS_HANGUL},
    {0xAB30, 0xAB6F, TFM_CLASS_LATIN},   /* Latin Extended-E */
    {0xAC00, 0xD7FF, TFM_CLASS_HANGUL},  /* syllables, Jamo Extended-B */
    {0xF900, 0xFAFF, TFM_CLASS_HAN},
    {0xFB00, 0xFB06, TFM_CLASS_LATIN},   /* ligatures ff, fi, ... */
    {0xFB13, 0xFB17, TFM_CLASS_ARMENIAN},
    {0xFB1D, 0xFB4F, TFM_CLASS_HEBREW},
    {0xFB50, 0xFDFF, TFM_CLASS_ARABIC},  /* presentation forms A */
    {0xFE00, 0xFE0F, TFM_CLASS_ANY},     /* variation selectors (emoji style) */
    {0xFE20, 0xFE2F, TFM_CLASS_ANY},     /* combining half marks */
    {0xFE70, 0xFEFF, TFM_CLASS_ARABIC},  /* presentation forms B */
    {0xFF21, 0xFF3A, TFM_CLASS_LATIN},   /* full-width Latin */
    {0xFF41, 0xFF5A, TFM_CLASS_LATIN},
    {0xFF66, 0xFF9F, TFM_CLASS_HAN},     /* half-width Katakana */
    {0xFFA0, 0xFFDC, TFM_CLASS_HANGUL},  /* half-width Hangul */
    {0x20000, 0x3FFFF, TFM_CLASS_HAN},   /* CJK extensions B ... */
    {0xE0100, 0xE01EF, TFM_CLASS_ANY},   /* variation selectors supplement */
};

static tfm_char_class script_of_letter(int32_t cp)
{
    size_t lo = 0, hi = sizeof script_ranges / sizeof script_ranges[0];
    while (lo < hi) { /* binary search for the range holding cp */
        size_t mid = (lo + hi) / 2;
        if (cp > script_ranges[mid].last)
            lo = mid + 1;
        else if (cp < script_ranges[mid].first)
            hi = mid;
        else
            return script_ranges[mid].cls;
    }
    return TFM_CLASS_OTHER_SCRIPT;
}

tfm_char_class tfm_char_class_of(int32_t cp)
{
    if (cp < 0x80) { /* the common case, without a table look-up */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return TFM_CLASS_LATIN;
        if (cp >= '0' && cp <= '9') return TFM_CLASS_NUMBER;
        return TFM_CLASS_COMMON;
    }
    if (cp == 0x2581) return TFM_CLASS_ANY;
    if (cp > 0x10FFFF) return TFM_CLASS_COMMON;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return TFM_CLASS_NUMBER;
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
        return script_of_letter(cp);
    case UTF8PROC_CATEGORY_CF:
        /* ZWJ and ZWNJ sit inside words and emoji sequences. */
        return (cp == 0x200C || cp == 0x200D) ? TFM_CLASS_ANY : TFM_CLASS_COMMON;
    default:
        return TFM_CLASS_COMMON;
    }
}

uint32_t tfm_char_script_key(int32_t cp)
{
    tfm_char_class c = tfm_char_class_of(cp);
    uint32_t block = 0;
    /* Indic blocks are 128 code points each and aligned, so cp >> 7 names
     * the block; for other scripts it is a coarse but stable stand-in. */
    if (c == TFM_CLASS_INDIC || c == TFM_CLASS_OTHER_SCRIPT) block = (uint32_t)cp >> 7;
    return ((uint32_t)c << 24) | block;
}

bool tfm_char_pieceable(int32_t cp)
{
    if (cp < 0x80) return cp > 0x20 && cp != 0x7F; /* not controls, not the space */
    if (cp == 0x2581 || cp == 0xFFFD || cp > 0x10FFFF) return false;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CC: /* controls, tab, newline, NEL */
    case UTF8PROC_CATEGORY_ZS: /* spaces other than U+0020 */
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_CN: /* unassigned and noncharacters */
    case UTF8PROC_CATEGORY_CS: /* surrogates */
    case UTF8PROC_CATEGORY_CO: /* private use */
        return false;
    default:
        return true;
    }
}
