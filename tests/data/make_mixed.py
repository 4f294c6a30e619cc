#!/usr/bin/python3
# make_mixed.py - writes tests/data/mixed.txt, the mixed-script UTF-8 text the
# tokenize tests round-trip.  Run once (/usr/bin/python3 make_mixed.py > mixed.txt)
# and commit the output; the seed is fixed so a rerun gives the same bytes.
#
# The text is real sentences in many scripts (so the vocabulary learns real
# merges) mixed with everything that tends to break a tokenizer: controls,
# odd spaces, combining marks, emoji sequences, forms NFKC rewrites, the
# literal U+2581 marker, text that looks like pieces, and at the end a block
# of random valid code points.  Only valid UTF-8 is written; invalid bytes are
# made by the test script itself.  Lines are joined with '\n' only (never
# splitlines, which would also split at U+0085, U+2028, ...).
import random
import sys
import unicodedata

SEED = 20240611
rng = random.Random(SEED)

# ---- sentences, by language ----------------------------------------------------

S = {}
S["en"] = [
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times.",
    "Please read the manual before you call the help desk.",
    "The train to Edinburgh leaves from platform nine at half past six.",
    "She sells sea shells by the sea shore.",
    "We translated the whole corpus in less than an hour.",
    "Attention is all you need, or so the paper says.",
    "My naïve coworker left his résumé at the café.",
    "Don't panic: the tests will tell us what is wrong.",
    "How many tokens does a sentence like this one need?",
    "A stitch in time saves nine.",
    "Colourless green ideas sleep furiously.",
]
S["fr"] = [
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Où est la bibliothèque ? Je voudrais emprunter « Les Misérables ».",
    "Ça va très bien, merci, et vous ?",
    "L'été dernier, nous sommes allés à la plage près de Nîmes.",
    "Voix ambiguë d'un cœur qui, au zéphyr, préfère les jattes de kiwis.",
    "Il faut cultiver notre jardin.",
    "Les élèves ont reçu leurs diplômes à la fin de l'année scolaire.",
    "Je me suis levé tôt pour voir le lever du soleil sur la Côte d'Azur.",
    "Noël approche : les vitrines des magasins sont déjà décorées.",
    "Qu'est-ce que tu as mangé à midi ? Une crêpe et un café crème.",
    "L'œuvre de Molière reste très populaire aujourd'hui.",
    "Nous avons traduit cet article de l'allemand vers le français.",
]
S["de"] = [
    "Falsches Üben von Xylophonmusik quält jeden größeren Zwerg.",
    "Die Straße ist nass, weil es die ganze Nacht geregnet hat.",
    "Ich möchte bitte ein Stück Käsekuchen und einen Kaffee.",
    "Grüß Gott! Wie geht's Ihnen heute?",
    "Fußgängerüberwege sind für Kinder besonders wichtig.",
    "Der Zug nach München hat leider zwanzig Minuten Verspätung.",
    "Übung macht den Meister.",
    "Wir haben das Wörterbuch im Bücherregal gefunden.",
    "Die Donaudampfschifffahrtsgesellschaft ist ein sehr langes Wort.",
    "Am Wochenende fahren wir mit dem Fahrrad an den Bodensee.",
    "Könnten Sie mir bitte sagen, wie spät es ist?",
    "Äpfel, Birnen und Pflaumen wachsen in unserem Garten.",
]
S["vi"] = [
    "Tiếng Việt có sáu thanh điệu.",
    "Tôi yêu Hà Nội vào mùa thu.",
    "Chúc mừng năm mới! Chúc bạn sức khỏe và hạnh phúc.",
    "Xin chào, bạn có khỏe không?",
    "Người ta thường uống cà phê sữa đá ở Sài Gòn.",
    "Học, học nữa, học mãi.",
    "Hôm nay trời đẹp quá, chúng ta đi dạo nhé.",
    "Phở bò là món ăn nổi tiếng của Việt Nam.",
]
S["pl"] = [
    "Zażółć gęślą jaźń.",
    "Pchnąć w tę łódź jeża lub ośm skrzyń fig.",
    "Dzień dobry, jak się masz?",
    "Kraków leży nad Wisłą.",
    "Chrząszcz brzmi w trzcinie w Szczebrzeszynie.",
    "Lubię czytać książki wieczorem przy herbacie.",
    "W przyszłym tygodniu jedziemy do Gdańska nad morze.",
]
S["misc_latin"] = [
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Pijamalı hasta yağız şoföre çabucak güvendi; İstanbul'da ılık bir gün.",
    "El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío, añoraba a su querido cachorro.",
    "Não há mal que sempre dure, nem bem que nunca acabe.",
    "Þú ert ótrúleg, sagði hún við ömmu sína á Íslandi.",
    "Árvíztűrő tükörfúrógép.",
    "Høj bør, Åse, øl og æbler.",
    "Jämtlands älgar är större än Skånes.",
    "Ĉu vi parolas Esperanton? Eĥoŝanĝo ĉiuĵaŭde.",
    "Dobrodošli u Zagreb, glavni grad Hrvatske.",
]
S["el"] = [
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "Καλημέρα σας, τι κάνετε;",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
    "Το πρωί πίνω πάντα έναν ελληνικό καφέ.",
    "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν.",
    "Γνῶθι σεαυτόν.",
    "Τα παιδιά παίζουν στην παραλία όλο το καλοκαίρι.",
    "Πόσο κοστίζει αυτό το βιβλίο\u037e",
]
S["ru"] = [
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Москва — столица России.",
    "Я люблю читать книги по вечерам.",
    "В чащах юга жил бы цитрус? Да, но фальшивый экземпляр!",
    "Сегодня хорошая погода, пойдём гулять в парк.",
    "Учиться никогда не поздно.",
    "Ёлка стоит в углу, а под ней лежат подарки.",
]
S["uk_sr_bg"] = [
    "Київ — столиця України.",
    "Жебракують філософи при ґанку церкви в Гадячі, ще й шатро їхнє п'яне знаємо.",
    "Љубазни фењерџија чађавог лица хоће да ми покаже штос.",
    "Под южно дърво, цъфтящо в синьо, бягаше малко пухкаво зайче.",
    "Добрий день! Як справи?",
    "Ґедзь їсть щавель і цвіркоче.",
]
S["zh"] = [
    "我们今天去公园散步。",
    "学习中文需要很多耐心。",
    "北京是中国的首都，也是一座历史悠久的城市。",
    "这本书非常有意思，我推荐给你。",
    "歡迎光臨，請問您需要什麼？",
    "天下没有不散的筵席。",
    "他每天早上六点起床，然后去跑步。",
    "机器翻译的质量越来越好了。",
    "我喜欢吃饺子和包子。",
    "請把窗戶打開，房間裡太熱了。",
]
S["ja"] = [
    "今日はいい天気ですね。",
    "私は毎朝コーヒーを飲みます。",
    "東京タワーはとても高いです。",
    "ひらがなとカタカナと漢字を使います。",
    "すみません、駅はどこですか？",
    "この本を読んだことがありますか。",
    "日本語の勉強は楽しいけど、難しいです。",
    "猫が窓のそばで寝ています。",
    "コンピューターのプログラムを書いています。",
    "ありがとうございました。またお越しください。",
]
S["ko"] = [
    "안녕하세요, 만나서 반갑습니다.",
    "저는 한국어를 공부하고 있어요.",
    "서울은 대한민국의 수도입니다.",
    "오늘 날씨가 정말 좋네요.",
    "다람쥐 헌 쳇바퀴에 타고파.",
    "이 음식은 너무 맵지만 맛있어요.",
    "내일 도서관에서 만날까요?",
    "한글은 세종대왕이 만들었습니다.",
]
S["ar"] = [
    "اَلْعَرَبِيَّةُ لُغَةٌ جَمِيلَةٌ.",
    "ذَهَبَ الْوَلَدُ إِلَى الْمَدْرَسَةِ صَبَاحًا.",
    "كَتَبَ الطَّالِبُ الدَّرْسَ فِي الدَّفْتَرِ.",
    "مرحبا بكم في موقعنا.",
    "أين المكتبة؟ أريد أن أستعير كتاباً.",
    "الطقس جميل اليوم، لنذهب إلى الحديقة.",
    "القاهرة هي عاصمة مصر.",
    "شُكْرًا جَزِيلًا عَلَى مُسَاعَدَتِكَ.",
    "سلام، حال شما چطور است؟ من فارسی یاد می‌گیرم.",
    "یہ کتاب بہت اچھی ہے۔",
]
S["he"] = [
    "שָׁלוֹם עֲלֵיכֶם.",
    "הַיֶּלֶד הָלַךְ לְבֵית הַסֵּפֶר.",
    "שלום, מה שלומך?",
    "אני אוהב ללמוד שפות חדשות.",
    "תל אביב היא עיר על חוף הים התיכון.",
    "בְּרֵאשִׁית בָּרָא אֱלֹהִים אֵת הַשָּׁמַיִם וְאֵת הָאָרֶץ.",
    "הספר מונח על השולחן בחדר העבודה.",
]
S["hi"] = [
    "नमस्ते, आप कैसे हैं?",
    "मैं हिंदी सीख रहा हूँ।",
    "भारत एक विशाल देश है।",
    "आज मौसम बहुत अच्छा है।",
    "यह किताब मेरी है, वह तुम्हारी है।",
    "क्या आप मेरी मदद कर सकते हैं?",
    "दिल्ली में सर्दियों में बहुत ठंड होती है।",
    "संस्कृत एक प्राचीन भाषा है।",
]
S["indic"] = [
    "வணக்கம், நீங்கள் எப்படி இருக்கிறீர்கள்?",
    "தமிழ் ஒரு பழமையான மொழி.",
    "আমি বাংলায় গান গাই।",
    "আপনি কেমন আছেন?",
    "ನಮಸ್ಕಾರ, ನಿಮ್ಮ ಹೆಸರೇನು?",
    "సుస్వాగతం, మీరు ఎలా ఉన్నారు?",
    "ਸਤ ਸ੍ਰੀ ਅਕਾਲ, ਤੁਹਾਡਾ ਕੀ ਹਾਲ ਹੈ?",
    "ආයුබෝවන්, ඔබට කොහොමද?",
]
S["th"] = [
    "สวัสดีครับ คุณสบายดีไหม",
    "ฉันชอบกินข้าวผัดกับต้มยำกุ้ง",
    "วันนี้อากาศดีมาก",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
    "ขอบคุณมากค่ะ แล้วพบกันใหม่",
]
S["other_scripts"] = [
    "Բարեւ, ինչպե՞ս ես։",
    "გამარჯობა, როგორ ხარ?",
    "ሰላም ነው? እንኳን ደህና መጡ።",
    "ᐊᐃᑦᑕᕐᓂᖅ ᐃᓄᒃᑎᑐᑦ",
    "ᚠᛁᚱᛋᛏ ᚱᚢᚾᛖᛋ",
    "ཀུན་ལ་བཀྲ་ཤིས་བདེ་ལེགས།",
    "សួស្តី អ្នកសុខសប្បាយទេ?",
    "ສະບາຍດີ",
    "မင်္ဂလာပါ",
    "Сәлеметсіз бе? Қазақстан",
]
LANGS = list(S)

# ---- special lines -------------------------------------------------------------------

ZWJ = "\u200d"
VS16 = "\ufe0f"
KEYCAP = "\u20e3"


def flag(cc):
    return "".join(chr(0x1F1E6 + ord(c) - ord("A")) for c in cc)


def tag_flag(sub):  # England, Scotland, Wales: black flag + tag letters + cancel tag
    return "\U0001F3F4" + "".join(chr(0xE0000 + ord(c)) for c in sub) + "\U000E007F"


FAMILY = "\U0001F468" + ZWJ + "\U0001F469" + ZWJ + "\U0001F467" + ZWJ + "\U0001F466"
EMOJI = [
    "Family: " + FAMILY + " " + "\U0001F469" + ZWJ + "\U0001F469" + ZWJ + "\U0001F466"
    + " " + "\U0001F468" + ZWJ + "\U0001F468" + ZWJ + "\U0001F467",
    "Jobs: \U0001F469" + ZWJ + "\U0001F4BB \U0001F468" + ZWJ + "\U0001F680 \U0001F9D1" + ZWJ
    + "\U0001F373 \U0001F469\U0001F3FD" + ZWJ + "\u2695" + VS16 + " \U0001F468\U0001F3FF" + ZWJ
    + "\U0001F52C",
    "Thumbs: \U0001F44D \U0001F44D\U0001F3FB \U0001F44D\U0001F3FC \U0001F44D\U0001F3FD"
    " \U0001F44D\U0001F3FE \U0001F44D\U0001F3FF",
    "Flags: " + " ".join(flag(c) for c in ["FR", "DE", "JP", "UA", "BR", "VN", "KR", "IL", "EG", "IN", "TH", "GR"])
    + " " + tag_flag("gbeng") + " " + tag_flag("gbsct") + " \U0001F3F4" + ZWJ + "\u2620" + VS16
    + " \U0001F3F3" + VS16 + ZWJ + "\U0001F308",
    "Keycaps: " + " ".join(c + VS16 + KEYCAP for c in "0123456789#*") + " \U0001F51F",
    "Hearts \u2764" + VS16 + " \u2665 \u263a" + VS16 + " \u270c\U0001F3FD \U0001F600\U0001F602\U0001F923",
    "Couple with heart: \U0001F469" + ZWJ + "\u2764" + VS16 + ZWJ + "\U0001F468 and kiss \U0001F48F\U0001F3FC",
    "Weather \u2600" + VS16 + "\u26c5\U0001F327" + VS16 + "\u2744" + VS16 + " \u2014 une journée \U0001F31E à Paris \U0001F1EB\U0001F1F7",
    "\U0001F600",
    FAMILY * 5,
    "Lone regional indicators: " + chr(0x1F1E6) + " " + chr(0x1F1FF) + chr(0x1F1FE) + chr(0x1F1FD),
    "Skin tone alone: \U0001F3FB\U0001F3FC\U0001F3FD and a ZWJ alone: a" + ZWJ + "b",
]

CONTROLS = [
    "col1\tcol2\tcol3\tcol4",
    "\tindented with a tab",
    "trailing tab\t",
    "\t\t\t",
    "ESC sequence: \x1b[31mred\x1b[0m and \x1b[1;32mbold green\x1b[0m",
    "\x01start of heading, \x02start of text, \x03end of text",
    "bell\x07 backspace\x08 vertical\x0btab form\x0cfeed",
    "delete\x7fcharacter",
    "next line\x85inside (U+0085)",
    "C1 controls \x80\x9b\x9f in the middle",
    "line separator\u2028and paragraph separator\u2029inside",
    "carriage\rreturn in the middle",
    "unit\x1fseparator and record\x1eseparator\x1d\x1c",
    "\x1b",
    "\x7f",
    "\x85",
    "soft\u00adhyphen and word\u2060joiner and bidi \u202eabc\u202c and \u200e\u200f marks",
]

SPACES = [
    "no\u00a0break\u00a0space",
    "\u3000全角スペース\u3000で囲む\u3000",
    "em\u2003space, en\u2002space, thin\u2009space, hair\u200aspace, figure\u2007space",
    "narrow no-break space before punctuation\u202f!",
    "zero\u200bwidth\u200bspace",
    "byte order mark\ufeffinside a line",
    "ogham\u1680space mark",
    "   three leading spaces",
    "trailing spaces   ",
    "multiple     inner      spaces   and   more",
    " ",
    "     ",
    "\u3000",
    "\u00a0",
    " \t \t mixed blanks \t ",
    "\u2003\u2003em spaces only at the start",
]

NFKC = [
    "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　ｘｙｚ　１２３！？",
    "ﬁnance ﬂower oﬀice eﬃcient eﬄuent ﬆyle",
    "㍻ ㍿ ㌔ ㎏ ㎞ ℃ ℉ № ™ ℡ ㏄",
    "E=mc² and x₁+x₂=x³",
    "½ ¾ ⅓ ⅞ ⁄",
    "①②③ ⑳ ⓐⓑⓒ ㊀㊁",
    "Ⅰ Ⅱ Ⅲ Ⅻ ⅻ ⅿ",
    "ſ long s, µ micro, \u212b angstrom, \u2126 ohm, \u212a kelvin",
    "ǅemal ǈubljana ǋ Ǳ",
    "ｺﾝﾆﾁﾊ ﾊﾟﾋﾟﾌﾟ ｶﾞｷﾞ",
    "ㄱㄴㄷ ㅏㅑㅓ",
    "\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165 (conjoining jamo)",
    "ﻻ ﷺ ﷽",
    "ℌ𝔢𝔩𝔩𝔬 𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 𝟙𝟚𝟛",
    "… ‥ ′″ ‼ ⁇",
    "e\u0301 versus é, A\u030a versus Å, n\u0303 versus ñ",
    "\u0301 a combining mark at the start of a line",
    "q\u0307\u0323 and q\u0323\u0307 (canonical order)",
]

MARKER = [
    "\u2581",
    "\u2581\u2581\u2581",
    "\u2581hello \u2581world",
    "word\u2581word\u2581word",
    "a \u2581 b \u2581\u2581 c",
    "\u2581 marker followed by a space",
    "underscores_are_not_markers __init__ ▁_▁",
]

PIECES = [
    "<0x41>",
    "<s> hello </s>",
    "<unk> <pad>",
    "<0xFF><0x00><0x7F>",
    "<s></s><unk><pad>",
    "\u2581<s> \u2581</s>",
    "<0x41> <0x42> <0x43> should stay as text, not become ABC",
    "[CLS] [SEP] [MASK] <mask> <|endoftext|>",
    "<0x>  <0xZZ> <0x100> <0x4>",
    "5 17 42 100",
    "0",
]

NUMBERS = [
    "1234567890",
    "3.14159265358979323846",
    "-42, +7, 1e-9, 6.022e23",
    "1,234,567.89 and 1.234.567,89 and 1 234 567",
    "12:30, 2024-01-15, 15/01/2024",
    "+33 1 23 45 67 89",
    "Arabic-Indic ٠١٢٣٤٥٦٧٨٩ and ۰۱۲۳۴۵۶۷۸۹",
    "Devanagari २०२४, Thai ๒๕๖๗, Bengali ১২৩",
    "Fullwidth ２０２４年１２月３１日",
    "0x1F600 0b1010 0o777 1_000_000",
    "99.9% of 10^6 ≈ 999000 ± 5",
]

URLS = [
    "https://www.example.com/path/to/page?query=value&lang=fr#section",
    "http://例え.テスト/パス?ключ=значение",
    "https://de.wikipedia.org/wiki/Straße",
    "mailto:someone@example.org?subject=Grüße",
    "ftp://ftp.debian.org/debian/dists/bookworm/",
    "See <https://xn--bcher-kva.example/> or www.bücher.example.",
    "file:///home/user/Documents/r%C3%A9sum%C3%A9.pdf",
]

CODE = [
    "int main(void) { printf(\"%d\\n\", 42); return 0; }",
    "\tfor (size_t i = 0; i < n; i++) {",
    "\t\tsum += a[i] * b[i];  /* dot product */",
    "\t}",
    "def f(x): return x ** 2  # square",
    "    if not line.strip(): continue",
    "grep -rn 'foo' . | sort -u > out.txt 2>&1",
    "echo \"$HOME\" && cd ~/src && make -j2 CFLAGS='-O2 -g'",
    "{\"key\": \"värde\", \"n\": [1, 2, 3], \"ok\": true, \"null\": null}",
    "^[a-z]+\\d{2,}$|(?<=@)\\w+",
    "<p class=\"x\">Hello &amp; goodbye &lt;3</p>",
    "\\frac{a}{b} + \\sum_{i=0}^{n} x_i \\cdot \\alpha",
    "SELECT name, COUNT(*) FROM users WHERE city = 'Zürich' GROUP BY name;",
    "let s: &str = \"héllo\"; println!(\"{s:?}\");",
    "x = {'a': 1, 'b': [2, 3]}; y = x.get('c', None)",
    "#include <stdio.h>",
    "// TODO: handle the empty case",
    "    \"\"\"Docstring with 'quotes' and \\backslashes\\.\"\"\"",
]

SPECIAL = EMOJI + CONTROLS + SPACES + NFKC + MARKER + PIECES + NUMBERS + URLS + CODE

# Combining marks for Zalgo-style stacks, from several blocks.
COMBINING = (list(range(0x0300, 0x0370)) + list(range(0x0483, 0x0488)) + list(range(0x1AB0, 0x1ABF))
             + list(range(0x1DC0, 0x1DFA)) + list(range(0x20D0, 0x20F1)) + list(range(0xFE20, 0xFE30)))


def zalgo(text, lo, hi):
    out = []
    for ch in text:
        out.append(ch)
        if ch != " ":
            out.extend(chr(rng.choice(COMBINING)) for _ in range(rng.randint(lo, hi)))
    return "".join(out)


def sentence(lang=None):
    return rng.choice(S[lang or rng.choice(LANGS)])


# ---- the prose lines ---------------------------------------------------------------------


def prose_line():
    lang = rng.choice(LANGS)
    r = rng.random()
    if r < 0.55:  # one language, one to three sentences
        return " ".join(sentence(lang) for _ in range(rng.randint(1, 3)))
    if r < 0.75:  # two languages side by side, as in a parallel corpus
        return sentence(lang) + rng.choice([" ", " | ", "\t", " — ", " / "]) + sentence()
    if r < 0.85:  # a sentence with something odd inside
        words = sentence(lang).split(" ")
        at = rng.randrange(len(words) + 1)
        words.insert(at, rng.choice(EMOJI[:8] + NUMBERS + URLS + MARKER + PIECES + NFKC).strip())
        return " ".join(words)
    if r < 0.90:  # decomposed (NFD) or compatibility-decomposed (NFKD): normalisation changes it
        return unicodedata.normalize(rng.choice(["NFD", "NFKD"]), sentence(lang))
    if r < 0.94:  # stacked diacritics
        return zalgo(sentence(rng.choice(["en", "fr", "de", "ru", "el"])), 1, 2)
    if r < 0.96:  # Zalgo
        return zalgo(rng.choice(["Zalgo is coming", "He comes", "Ẑ̸a̵l̷g̶o̴", "Привет", "تحذير"]), 5, 15)
    if r < 0.98:  # odd spaces between the words
        return rng.choice(["\u00a0", "\u3000", "\u2003", "  ", "\t", "\u202f"]).join(sentence(lang).split(" "))
    # upper case, case folding changes it
    return sentence(rng.choice(["en", "fr", "de", "el", "ru", "misc_latin"])).upper()


lines = [prose_line() for _ in range(2600)]
for special in SPECIAL:  # each special line several times, so some of it gets merged
    lines.extend([special] * rng.randint(1, 4))
lines.extend("" for _ in range(90))
rng.shuffle(lines)
# Runs of empty lines, and an empty first and last line.
for _ in range(5):
    at = rng.randrange(len(lines))
    lines[at:at] = [""] * rng.randint(2, 4)

# ---- random valid code points, by block --------------------------------------------------

BLOCKS = [
    (0x0020, 0x007E), (0x00A0, 0x024F), (0x0250, 0x02FF), (0x0370, 0x03FF), (0x0400, 0x052F),
    (0x0530, 0x058F), (0x0590, 0x05FF), (0x0600, 0x06FF), (0x0700, 0x074F), (0x0780, 0x07BF),
    (0x0900, 0x097F), (0x0980, 0x09FF), (0x0A00, 0x0A7F), (0x0B80, 0x0BFF), (0x0C00, 0x0C7F),
    (0x0D00, 0x0D7F), (0x0E00, 0x0E7F), (0x0E80, 0x0EFF), (0x0F00, 0x0FFF), (0x1000, 0x109F),
    (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1200, 0x137F), (0x13A0, 0x13FF), (0x1400, 0x167F),
    (0x1780, 0x17FF), (0x1800, 0x18AF), (0x1E00, 0x1EFF), (0x1F00, 0x1FFF), (0x2000, 0x206F),
    (0x2070, 0x209F), (0x20A0, 0x20CF), (0x2100, 0x214F), (0x2150, 0x218F), (0x2190, 0x21FF),
    (0x2200, 0x22FF), (0x2300, 0x23FF), (0x2460, 0x24FF), (0x2500, 0x259F), (0x25A0, 0x25FF),
    (0x2600, 0x27BF), (0x2800, 0x28FF), (0x2E80, 0x2FDF), (0x3000, 0x303F), (0x3040, 0x30FF),
    (0x3100, 0x31FF), (0x3200, 0x33FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xA4CF),
    (0xA500, 0xA63F), (0xAC00, 0xD7A3), (0xE000, 0xF8FF), (0xF900, 0xFAFF), (0xFB00, 0xFDFF),
    (0xFE00, 0xFE6F), (0xFE70, 0xFFFF), (0x10000, 0x1007F), (0x10300, 0x1034F), (0x10400, 0x1044F),
    (0x1D400, 0x1D7FF), (0x1F000, 0x1F0FF), (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F),
    (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF), (0x2F800, 0x2FA1F), (0xE0000, 0xE007F),
    (0xF0000, 0xFFFFF), (0x100000, 0x10FFFF),
]


def random_cp():
    if rng.random() < 0.1:  # any scalar value at all, assigned or not
        cp = rng.randrange(0x1, 0x110000)
    else:
        lo, hi = rng.choice(BLOCKS)
        cp = rng.randint(lo, hi)
    if cp == 0x0A or 0xD800 <= cp <= 0xDFFF:  # no newline; surrogates are not valid UTF-8
        return random_cp()
    return chr(cp)


random_lines = []
for _ in range(250):
    words = ["".join(random_cp() for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 10))]
    random_lines.append(" ".join(words))

out = [""] + lines + ["", "Random code points from many blocks (seed %d):" % SEED] + random_lines + [""]
text = "\n".join(out) + "\n"
data = text.encode("utf-8")  # fails on a lone surrogate: only valid UTF-8 gets out
sys.stdout.buffer.write(data)
