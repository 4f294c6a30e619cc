# dates.awk - the sample task of `make demo`: dates written in English,
# French and German, in words or in figures, translated to one form,
# DD/MM/YYYY.  For example
#
#   le vingt et un novembre deux mille vingt-six          ->  21/11/2026
#   the twenty-first of November, two thousand twenty-six ->  21/11/2026
#   der einundzwanzigste November zweitausendsechsundzwanzig -> 21/11/2026
#   2026-11-21                                            ->  21/11/2026
#
# A small model learns it in minutes on two CPUs, and its attention means
# something: the day's digits look at the day's words, the month's at the
# month, the year's at the year, whatever order the source has them in.
#
# Every date from 1 January 1900 to 31 December 2099 is put, by a seeded
# draw, on the training side or (one in ten) on the held-out side, so no
# held-out date is ever trained on, in any form: a model that does well on
# the held-out files has learnt to read numbers, not remembered dates.  Each
# line takes one of the nine forms of a date below, drawn at random.
#
# Usage:
#   awk -f dates.awk -v out=DIR [-v train=N] [-v dev=N] [-v test=N]
#       [-v seed=S] [-v forms=K,K,...]
# writes DIR/train.src and DIR/train.tgt (N lines, default 20000), and dev.*
# and test.* (default 500 lines each, all distinct held-out dates) into DIR,
# which must exist.  forms keeps only the forms numbered K (0 to 8, as in
# form() below; default all): the end-to-end test learns an easier task of a
# few forms in seconds.  The files beside this script were made with
#   awk -f tests/data/demo/dates.awk -v out=tests/data/demo
# and the test (tests/cli/test_pipeline.sh) checks that it still makes them.
# The draws come from the generator below, not from awk's rand(), whose
# sequence differs from one awk to another, so any awk writes the same bytes.

# Park and Miller's minimal standard generator: every product stays below
# 2^53, so doubles hold it exactly in any awk.
function rnd() { rng_state = (rng_state * 16807) % 2147483647; return rng_state / 2147483647 }
function pick(n) { return int(rnd() * n) }

function two(n) { return (n < 10 ? "0" : "") n }

# ---- English --------------------------------------------------------------
function en_card(n) {
    if (n < 20) return EN_ONE[n]
    return EN_TEN[int(n / 10)] (n % 10 ? "-" EN_ONE[n % 10] : "")
}
function en_ord(n) {
    if (n % 10 == 0 || n < 20) {
        if (n in EN_ORD) return EN_ORD[n]
        return substr(EN_TEN[n / 10], 1, length(EN_TEN[n / 10]) - 1) "ieth"
    }
    return EN_TEN[int(n / 10)] "-" EN_ORD[n % 10]
}
function en_year(y,   c, r) {
    c = int(y / 100); r = y % 100
    if (c == 19) return "nineteen " (r == 0 ? "hundred" : r < 10 ? "oh " EN_ONE[r] : en_card(r))
    return "two thousand" (r ? " " en_card(r) : "")
}

# ---- French -----------------------------------------------------------------
function fr_card(n,   t, u) {
    if (n <= 16) return FR_ONE[n]
    if (n < 20) return "dix-" FR_ONE[n - 10]
    t = int(n / 10); u = n % 10
    if (t == 7 || t == 9) {            # soixante-dix, quatre-vingt-dix: 60 or 80 + 10..19
        if (t == 7 && u == 1) return "soixante et onze"
        return FR_TEN[t - 1] "-" fr_card(10 + u)
    }
    if (t == 8) return u ? "quatre-vingt-" FR_ONE[u] : "quatre-vingts"
    if (u == 0) return FR_TEN[t]
    if (u == 1) return FR_TEN[t] " et un"
    return FR_TEN[t] "-" FR_ONE[u]
}
function fr_year(y,   r) {
    r = y % 100
    if (y < 2000) return "mille neuf cent" (r ? " " fr_card(r) : "")
    return "deux mille" (r ? " " fr_card(r) : "")
}

# ---- German -------------------------------------------------------------------
function de_card(n,   u) {             # as a part of a compound (1 is "ein")
    if (n < 20) return DE_ONE[n]
    u = n % 10
    return (u ? (u == 1 ? "ein" : DE_ONE[u]) "und" : "") DE_TEN[int(n / 10)]
}
function de_ord(n) {
    if (n in DE_ORD) return DE_ORD[n]
    return de_card(n) (n < 20 ? "te" : "ste")
}
function de_year(y,   r) {
    r = y % 100
    return (y < 2000 ? "neunzehnhundert" : "zweitausend") (r == 1 ? "eins" : r ? de_card(r) : "")
}

# ---- the nine forms -------------------------------------------------------------
function form(k, d, m, y) {
    if (k == 0) return d " " EN_MONTH[m] " " y
    if (k == 1) return EN_MONTH[m] " " d ", " y
    if (k == 2) return "the " en_ord(d) " of " EN_MONTH[m] ", " en_year(y)
    if (k == 3) return d " " FR_MONTH[m] " " y
    if (k == 4) return "le " (d == 1 ? "premier" : fr_card(d)) " " FR_MONTH[m] " " fr_year(y)
    if (k == 5) return d ". " DE_MONTH[m] " " y
    if (k == 6) return "der " de_ord(d) " " DE_MONTH[m] " " de_year(y)
    if (k == 7) return y "-" two(m) "-" two(d)
    return d "." m "." y
}
function emit(file, d, m, y) {
    print form(FORMS[pick(NFORMS)], d, m, y) > (out "/" file ".src")
    print two(d) "/" two(m) "/" y > (out "/" file ".tgt")
}

function words(list, arr, first,   n, i, w) {
    n = split(list, w, " ")
    for (i = 1; i <= n; i++) arr[first + i - 1] = w[i]
}

BEGIN {
    if (out == "") { print "usage: awk -f dates.awk -v out=DIR" > "/dev/stderr"; exit 2 }
    if (train == "") train = 20000
    if (dev == "") dev = 500
    if (test == "") test = 500
    if (seed == "") seed = 20261121
    rng_state = seed % 2147483646 + 1
    if (forms == "") forms = "0,1,2,3,4,5,6,7,8"
    NFORMS = split(forms, FORMS, ",")
    for (i = 1; i <= NFORMS; i++) FORMS[i - 1] = FORMS[i] + 0   # 0-based, as pick()

    words("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen", EN_ONE, 0)
    words("x twenty thirty forty fifty sixty seventy eighty ninety", EN_TEN, 1)
    words("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth", EN_ORD, 1)
    words("January February March April May June July August September October November December", EN_MONTH, 1)
    words("zéro un deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze quinze seize", FR_ONE, 0)
    words("x vingt trente quarante cinquante soixante soixante quatre-vingt", FR_TEN, 1)
    words("janvier février mars avril mai juin juillet août septembre octobre novembre décembre", FR_MONTH, 1)
    words("null eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn siebzehn achtzehn neunzehn", DE_ONE, 0)
    words("x zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig", DE_TEN, 1)
    words("Januar Februar März April Mai Juni Juli August September Oktober November Dezember", DE_MONTH, 1)
    DE_ORD[1] = "erste"; DE_ORD[3] = "dritte"; DE_ORD[7] = "siebte"; DE_ORD[8] = "achte"

    split("31 28 31 30 31 30 31 31 30 31 30 31", MDAYS, " ")

    # Every date once, in order, to the training or the held-out pool.
    ntr = nho = 0
    for (y = 1900; y <= 2099; y++) {
        leap = (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))
        for (m = 1; m <= 12; m++) {
            last = MDAYS[m] + (m == 2 && leap)
            for (d = 1; d <= last; d++) {
                date = d " " m " " y
                if (rnd() < 0.1) HO[nho++] = date; else TR[ntr++] = date
            }
        }
    }
    if (dev + test > nho) { print "dates.awk: dev + test > " nho " held-out dates" > "/dev/stderr"; exit 1 }

    # Training lines: dates drawn with replacement from the training pool.
    for (i = 0; i < train; i++) {
        split(TR[pick(ntr)], f, " ")
        emit("train", f[1], f[2], f[3])
    }
    # Held-out lines: distinct dates (a partial shuffle of the pool).
    for (i = 0; i < dev + test; i++) {
        j = i + pick(nho - i)
        t = HO[i]; HO[i] = HO[j]; HO[j] = t
        split(HO[i], f, " ")
        emit(i < dev ? "dev" : "test", f[1], f[2], f[3])
    }
}
