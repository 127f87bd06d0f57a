/*
 * text.c -- full-text search's words, scores and queries (text.h): the
 * tokenizer (mongod's UnicodeFTSTokenizer), the scores of a document
 * (FTSSpec::scoreDocument, FTSElementIterator), the spec (FTSSpec and its
 * fixSpec), a $text query (FTSQueryImpl, FTSQueryParser) and its document
 * checks (FTSMatcher).  Facts from mongod's source; the code is this
 * project's own.
 */
#include "text.h"

#include <libstemmer.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>

/* mongod's MAX_WORD_WEIGHT: MAX_WEIGHT (1e9) / 10000. */
#define MAX_WORD_WEIGHT 100000

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* ------------------------------------------------------------ languages */

static const mfi_text_stops *stops_of(const char *lang)
{
    for (const mfi_text_stops *s = mfi_text_stop_lists; s->lang; s++)
        if (strcmp(s->lang, lang) == 0)
            return s;
    return NULL;
}

/* mongod 7.0's languages of text index versions 3 and 2, the same list
 * (fts_language.cpp); a version 2 language tokenizes as mongod's
 * BasicFTSTokenizer (legacy_tokenize below). */
#define LANGS(v)                                                                           \
    {"danish", "da", "danish", NULL, 0, v},       {"dutch", "nl", "dutch", NULL, 0, v},       \
    {"english", "en", "english", NULL, 0, v},     {"finnish", "fi", "finnish", NULL, 0, v},   \
    {"french", "fr", "french", NULL, 0, v},       {"german", "de", "german", NULL, 0, v},     \
    {"hungarian", "hu", "hungarian", NULL, 0, v}, {"italian", "it", "italian", NULL, 0, v},   \
    {"norwegian", "nb", "norwegian", NULL, 0, v}, {"portuguese", "pt", "portuguese", NULL, 0, v}, \
    {"romanian", "ro", "romanian", NULL, 0, v},   {"russian", "ru", "russian", NULL, 0, v},   \
    {"spanish", "es", "spanish", NULL, 0, v},     {"swedish", "sv", "swedish", NULL, 0, v},   \
    {"turkish", "tr", "turkish", NULL, 0, v},     {"none", NULL, NULL, NULL, 0, v}
static mfi_text_lang langs[] = {LANGS(3)};
static mfi_text_lang langs_v2[] = {LANGS(2)};
#undef LANGS
#define NLANGS (sizeof langs / sizeof langs[0])

static pthread_once_t langs_once = PTHREAD_ONCE_INIT;

static void langs_init(void)
{
    for (size_t i = 0; i < NLANGS; i++) {
        langs[i].index = langs_v2[i].index = (int)i; /* one stemmer for both */
        langs[i].stops = langs_v2[i].stops = stops_of(langs[i].name);
    }
}

const mfi_text_lang *mfi_text_lang_find_v(const char *name, int version)
{
    const mfi_text_lang *table = version == 2 ? langs_v2 : langs;
    pthread_once(&langs_once, langs_init);
    for (size_t i = 0; i < NLANGS; i++)
        if (strcasecmp(table[i].name, name) == 0 ||
            (table[i].code && strcasecmp(table[i].code, name) == 0))
            return &table[i];
    return NULL;
}

const mfi_text_lang *mfi_text_lang_find(const char *name)
{
    return mfi_text_lang_find_v(name, 3);
}

/* A stemmer per language and thread: libstemmer's are not thread-safe,
 * and making one costs more than stemming a document.  Kept for the
 * thread's life (server threads are few and long-lived). */
static _Thread_local struct sb_stemmer *stemmers[NLANGS];

static struct sb_stemmer *stemmer_of(const mfi_text_lang *lang)
{
    if (!lang->stemmer)
        return NULL;
    if (!stemmers[lang->index])
        stemmers[lang->index] = sb_stemmer_new(lang->stemmer, "UTF_8");
    return stemmers[lang->index];
}

static bool is_stop(const mfi_text_lang *lang, const char *w, size_t n)
{
    const mfi_text_stops *s = lang->stops;
    if (!s)
        return false;
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *x = s->words[mid];
        size_t xl = strlen(x);
        int c = memcmp(x, w, xl < n ? xl : n);
        if (c == 0)
            c = xl < n ? -1 : xl > n ? 1 : 0;
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* ---------------------------------------------------------------- UTF-8 */

/* The code point at s[*i], advancing *i; a byte that starts no valid
 * sequence is itself (Latin-1). */
static uint32_t utf8_next(const char *str, size_t len, size_t *i)
{
    const uint8_t *s = (const uint8_t *)str;
    uint8_t b = s[*i];
    uint32_t cp;
    size_t n;
    if (b < 0x80) {
        (*i)++;
        return b;
    }
    if ((b & 0xE0) == 0xC0)
        cp = b & 0x1F, n = 1;
    else if ((b & 0xF0) == 0xE0)
        cp = b & 0x0F, n = 2;
    else if ((b & 0xF8) == 0xF0)
        cp = b & 0x07, n = 3;
    else {
        (*i)++;
        return b;
    }
    if (*i + n >= len) {
        (*i)++;
        return b;
    }
    for (size_t k = 1; k <= n; k++) {
        if (*i + k >= len || (s[*i + k] & 0xC0) != 0x80) {
            (*i)++;
            return b;
        }
        cp = cp << 6 | (s[*i + k] & 0x3F);
    }
    *i += n + 1;
    return cp;
}

static int utf8_put(mf_buf *b, uint32_t cp)
{
    uint8_t o[4];
    size_t n;
    if (cp < 0x80)
        o[0] = (uint8_t)cp, n = 1;
    else if (cp < 0x800)
        o[0] = (uint8_t)(0xC0 | cp >> 6), o[1] = (uint8_t)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        o[0] = (uint8_t)(0xE0 | cp >> 12), o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)),
        o[2] = (uint8_t)(0x80 | (cp & 0x3F)), n = 3;
    else
        o[0] = (uint8_t)(0xF0 | cp >> 18), o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F)),
        o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), o[3] = (uint8_t)(0x80 | (cp & 0x3F)), n = 4;
    return mf_buf_append(b, o, n);
}

/* ----------------------------------------------------------- delimiters */

/* mongod's codepointIsDelimiter, which its gen_delimiter_list.py generates
 * from Unicode 8.0.0's PropList.txt: the code points with the properties
 * White_Space, Dash, Hyphen, Quotation_Mark, Terminal_Punctuation,
 * Pattern_Syntax or STerm (Sentence_Terminal); in English the apostrophe
 * is not one.  Read from ICU's tables rather than a list: a code point
 * assigned after Unicode 8.0 counts only by Pattern_Syntax, a property
 * that holds reserved code points too (PropList 8.0 lists those of its
 * ranges), so a later script's punctuation is no delimiter, as in mongod.
 * The Basic Multilingual Plane is tabled once (8 KB); the rest asks ICU. */
static uint8_t delim_bmp[0x10000 / 8];
static pthread_once_t delim_once = PTHREAD_ONCE_INIT;

static bool icu_delim(UChar32 c)
{
    static const UProperty props[] = {UCHAR_WHITE_SPACE,  UCHAR_DASH,
                                      UCHAR_HYPHEN,       UCHAR_QUOTATION_MARK,
                                      UCHAR_TERMINAL_PUNCTUATION, UCHAR_S_TERM};
    if (u_hasBinaryProperty(c, UCHAR_PATTERN_SYNTAX))
        return true;
    UVersionInfo age;
    u_charAge(c, age);
    if (age[0] > 8) /* not in Unicode 8.0's PropList */
        return false;
    for (size_t i = 0; i < sizeof props / sizeof props[0]; i++)
        if (u_hasBinaryProperty(c, props[i]))
            return true;
    return false;
}

static void delim_init(void)
{
    for (UChar32 c = 0; c < 0x10000; c++)
        if (icu_delim(c))
            delim_bmp[c >> 3] |= (uint8_t)(1u << (c & 7));
}

/* After pthread_once(&delim_once, delim_init). */
static bool is_delim(uint32_t c, bool english)
{
    if (c == '\'')
        return !english;
    if (c >= 0x10000)
        return c <= 0x10FFFF && icu_delim((UChar32)c);
    return (delim_bmp[c >> 3] >> (c & 7)) & 1;
}

/* ------------------------------------------------------ folding, marks */

static uint32_t fold(uint32_t c, bool turkish)
{
    if (c < 0x80)
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    return (uint32_t)u_foldCase((UChar32)c, turkish ? U_FOLD_CASE_EXCLUDE_SPECIAL_I
                                                    : U_FOLD_CASE_DEFAULT);
}

/* `c` without its diacritics, into `out`: nothing for a diacritic mark,
 * the base letters of its canonical decomposition otherwise. */
static int strip_put(mf_buf *out, uint32_t c)
{
    if (c < 0x80)
        return c == '^' || c == '`' ? 0 : utf8_put(out, c);
    if (u_hasBinaryProperty((UChar32)c, UCHAR_DIACRITIC))
        return 0;
    UErrorCode st = U_ZERO_ERROR;
    const UNormalizer2 *nfd = unorm2_getNFDInstance(&st);
    UChar d[32];
    int32_t n = U_SUCCESS(st) ? unorm2_getDecomposition(nfd, (UChar32)c, d, 32, &st) : -1;
    if (n <= 0 || U_FAILURE(st))
        return utf8_put(out, c);
    for (int32_t i = 0; i < n;) {
        UChar32 x;
        U16_NEXT(d, i, n, x);
        if (!u_hasBinaryProperty(x, UCHAR_DIACRITIC) && utf8_put(out, (uint32_t)x) != 0)
            return -1;
    }
    return 0;
}

/* `s` case-folded (unless `keep_case`) and stripped of diacritics (unless
 * `keep_marks`), into `out` (emptied first). */
static int fold_str(const char *s, size_t len, bool keep_case, bool keep_marks, bool turkish,
                    mf_buf *out)
{
    out->len = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c = utf8_next(s, len, &i);
        if (!keep_case)
            c = fold(c, turkish);
        if (keep_marks ? utf8_put(out, c) : strip_put(out, c))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ tokenizer */

/* Text index version 2: mongod's BasicFTSTokenizer over its legacy
 * Tokenizer, byte by byte -- white space (space, \f \v \t \r \n; the
 * apostrophe but in English) and the ASCII punctuation below end words,
 * every other byte is text (`_`, controls, all of UTF-8 past ASCII); a
 * word is lower-cased in ASCII only, dropped if a stop word, else (its
 * case kept when asked) stemmed.  No diacritics are removed. */
static int legacy_tokenize(const mfi_text_lang *lang, const char *s, size_t len, int opts,
                           mfi_text_word_fn fn, void *arg)
{
    static const char delims[] = "~`!@#$%^&*()-=+[]{}|\\;:\",.<>/?";
    bool english = strcmp(lang->name, "english") == 0;
    struct sb_stemmer *st = stemmer_of(lang);
    mf_buf lower = {0};
    int rc = 0;
    size_t i = 0;
    while (rc == 0 && i < len) {
        unsigned char c = (unsigned char)s[i];
        bool text = !(c == ' ' || c == '\f' || c == '\v' || c == '\t' || c == '\r' ||
                      c == '\n' || (c == '\'' && !english) || (c && strchr(delims, c)));
        if (!text) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < len) {
            c = (unsigned char)s[i];
            if (c == ' ' || c == '\f' || c == '\v' || c == '\t' || c == '\r' || c == '\n' ||
                (c == '\'' && !english) || (c && strchr(delims, c)))
                break;
            i++;
        }
        lower.len = 0;
        if (mf_buf_append(&lower, s + start, i - start) != 0) {
            rc = -1;
            break;
        }
        for (size_t k = 0; k < lower.len; k++)
            if (lower.data[k] >= 'A' && lower.data[k] <= 'Z')
                lower.data[k] += 32;
        if ((opts & MFI_TOK_STOP) && is_stop(lang, (const char *)lower.data, lower.len))
            continue;
        const char *w = (opts & MFI_TOK_CASE) ? s + start : (const char *)lower.data;
        size_t wl = i - start;
        if (st) {
            const sb_symbol *r = sb_stemmer_stem(st, (const sb_symbol *)w, (int)wl);
            if (r) {
                w = (const char *)r;
                wl = (size_t)sb_stemmer_length(st);
            }
        }
        rc = fn(arg, wl ? w : "", wl);
    }
    mf_buf_free(&lower);
    return rc;
}

int mfi_text_tokenize(const mfi_text_lang *lang, const char *s, size_t len, int opts,
                      mfi_text_word_fn fn, void *arg)
{
    if (lang->version == 2)
        return legacy_tokenize(lang, s, len, opts, fn, arg);
    bool english = strcmp(lang->name, "english") == 0;
    bool turkish = strcmp(lang->name, "turkish") == 0;
    struct sb_stemmer *st = stemmer_of(lang);
    pthread_once(&delim_once, delim_init);
    mf_buf lower = {0}, fin = {0};
    int rc = 0;
    size_t i = 0;
    while (rc == 0 && i < len) {
        size_t start = i;
        uint32_t c = utf8_next(s, len, &i);
        if (is_delim(c, english))
            continue;
        size_t end = i;
        while (i < len) {
            size_t at = i;
            c = utf8_next(s, len, &i);
            if (is_delim(c, english)) {
                i = at;
                break;
            }
            end = i;
        }
        i = end;
        /* stop words are compared case-folded, with their diacritics */
        if (fold_str(s + start, end - start, false, true, turkish, &lower) != 0) {
            rc = -1;
            break;
        }
        if ((opts & MFI_TOK_STOP) && is_stop(lang, (const char *)lower.data, lower.len))
            continue;
        const char *w = (opts & MFI_TOK_CASE) ? s + start : (const char *)lower.data;
        size_t wl = (opts & MFI_TOK_CASE) ? end - start : lower.len;
        if (st) { /* the stemmer is diacritic-sensitive: before stripping */
            const sb_symbol *r = sb_stemmer_stem(st, (const sb_symbol *)w, (int)wl);
            if (r) {
                w = (const char *)r;
                wl = (size_t)sb_stemmer_length(st);
            }
        }
        if (!(opts & MFI_TOK_DIACRITIC)) {
            if (fold_str(w, wl, true, false, turkish, &fin) != 0) {
                rc = -1;
                break;
            }
            w = (const char *)fin.data;
            wl = fin.len;
        }
        rc = fn(arg, wl ? w : "", wl);
    }
    mf_buf_free(&lower);
    mf_buf_free(&fin);
    return rc;
}

/* -------------------------------------------------------------- helpers */

static bool find_field(const bson_t *doc, const char *name, bson_iter_t *it)
{
    return bson_iter_init_find(it, doc, name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_num(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE: case BSON_TYPE_DECIMAL128:
        return true;
    default:
        return false;
    }
}

/* BSONElement::numberInt(): truncated toward zero (decimals as 0 here). */
static int32_t number_int(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return (int32_t)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (!(d == d))
            return 0;
        if (d >= 2147483647.0)
            return INT32_MAX;
        if (d <= -2147483648.0)
            return INT32_MIN;
        return (int32_t)d;
    }
    default: return 0;
    }
}

static double number_double(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return (double)bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: return bson_iter_double(it);
    default: return 0;
    }
}

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* ------------------------------------------------------------- fixSpec */

/* One weight, kept sorted by field (mongod's std::map<string, int>). */
typedef struct wmap {
    char **k;
    int32_t *v;
    size_t n, cap;
} wmap;

static int wmap_set(wmap *m, const char *k, int32_t v)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->k[i], k) == 0) {
            m->v[i] = v;
            return 0;
        }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        char **k2 = realloc(m->k, cap * sizeof *k2);
        if (!k2)
            return -1;
        m->k = k2;
        int32_t *v2 = realloc(m->v, cap * sizeof *v2);
        if (!v2)
            return -1;
        m->v = v2;
        m->cap = cap;
    }
    if (!(m->k[m->n] = strdup(k)))
        return -1;
    m->v[m->n++] = v;
    return 0;
}

static void wmap_sort(wmap *m)
{
    for (size_t i = 1; i < m->n; i++)
        for (size_t j = i; j > 0 && strcmp(m->k[j - 1], m->k[j]) > 0; j--) {
            char *tk = m->k[j];
            int32_t tv = m->v[j];
            m->k[j] = m->k[j - 1], m->v[j] = m->v[j - 1];
            m->k[j - 1] = tk, m->v[j - 1] = tv;
        }
}

static void wmap_free(wmap *m)
{
    strv_free(m->k, m->n);
    free(m->v);
}

static int fail67(mf_error *err, const char *msg)
{
    return mf_error_set(err, MF_CannotCreateIndex, "%s", msg);
}

static bool reserved(const char *f)
{
    return strcmp(f, "_fts") == 0 || strcmp(f, "_ftsx") == 0;
}

/* The key pattern's shape: prefix fields, then the text fields (or
 * _fts/_ftsx), then suffix fields. */
static int check_key_shape(const bson_t *key, mf_error *err)
{
    bson_iter_t it;
    bool more = bson_iter_init(&it, key) && bson_iter_next(&it);
    while (more && !BSON_ITER_HOLDS_UTF8(&it)) {
        if (reserved(bson_iter_key(&it)))
            return fail67(err, "text index with reserved fields _fts/_ftsx not allowed");
        if (!bson_iter_next(&it))
            return fail67(err, "expected additional fields in text index key pattern");
    }
    if (strcmp(bson_iter_key(&it), "_fts") == 0) {
        if (!bson_iter_next(&it) || strcmp(bson_iter_key(&it), "_ftsx") != 0)
            return fail67(err, "expected _ftsx after _fts");
        more = bson_iter_next(&it);
    } else {
        do {
            if (reserved(bson_iter_key(&it)))
                return fail67(err, "text index with reserved fields _fts/_ftsx not allowed");
            more = bson_iter_next(&it);
        } while (more && BSON_ITER_HOLDS_UTF8(&it));
    }
    while (more) {
        if (BSON_ITER_HOLDS_UTF8(&it))
            return fail67(err, "'text' fields in index must all be adjacent");
        if (reserved(bson_iter_key(&it)))
            return fail67(err, "text index with reserved fields _fts/_ftsx not allowed");
        more = bson_iter_next(&it);
    }
    return 0;
}

static bool override_ok(const char *s)
{
    return s[0] && s[0] != '$' && !strchr(s, '.');
}

int mfi_text_fix_spec(const bson_t *in, bson_t *out, mf_error *err)
{
    bson_iter_t it, kit;
    bson_t key, fixed_key;
    wmap m = {0};
    int rc = 0;
    bson_init(out);
    bson_init(&fixed_key);
    if (!find_field(in, "key", &it) || !mf_bsonx_doc_view(&it, &key))
        return fail67(err, "text index without a key pattern");
    /* the fixed key pattern and the text fields (weight 1 each) */
    bool added = false;
    bson_iter_init(&kit, &key);
    while (rc == 0 && bson_iter_next(&kit)) {
        const char *f = bson_iter_key(&kit);
        if (strcmp(f, "_fts") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&kit) || strcmp(bson_iter_utf8(&kit, NULL), "text") != 0)
                rc = fail67(err, "expecting _fts:\"text\"");
            else
                added = true, mf_bsonx_append_iter(&fixed_key, f, -1, &kit);
        } else if (strcmp(f, "_ftsx") == 0) {
            if (number_int(&kit) != 1)
                rc = fail67(err, "expecting _ftsx:1");
            else
                mf_bsonx_append_iter(&fixed_key, f, -1, &kit);
        } else if (BSON_ITER_HOLDS_UTF8(&kit) && strcmp(bson_iter_utf8(&kit, NULL), "text") == 0) {
            if (!added) {
                BSON_APPEND_UTF8(&fixed_key, "_fts", "text");
                BSON_APPEND_INT32(&fixed_key, "_ftsx", 1);
                added = true;
            }
            if (wmap_set(&m, f, 1) != 0)
                rc = oom(err);
        } else if (!is_num(&kit) || (number_int(&kit) != 1 && number_int(&kit) != -1)) {
            rc = fail67(err, "expected value 1 or -1 for non-text key in compound index");
        } else {
            mf_bsonx_append_iter(&fixed_key, f, -1, &kit);
        }
    }
    if (rc == 0)
        rc = check_key_shape(&key, err);
    /* weights */
    if (rc == 0 && find_field(in, "weights", &it)) {
        bson_t w;
        bson_iter_t wit;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && mf_bsonx_doc_view(&it, &w)) {
            bson_iter_init(&wit, &w);
            while (rc == 0 && bson_iter_next(&wit)) {
                if (!is_num(&wit))
                    rc = fail67(err, "weight for text index needs numeric type");
                else if (wmap_set(&m, bson_iter_key(&wit), number_int(&wit)) != 0)
                    rc = oom(err);
            }
        } else if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "$**") == 0) {
            if (wmap_set(&m, "$**", 1) != 0)
                rc = oom(err);
        } else {
            rc = fail67(err, "text index option 'weights' must be an object");
        }
    }
    if (rc == 0 && m.n == 0)
        rc = fail67(err, "text index option 'weights' must specify fields or the wildcard");
    wmap_sort(&m);
    bson_t weights;
    bson_init(&weights);
    for (size_t i = 0; rc == 0 && i < m.n; i++) {
        if (m.v[i] <= 0 || m.v[i] >= MAX_WORD_WEIGHT) {
            rc = mf_error_set(err, MF_CannotCreateIndex,
                              "text index weight must be in the exclusive interval (0,%d) but "
                              "found: %d",
                              MAX_WORD_WEIGHT, m.v[i]);
            break;
        }
        if (strcmp(m.k[i], "$**") != 0) {
            const char *p = m.k[i];
            if (!*p) {
                rc = fail67(err, "weight cannot be on an empty field");
                break;
            }
            for (const char *q = p;; ) {
                const char *dot = strchr(q, '.');
                size_t n = dot ? (size_t)(dot - q) : strlen(q);
                if (n == 0) {
                    rc = fail67(err, "weight cannot have empty path component");
                    break;
                }
                if (q[0] == '$') {
                    rc = fail67(err, "weight cannot have path component with $ prefix");
                    break;
                }
                if (!dot)
                    break;
                q = dot + 1;
            }
            if (rc)
                break;
        }
        BSON_APPEND_INT32(&weights, m.k[i], m.v[i]);
    }
    /* languages */
    const char *dl = "english", *lo = "language";
    if (rc == 0 && find_field(in, "default_language", &it)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            rc = fail67(err, "default_language needs a string type");
        else
            dl = bson_iter_utf8(&it, NULL);
    }
    if (rc == 0 && !mfi_text_lang_find(dl))
        rc = fail67(err, "default_language is not valid");
    if (rc == 0 && find_field(in, "language_override", &it)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            rc = fail67(err, "language_override must be a string");
        else if (!override_ok(lo = bson_iter_utf8(&it, NULL)))
            rc = fail67(err, "language_override is not valid");
    }
    /* the fixed spec, in the input's order */
    bool put_w = false, put_dl = false, put_lo = false, has_v = false;
    int32_t v = 0, tiv = 3;
    bson_iter_init(&it, in);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        if (strcmp(f, "key") == 0) {
            BSON_APPEND_DOCUMENT(out, "key", &fixed_key);
        } else if (strcmp(f, "weights") == 0) {
            BSON_APPEND_DOCUMENT(out, "weights", &weights);
            put_w = true;
        } else if (strcmp(f, "default_language") == 0) {
            BSON_APPEND_UTF8(out, "default_language", dl);
            put_dl = true;
        } else if (strcmp(f, "language_override") == 0) {
            BSON_APPEND_UTF8(out, "language_override", lo);
            put_lo = true;
        } else if (strcmp(f, "v") == 0) {
            has_v = true;
            v = number_int(&it);
        } else if (strcmp(f, "textIndexVersion") == 0) {
            if (!is_num(&it)) {
                rc = fail67(err, "text index option 'textIndexVersion' must be a number");
                break;
            }
            tiv = number_int(&it);
            if (tiv != 2 && tiv != 3) {
                rc = mf_error_set(err, MF_CannotCreateIndex, "bad textIndexVersion: %d", tiv);
                break;
            }
        } else {
            mf_bsonx_append_iter(out, f, -1, &it);
        }
    }
    if (rc == 0) {
        if (!put_w)
            BSON_APPEND_DOCUMENT(out, "weights", &weights);
        if (!put_dl)
            BSON_APPEND_UTF8(out, "default_language", dl);
        if (!put_lo)
            BSON_APPEND_UTF8(out, "language_override", lo);
        if (has_v)
            BSON_APPEND_INT32(out, "v", v);
        BSON_APPEND_INT32(out, "textIndexVersion", tiv);
    }
    bson_destroy(&weights);
    bson_destroy(&fixed_key);
    wmap_free(&m);
    return rc;
}

/* ------------------------------------------------------------ the spec */

void mfi_text_spec_clear(mfi_text_spec *ts)
{
    strv_free(ts->wfields, ts->nweights);
    free(ts->weights);
    free(ts->override);
    strv_free(ts->before, ts->nbefore);
    strv_free(ts->after, ts->nafter);
    memset(ts, 0, sizeof *ts);
}

static int push_str(char ***v, size_t *n, const char *s)
{
    char **x = realloc(*v, (*n + 1) * sizeof *x);
    if (!x)
        return -1;
    *v = x;
    if (!(x[*n] = strdup(s)))
        return -1;
    (*n)++;
    return 0;
}

int mfi_text_spec_init(mfi_text_spec *ts, const bson_t *spec, mf_error *err)
{
    bson_iter_t it;
    bson_t sub;
    memset(ts, 0, sizeof *ts);
    if (!find_field(spec, "weights", &it) || !mf_bsonx_doc_view(&it, &sub))
        return mf_error_set(err, MF_DataCorruption, "found invalid spec for text index");
    bson_iter_init(&it, &sub);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$**") == 0) {
            ts->wildcard = true;
            continue;
        }
        double *w = realloc(ts->weights, (ts->nweights + 1) * sizeof *w);
        if (!w)
            goto nomem;
        ts->weights = w;
        w[ts->nweights] = number_double(&it);
        if (push_str(&ts->wfields, &ts->nweights, bson_iter_key(&it)) != 0)
            goto nomem;
    }
    const char *dl = "english";
    int version = 3;
    if (find_field(spec, "textIndexVersion", &it) && is_num(&it))
        version = number_int(&it);
    if (find_field(spec, "default_language", &it) && BSON_ITER_HOLDS_UTF8(&it))
        dl = bson_iter_utf8(&it, NULL);
    if (!(ts->default_lang = mfi_text_lang_find_v(dl, version))) {
        mfi_text_spec_clear(ts);
        return mf_error_set(err, MF_DataCorruption, "text index: unknown language %s", dl);
    }
    const char *lo = "language";
    if (find_field(spec, "language_override", &it) && BSON_ITER_HOLDS_UTF8(&it))
        lo = bson_iter_utf8(&it, NULL);
    if (!(ts->override = strdup(lo)))
        goto nomem;
    if (!find_field(spec, "key", &it) || !mf_bsonx_doc_view(&it, &sub)) {
        mfi_text_spec_clear(ts);
        return mf_error_set(err, MF_DataCorruption, "found invalid spec for text index");
    }
    bool passed = false;
    bson_iter_init(&it, &sub);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        if (strcmp(f, "_fts") == 0 || strcmp(f, "_ftsx") == 0) {
            passed = true;
            continue;
        }
        if (passed ? push_str(&ts->after, &ts->nafter, f) : push_str(&ts->before, &ts->nbefore, f))
            goto nomem;
    }
    return 0;
nomem:
    mfi_text_spec_clear(ts);
    return oom(err);
}

/* ------------------------------------------------------------ scoring */

void mfi_text_terms_free(mfi_text_terms *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].term);
    free(t->v);
    memset(t, 0, sizeof *t);
}

static size_t terms_find(const mfi_text_terms *t, const char *term, bool *found)
{
    size_t lo = 0, hi = t->n;
    *found = false;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(t->v[mid].term, term);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

double mfi_text_terms_get(const mfi_text_terms *t, const char *term)
{
    bool found;
    size_t i = terms_find(t, term, &found);
    return found ? t->v[i].score : 0;
}

static int terms_add(mfi_text_terms *t, const char *term, double score)
{
    bool found;
    size_t i = terms_find(t, term, &found);
    if (found) {
        t->v[i].score += score;
        return 0;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        mfi_text_term *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return -1;
        t->v = v;
        t->cap = cap;
    }
    char *s = strdup(term);
    if (!s)
        return -1;
    memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
    t->v[i] = (mfi_text_term){s, score};
    t->n++;
    return 0;
}

/* The words of one string, collected. */
typedef struct words {
    char **v;
    size_t n, cap;
} words;

static int words_add(void *arg, const char *w, size_t wl)
{
    words *ws = arg;
    if (ws->n == ws->cap) {
        size_t cap = ws->cap ? ws->cap * 2 : 32;
        char **v = realloc(ws->v, cap * sizeof *v);
        if (!v)
            return -1;
        ws->v = v;
        ws->cap = cap;
    }
    char *s = malloc(wl + 1);
    if (!s)
        return -1;
    memcpy(s, w, wl);
    s[wl] = 0;
    ws->v[ws->n++] = s;
    return 0;
}

static void words_free(words *ws)
{
    strv_free(ws->v, ws->n);
    memset(ws, 0, sizeof *ws);
}

/* mongod's _scoreStringV2: one string of weight `w` into `out`. */
static int score_string(const mfi_text_lang *lang, const char *raw, size_t rawlen, double w,
                        mfi_text_terms *out)
{
    words ws = {0};
    int rc = mfi_text_tokenize(lang, raw, rawlen, MFI_TOK_STOP, words_add, &ws);
    if (rc == 0 && ws.n) {
        qsort(ws.v, ws.n, sizeof *ws.v, cmp_str);
        for (size_t i = 0; rc == 0 && i < ws.n;) {
            size_t j = i;
            double exp = 0, freq = 0;
            while (j < ws.n && strcmp(ws.v[j], ws.v[i]) == 0) {
                exp = exp ? exp * 2 : 1;
                freq += 1 / exp;
                j++;
            }
            double count = (double)(j - i);
            double coeff = (0.5 * count / (double)ws.n) + 0.5;
            double adj = 1;
            size_t tl = strlen(ws.v[i]);
            if (rawlen == tl && strncasecmp(raw, ws.v[i], tl) == 0)
                adj += 0.1;
            rc = terms_add(out, ws.v[i], w * freq * coeff * adj);
            i = j;
        }
    }
    words_free(&ws);
    return rc;
}

/* The element iterator's callback: one string with its weight and language. */
typedef int (*text_fn)(void *arg, const mfi_text_lang *lang, const char *s, size_t len, double w);

/* The language of `obj`: its language override field, else `cur`. */
static int lang_of(const mfi_text_spec *ts, const bson_t *obj, const mfi_text_lang *cur,
                   const mfi_text_lang **out, mf_error *err)
{
    bson_iter_t it;
    *out = cur;
    if (!find_field(obj, ts->override, &it))
        return 0;
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_error_set(err, 17261,
                            "found language override field in document with non-string type");
    const char *name = bson_iter_utf8(&it, NULL);
    if (!(*out = mfi_text_lang_find_v(name, cur->version)))
        return mf_error_set(err, 17262, "language override unsupported: %s", name);
    return 0;
}

/* The weight of `path` (exact), and whether a weighted field lies below it. */
static bool weight_of(const mfi_text_spec *ts, const char *path, double *w, bool *below)
{
    size_t pl = strlen(path);
    bool exact = false;
    *below = false;
    for (size_t i = 0; i < ts->nweights; i++) {
        const char *f = ts->wfields[i];
        if (strcmp(f, path) == 0) {
            exact = true;
            *w = ts->weights[i];
        } else if (strncmp(f, path, pl) == 0 && f[pl] == '.') {
            *below = true;
        }
    }
    if (!exact && ts->wildcard) {
        *w = 1;
        return true;
    }
    return exact;
}

/* mongod's FTSElementIterator: every string the index takes, with its weight
 * and language. */
static int walk(const mfi_text_spec *ts, const bson_t *obj, const char *prefix,
                const mfi_text_lang *lang, text_fn fn, void *arg, mf_error *err)
{
    bson_iter_t it;
    int rc = lang_of(ts, obj, lang, &lang, err);
    if (rc)
        return rc;
    if (!bson_iter_init(&it, obj))
        return 0;
    mf_buf path = {0};
    while (rc == 0 && bson_iter_next(&it)) {
        const char *name = bson_iter_key(&it);
        if (strcmp(name, ts->override) == 0)
            continue;
        path.len = 0;
        if ((*prefix && (mf_buf_append(&path, prefix, strlen(prefix)) != 0 ||
                         mf_buf_append(&path, ".", 1) != 0)) ||
            mf_buf_append(&path, name, strlen(name) + 1) != 0) {
            rc = oom(err);
            break;
        }
        const char *p = (const char *)path.data;
        double w = 0;
        bool below, take = weight_of(ts, p, &w, &below);
        bool descend = ts->wildcard || below;
        bson_t sub;
        if (BSON_ITER_HOLDS_UTF8(&it)) {
            uint32_t len;
            const char *s = bson_iter_utf8(&it, &len);
            if (take)
                rc = fn(arg, lang, s, len, w);
        } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            if (descend && mf_bsonx_doc_view(&it, &sub))
                rc = walk(ts, &sub, p, lang, fn, arg, err);
        } else if (BSON_ITER_HOLDS_ARRAY(&it) && (take || descend)) {
            bson_iter_t el;
            bson_iter_recurse(&it, &el);
            while (rc == 0 && bson_iter_next(&el)) {
                if (BSON_ITER_HOLDS_UTF8(&el) && take) {
                    uint32_t len;
                    const char *s = bson_iter_utf8(&el, &len);
                    rc = fn(arg, lang, s, len, w);
                } else if (BSON_ITER_HOLDS_DOCUMENT(&el) && descend &&
                           mf_bsonx_doc_view(&el, &sub)) {
                    rc = walk(ts, &sub, p, lang, fn, arg, err);
                }
            }
        }
        if (rc == -1)
            rc = oom(err);
    }
    mf_buf_free(&path);
    return rc;
}

static int score_one(void *arg, const mfi_text_lang *lang, const char *s, size_t len, double w)
{
    return score_string(lang, s, len, w, arg);
}

int mfi_text_score_doc(const mfi_text_spec *ts, const bson_t *doc, mfi_text_terms *out,
                       mf_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = walk(ts, doc, "", ts->default_lang, score_one, out, err);
    if (rc)
        mfi_text_terms_free(out);
    return rc;
}

/* ----------------------------------------------------------- the query */

void mfi_text_query_clear(mfi_text_query *q)
{
    free(q->search);
    free(q->lang_name);
    strv_free(q->bounds, q->nbounds);
    strv_free(q->terms, q->nterms);
    strv_free(q->neg_terms, q->nneg_terms);
    strv_free(q->phrases, q->nphrases);
    strv_free(q->neg_phrases, q->nneg_phrases);
    memset(q, 0, sizeof *q);
}

int mfi_text_query_parse(const bson_iter_t *operand, mfi_text_query *q, mf_error *err)
{
    bson_t obj;
    bson_iter_t it;
    memset(q, 0, sizeof *q);
    if (!BSON_ITER_HOLDS_DOCUMENT(operand) || !mf_bsonx_doc_view(operand, &obj))
        return mf_error_set(err, MF_BadValue, "$text expects an object");
    uint32_t expected = 0;
    if (find_field(&obj, "$search", &it)) {
        expected++;
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return mf_error_set(err, MF_TypeMismatch, "$search requires a string value");
        if (!(q->search = strdup(bson_iter_utf8(&it, NULL))))
            return oom(err);
    } else {
        return mf_error_set(err, MF_FailedToParse, "$search required");
    }
    int rc = 0;
    if (find_field(&obj, "$language", &it)) {
        expected++;
        if (!BSON_ITER_HOLDS_UTF8(&it))
            rc = mf_error_set(err, MF_TypeMismatch, "$language requires a string value");
        else if (!(q->lang_name = strdup(bson_iter_utf8(&it, NULL))))
            rc = oom(err);
    }
    if (rc == 0 && find_field(&obj, "$caseSensitive", &it)) {
        expected++;
        if (!BSON_ITER_HOLDS_BOOL(&it))
            rc = mf_error_set(err, MF_TypeMismatch, "$caseSensitive requires a boolean value");
        else
            q->case_sensitive = bson_iter_bool(&it);
    }
    if (rc == 0 && find_field(&obj, "$diacriticSensitive", &it)) {
        expected++;
        if (!BSON_ITER_HOLDS_BOOL(&it))
            rc = mf_error_set(err, MF_TypeMismatch,
                              "$diacriticSensitive requires a boolean value");
        else
            q->diacritic_sensitive = bson_iter_bool(&it);
    }
    if (rc == 0 && bson_count_keys(&obj) != expected)
        rc = mf_error_set(err, MF_BadValue, "extra fields in $text");
    if (rc)
        mfi_text_query_clear(q);
    return rc;
}

/* A sorted, unique set of strings. */
static int set_add(char ***v, size_t *n, const char *s, size_t len)
{
    for (size_t i = 0; i < *n; i++)
        if (strlen((*v)[i]) == len && memcmp((*v)[i], s, len) == 0)
            return 0;
    char **x = realloc(*v, (*n + 1) * sizeof *x);
    if (!x)
        return -1;
    *v = x;
    char *c = malloc(len + 1);
    if (!c)
        return -1;
    memcpy(c, s, len);
    c[len] = 0;
    size_t at = *n;
    while (at > 0 && strcmp(x[at - 1], c) > 0) {
        x[at] = x[at - 1];
        at--;
    }
    x[at] = c;
    (*n)++;
    return 0;
}

typedef struct set_arg {
    char ***v;
    size_t *n;
} set_arg;

static int set_word(void *arg, const char *w, size_t wl)
{
    set_arg *a = arg;
    return set_add(a->v, a->n, w, wl);
}

static bool q_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* mongod's FTSQueryImpl::parse over FTSQueryParser's tokens. */
int mfi_text_query_terms(mfi_text_query *q, const mfi_text_lang *index_default, mf_error *err)
{
    const mfi_text_lang *lang = index_default;
    if (q->lang_name && !(lang = mfi_text_lang_find_v(q->lang_name, index_default->version)))
        return mf_error_set(err, MF_BadValue,
                            "unsupported language: \"%s\" for text index version %d",
                            q->lang_name, index_default->version);
    q->lang = lang;
    mf_buf pos = {0}, neg = {0};
    const char *s = q->search;
    size_t n = strlen(s), i = 0, quote = 0;
    bool in_neg = false, in_phrase = false, prev_ws = true;
    int rc = 0;
    while (i < n && q_space(s[i]))
        i++;
    while (rc == 0 && i < n) {
        size_t start = i++;
        bool delim = s[start] == '-' || s[start] == '"';
        if (!delim)
            while (i < n && !q_space(s[i]) && s[i] != '-' && s[i] != '"')
                i++;
        bool was_ws = prev_ws;
        prev_ws = false;
        while (i < n && q_space(s[i]))
            i++, prev_ws = true;
        if (!delim) {
            if (in_phrase && in_neg)
                continue;
            if (in_neg && was_ws)
                in_neg = false;
            mf_buf *b = in_neg ? &neg : &pos;
            if (mf_buf_append(b, s + start, i - start) != 0 || mf_buf_append(b, " ", 1) != 0)
                rc = -1;
        } else if (s[start] == '-') {
            if (!in_phrase && was_ws)
                in_neg = true;
        } else if (in_phrase) {
            size_t ps = quote + 1;
            rc = in_neg ? set_add(&q->neg_phrases, &q->nneg_phrases, s + ps, start - ps)
                        : set_add(&q->phrases, &q->nphrases, s + ps, start - ps);
            in_phrase = false;
        } else {
            in_phrase = true;
            if (in_neg && was_ws)
                in_neg = false;
            quote = start;
        }
    }
    for (int side = 0; rc == 0 && side < 2; side++) {
        mf_buf *b = side ? &neg : &pos;
        set_arg bounds = {&q->bounds, &q->nbounds};
        set_arg active = side ? (set_arg){&q->neg_terms, &q->nneg_terms}
                              : (set_arg){&q->terms, &q->nterms};
        const char *txt = b->len ? (const char *)b->data : "";
        if (!side)
            rc = mfi_text_tokenize(lang, txt, b->len, MFI_TOK_STOP, set_word, &bounds);
        int opts = MFI_TOK_STOP | (q->case_sensitive ? MFI_TOK_CASE : 0) |
                   (q->diacritic_sensitive ? MFI_TOK_DIACRITIC : 0);
        if (rc == 0)
            rc = mfi_text_tokenize(lang, txt, b->len, opts, set_word, &active);
    }
    mf_buf_free(&pos);
    mf_buf_free(&neg);
    return rc ? oom(err) : 0;
}

/* ------------------------------------------------------ document checks */

/* What in_set returns to stop the tokenizer at a word of the set. */
#define WORD_FOUND (-2)

typedef struct term_check {
    const mfi_text_query *q;
    char *const *set;
    size_t nset;
    bool hit;
    const char *phrase;
    mf_buf hay, needle;
} term_check;

static int in_set(void *arg, const char *w, size_t wl)
{
    term_check *t = arg;
    for (size_t i = 0; i < t->nset; i++)
        if (strlen(t->set[i]) == wl && memcmp(t->set[i], w, wl) == 0) {
            t->hit = true;
            return WORD_FOUND; /* stop */
        }
    return 0;
}

static int check_terms(void *arg, const mfi_text_lang *lang, const char *s, size_t len, double w)
{
    term_check *t = arg;
    (void)w;
    if (t->hit)
        return 0;
    int opts = (t->q->case_sensitive ? MFI_TOK_CASE : 0) |
               (t->q->diacritic_sensitive ? MFI_TOK_DIACRITIC : 0);
    int rc = mfi_text_tokenize(lang, s, len, opts, in_set, t);
    return rc == WORD_FOUND ? 0 : rc;
}

static int check_phrase(void *arg, const mfi_text_lang *lang, const char *s, size_t len,
                        double w)
{
    term_check *t = arg;
    (void)w;
    if (t->hit)
        return 0;
    if (lang->version == 2) { /* mongod's BasicFTSPhraseMatcher: ASCII case */
        t->hay.len = 0;
        if (mf_buf_append(&t->hay, s, len) || mf_buf_append(&t->hay, "", 1))
            return -1;
        const char *h = (const char *)t->hay.data;
        t->hit = t->q->case_sensitive ? strstr(h, t->phrase) != NULL
                                      : strcasestr(h, t->phrase) != NULL;
        return 0;
    }
    bool turkish = strcmp(lang->name, "turkish") == 0;
    if (fold_str(s, len, t->q->case_sensitive, t->q->diacritic_sensitive, turkish, &t->hay) ||
        fold_str(t->phrase, strlen(t->phrase), t->q->case_sensitive, t->q->diacritic_sensitive,
                 turkish, &t->needle) ||
        mf_buf_append(&t->hay, "", 1) || mf_buf_append(&t->needle, "", 1))
        return -1;
    t->hit = strstr((const char *)t->hay.data, (const char *)t->needle.data) != NULL;
    return 0;
}

static int any_term(const mfi_text_spec *ts, const mfi_text_query *q, const bson_t *doc,
                    char *const *set, size_t nset, bool *hit, mf_error *err)
{
    term_check t = {.q = q, .set = set, .nset = nset};
    int rc = nset ? walk(ts, doc, "", ts->default_lang, check_terms, &t, err) : 0;
    *hit = t.hit;
    return rc;
}

static int phrase_in(const mfi_text_spec *ts, const mfi_text_query *q, const bson_t *doc,
                     const char *phrase, bool *hit, mf_error *err)
{
    term_check t = {.q = q, .phrase = phrase};
    int rc = walk(ts, doc, "", ts->default_lang, check_phrase, &t, err);
    mf_buf_free(&t.hay);
    mf_buf_free(&t.needle);
    *hit = t.hit;
    return rc;
}

int mfi_text_doc_matches(const mfi_text_spec *ts, const mfi_text_query *q, const bson_t *doc,
                         bool *match, mf_error *err)
{
    bool hit;
    int rc;
    *match = false;
    if (q->case_sensitive || q->diacritic_sensitive) {
        if ((rc = any_term(ts, q, doc, q->terms, q->nterms, &hit, err)) != 0 || !hit)
            return rc;
    }
    if ((rc = any_term(ts, q, doc, q->neg_terms, q->nneg_terms, &hit, err)) != 0 || hit)
        return rc;
    for (size_t i = 0; i < q->nphrases; i++)
        if ((rc = phrase_in(ts, q, doc, q->phrases[i], &hit, err)) != 0 || !hit)
            return rc;
    for (size_t i = 0; i < q->nneg_phrases; i++)
        if ((rc = phrase_in(ts, q, doc, q->neg_phrases[i], &hit, err)) != 0 || hit)
            return rc;
    *match = true;
    return 0;
}

static void append_strs(bson_t *out, const char *name, char *const *v, size_t n)
{
    bson_t arr;
    char idx[16];
    BSON_APPEND_ARRAY_BEGIN(out, name, &arr);
    for (size_t i = 0; i < n; i++) {
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, idx, sizeof idx);
        bson_append_utf8(&arr, k, -1, v[i], -1);
    }
    bson_append_array_end(out, &arr);
}

void mfi_text_query_explain(const mfi_text_query *q, bson_t *out)
{
    append_strs(out, "terms", q->terms, q->nterms);
    append_strs(out, "negatedTerms", q->neg_terms, q->nneg_terms);
    append_strs(out, "phrases", q->phrases, q->nphrases);
    append_strs(out, "negatedPhrases", q->neg_phrases, q->nneg_phrases);
}

/* ------------------------------------------- $text's place in a filter */

typedef struct text_count {
    size_t n;
    bool in_nor, nested;
} text_count;

static void count_text(const bson_t *f, bool under_nor, bool top, text_count *c,
                       bson_iter_t *operand)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, f))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$text") == 0) {
            c->n++;
            c->in_nor |= under_nor;
            if (top && c->n == 1)
                *operand = it;
            else
                c->nested |= !top;
        } else if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
                   BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t el;
            bson_t sub;
            bool nor = strcmp(k, "$nor") == 0, and_ = strcmp(k, "$and") == 0;
            bson_iter_recurse(&it, &el);
            while (bson_iter_next(&el))
                if (mf_bsonx_doc_view(&el, &sub))
                    count_text(&sub, under_nor || nor, top && and_, c, operand);
        }
    }
}

int mfi_text_find(const bson_t *filter, bson_iter_t *operand, bool *found, bool *under_or,
                  mf_error *err)
{
    text_count c = {0};
    *found = *under_or = false;
    if (!filter)
        return 0;
    count_text(filter, false, true, &c, operand);
    if (c.n > 1)
        return mf_error_set(err, MF_BadValue, "Too many text expressions");
    if (c.n == 1 && c.in_nor)
        return mf_error_set(err, MF_BadValue, "text expression not allowed in nor");
    *found = c.n == 1;
    *under_or = c.n == 1 && c.nested;
    return 0;
}

bool mf_filter_has_text(const bson_t *filter)
{
    text_count c = {0};
    bson_iter_t operand;
    if (filter)
        count_text(filter, false, true, &c, &operand);
    return c.n > 0;
}
