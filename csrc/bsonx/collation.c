/*
 * collation.c -- collations: the language-aware string order an operation,
 * an index or a collection may ask for, through ICU's collator (ucol).
 *
 * A collation document is parsed as mongod's CollatorFactoryICU does:
 *
 *   { locale: "en_US", caseLevel, caseFirst, strength, numericOrdering,
 *     alternate, maxVariable, normalization, backwards, version }
 *
 * `locale` is required; {locale: "simple"} (and nothing else) is the simple
 * binary order, which this module represents as a NULL collator so that
 * every comparison can test `coll == NULL` first and stay on its fast path.
 * An option left out takes the locale's own default, and the full spec --
 * every option filled in, in mongod's order -- is what listIndexes,
 * listCollections and explain show.  `version` is the ICU version in use
 * (U_ICU_VERSION); a spec naming another fails with
 * IncompatibleCollationVersion, because an index built under one ICU's
 * sort keys is not ordered under another's.
 *
 * Strings compare with ucol_strcollUTF8 directly over the stored bytes.  An
 * index key (and a $group or distinct key) holds the ICU sort key instead
 * of the string: sort keys compare with memcmp exactly as ucol_strcoll
 * orders the strings, and strings the collation calls equal have equal
 * sort keys -- so one memcmp-ordered encoding serves every collation.
 *
 * A collator is immutable once made and shared by reference count: ICU's
 * const collator operations are thread-safe, so one collator serves every
 * thread that holds a reference.  Opening an ICU collator costs about as
 * much as a whole find_one, so the last few specs parsed are remembered
 * (by their bytes) with a reference each, and asking again for one of
 * them is a lookup.
 */
#include "bsonx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/ucol.h>
#include <unicode/uloc.h>
#include <unicode/ustring.h>
#include <unicode/uvernum.h>

enum { CASE_FIRST_OFF, CASE_FIRST_UPPER, CASE_FIRST_LOWER };

struct mf_collator {
    atomic_int refs;
    UCollator *ucol;
    char locale[ULOC_FULLNAME_CAPACITY];
    bool case_level, numeric_ordering, normalization, backwards;
    int case_first;      /* CASE_FIRST_* */
    int strength;        /* 1..5 */
    bool shifted;        /* alternate: "shifted" (else "non-ignorable") */
    bool max_var_space;  /* maxVariable: "space" (else "punct") */
};

/* ------------------------------------------------------------- parsing */

static int spec_error(mf_error *err, int code, const bson_t *spec, const char *fmt,
                      const char *a)
{
    char doc[512], msg[256];
    mf_bsonx_to_string(spec, doc, sizeof doc);
    snprintf(msg, sizeof msg, fmt, a);
    return mf_error_set(err, code, "%s%s", msg, doc);
}

/* bsonExtractBooleanField: absent (0, `*found` false), a bool, or
 * TypeMismatch. */
static int get_bool(const bson_t *spec, const char *name, bool *found, bool *out, mf_error *err)
{
    bson_iter_t it;
    *found = bson_iter_init_find(&it, spec, name);
    if (!*found)
        return 0;
    if (!BSON_ITER_HOLDS_BOOL(&it))
        return mf_error_set(err, MF_TypeMismatch,
                            "\"%s\" had the wrong type. Expected bool, found %s", name,
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    *out = bson_iter_bool(&it);
    return 0;
}

/* bsonExtractStringField. */
static int get_string(const bson_t *spec, const char *name, bool *found, const char **out,
                      mf_error *err)
{
    bson_iter_t it;
    *found = bson_iter_init_find(&it, spec, name);
    if (!*found)
        return 0;
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_error_set(err, MF_TypeMismatch,
                            "\"%s\" had the wrong type. Expected string, found %s", name,
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    *out = bson_iter_utf8(&it, NULL);
    return 0;
}

/* bsonExtractIntegerField: a number exactly representable as an int64. */
static int get_integer(const bson_t *spec, const char *name, bool *found, int64_t *out,
                       mf_error *err)
{
    bson_iter_t it;
    *found = bson_iter_init_find(&it, spec, name);
    if (!*found)
        return 0;
    char shown[128];
    switch (bson_iter_type(&it)) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
        *out = bson_iter_as_int64(&it);
        return 0;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(&it);
        if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == (double)(int64_t)d) {
            *out = (int64_t)d;
            return 0;
        }
        break;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dec;
        int sign, e;
        uint64_t hi, lo;
        bson_iter_decimal128(&it, &dec);
        if (mf_bsonx_decimal_parts(&dec, &sign, &hi, &lo, &e) == MF_DEC_FINITE && hi == 0) {
            /* Exact small integers only: enough for a strength of 1-5. */
            uint64_t v = lo;
            for (; e > 0 && v <= UINT64_MAX / 10; e--)
                v *= 10;
            for (; e < 0 && v % 10 == 0; e++)
                v /= 10;
            if (e == 0 && v <= (uint64_t)INT64_MAX) {
                *out = sign < 0 ? -(int64_t)v : (int64_t)v;
                return 0;
            }
        }
        break;
    }
    default:
        return mf_error_set(err, MF_TypeMismatch,
                            "\"%s\" had the wrong type. Expected number, found %s", name,
                            mf_bsonx_type_alias(bson_iter_type(&it)));
    }
    mf_bsonx_elem_to_string(&it, true, shown, sizeof shown);
    return mf_error_set(err, MF_BadValue,
                        "Expected field \"%s\" to have a value exactly representable as a "
                        "64-bit integer, but found %s",
                        name, shown);
}

static int set_attr(mf_collator *c, UColAttribute a, UColAttributeValue v, const char *field,
                    const bson_t *spec, mf_error *err)
{
    UErrorCode st = U_ZERO_ERROR;
    ucol_setAttribute(c->ucol, a, v, &st);
    if (U_FAILURE(st)) {
        char what[160];
        snprintf(what, sizeof what, "Failed to set '%s' attribute: %s. Collation spec: ", field,
                 u_errorName(st));
        return spec_error(err, MF_OperationFailed, spec, "%s", what);
    }
    return 0;
}

static UColAttributeValue get_attr(const mf_collator *c, UColAttribute a)
{
    UErrorCode st = U_ZERO_ERROR;
    UColAttributeValue v = ucol_getAttribute(c->ucol, a, &st);
    return U_FAILURE(st) ? UCOL_DEFAULT : v;
}

/* A boolean option: set on the collator when given (counted in
 * `*parsed`), else read back from the locale's default. */
static int bool_option(mf_collator *c, const bson_t *spec, const char *name, UColAttribute a,
                       bool *field, int *parsed, mf_error *err)
{
    bool found, b = false;
    int rc = get_bool(spec, name, &found, &b, err);
    if (rc != 0)
        return rc;
    if (!found) {
        *field = get_attr(c, a) == UCOL_ON;
        return 0;
    }
    (*parsed)++;
    *field = b;
    return set_attr(c, a, b ? UCOL_ON : UCOL_OFF, name, spec, err);
}

/* The options after `locale`, each set on the collator when given, else
 * read back from the locale's defaults -- in mongod's order, which decides
 * which error a spec with several bad options gets. */
static int parse_options(mf_collator *c, const bson_t *spec, mf_error *err)
{
    int parsed = 1; /* locale */
    bool found;
    const char *s = NULL;
    int64_t n = 0;
    int rc;

    if ((rc = bool_option(c, spec, "caseLevel", UCOL_CASE_LEVEL, &c->case_level, &parsed, err)))
        return rc;

    /* caseFirst */
    if ((rc = get_string(spec, "caseFirst", &found, &s, err)) != 0)
        return rc;
    if (found) {
        parsed++;
        if (strcmp(s, "upper") == 0)
            c->case_first = CASE_FIRST_UPPER;
        else if (strcmp(s, "lower") == 0)
            c->case_first = CASE_FIRST_LOWER;
        else if (strcmp(s, "off") == 0)
            c->case_first = CASE_FIRST_OFF;
        else
            return mf_error_set(err, MF_FailedToParse,
                                "Field 'caseFirst' must be 'upper', 'lower', or 'off'. Got: %s",
                                s);
        static const UColAttributeValue cf[] = {UCOL_OFF, UCOL_UPPER_FIRST, UCOL_LOWER_FIRST};
        if ((rc = set_attr(c, UCOL_CASE_FIRST, cf[c->case_first], "caseFirst", spec, err)))
            return rc;
    } else {
        UColAttributeValue v = get_attr(c, UCOL_CASE_FIRST);
        c->case_first = v == UCOL_UPPER_FIRST   ? CASE_FIRST_UPPER
                        : v == UCOL_LOWER_FIRST ? CASE_FIRST_LOWER
                                                : CASE_FIRST_OFF;
    }

    /* strength */
    if ((rc = get_integer(spec, "strength", &found, &n, err)) != 0)
        return rc;
    if (found) {
        parsed++;
        if (n < 1 || n > 5)
            return mf_error_set(err, MF_FailedToParse,
                                "Field 'strength' must be an integer 1 through 5. Got: %lld",
                                (long long)n);
        c->strength = (int)n;
        static const UColAttributeValue st[] = {UCOL_PRIMARY, UCOL_SECONDARY, UCOL_TERTIARY,
                                                UCOL_QUATERNARY, UCOL_IDENTICAL};
        if ((rc = set_attr(c, UCOL_STRENGTH, st[n - 1], "strength", spec, err)))
            return rc;
    } else {
        switch (get_attr(c, UCOL_STRENGTH)) {
        case UCOL_PRIMARY: c->strength = 1; break;
        case UCOL_SECONDARY: c->strength = 2; break;
        case UCOL_QUATERNARY: c->strength = 4; break;
        case UCOL_IDENTICAL: c->strength = 5; break;
        default: c->strength = 3; break;
        }
    }

    if ((rc = bool_option(c, spec, "numericOrdering", UCOL_NUMERIC_COLLATION,
                          &c->numeric_ordering, &parsed, err)))
        return rc;

    /* alternate */
    if ((rc = get_string(spec, "alternate", &found, &s, err)) != 0)
        return rc;
    if (found) {
        parsed++;
        if (strcmp(s, "non-ignorable") == 0)
            c->shifted = false;
        else if (strcmp(s, "shifted") == 0)
            c->shifted = true;
        else
            return mf_error_set(err, MF_FailedToParse,
                                "Field 'alternate' must be 'non-ignorable' or 'shifted'. Got: %s",
                                s);
        if ((rc = set_attr(c, UCOL_ALTERNATE_HANDLING, c->shifted ? UCOL_SHIFTED : UCOL_NON_IGNORABLE,
                           "alternate", spec, err)))
            return rc;
    } else {
        c->shifted = get_attr(c, UCOL_ALTERNATE_HANDLING) == UCOL_SHIFTED;
    }

    /* maxVariable */
    if ((rc = get_string(spec, "maxVariable", &found, &s, err)) != 0)
        return rc;
    if (found) {
        parsed++;
        if (strcmp(s, "punct") == 0)
            c->max_var_space = false;
        else if (strcmp(s, "space") == 0)
            c->max_var_space = true;
        else
            return mf_error_set(err, MF_FailedToParse,
                                "Field 'maxVariable' must be 'punct' or 'space'. Got: %s", s);
        UErrorCode st = U_ZERO_ERROR;
        ucol_setMaxVariable(c->ucol,
                            c->max_var_space ? UCOL_REORDER_CODE_SPACE
                                             : UCOL_REORDER_CODE_PUNCTUATION,
                            &st);
        if (U_FAILURE(st))
            return spec_error(err, MF_OperationFailed, spec,
                              "Failed to set 'maxVariable' attribute: %s. Collation spec: ",
                              u_errorName(st));
    } else {
        c->max_var_space = ucol_getMaxVariable(c->ucol) == UCOL_REORDER_CODE_SPACE;
    }

    if ((rc = bool_option(c, spec, "normalization", UCOL_NORMALIZATION_MODE, &c->normalization,
                          &parsed, err)) ||
        (rc = bool_option(c, spec, "backwards", UCOL_FRENCH_COLLATION, &c->backwards, &parsed,
                          err)))
        return rc;

    /* version */
    if ((rc = get_string(spec, "version", &found, &s, err)) != 0)
        return rc;
    if (found) {
        parsed++;
        if (strcmp(s, U_ICU_VERSION) != 0) {
            char what[200];
            snprintf(what, sizeof what,
                     "Requested collation version %.40s but the only available collator "
                     "version was " U_ICU_VERSION ". Requested collation spec: ",
                     s);
            return spec_error(err, MF_IncompatibleCollationVersion, spec, "%s", what);
        }
    }

    if (parsed < (int)bson_count_keys(spec))
        return spec_error(err, MF_FailedToParse, spec,
                          "%sCollation spec contains unknown field. Collation spec: ", "");
    return 0;
}

/* validateCollationSpec: option combinations that mean nothing. */
static int validate(const mf_collator *c, mf_error *err)
{
    bson_t full = BSON_INITIALIZER;
    int rc = 0;
    if (c->backwards && c->strength == 1) {
        mf_collator_to_bson(c, &full);
        rc = spec_error(err, MF_BadValue, &full, "%s",
                        "'backwards' is invalid with 'strength' of 1 in: ");
    } else if (c->case_first != CASE_FIRST_OFF && !c->case_level && c->strength <= 2) {
        mf_collator_to_bson(c, &full);
        rc = spec_error(err, MF_BadValue, &full, "%s",
                        "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is "
                        "greater than 2 in: ");
    }
    bson_destroy(&full);
    return rc;
}

/* ---------------------------------------------------------------- cache */

#define CACHE_SLOTS 16

static struct {
    pthread_mutex_t mu;
    struct {
        uint8_t *spec;
        uint32_t len;
        mf_collator *c;
    } slot[CACHE_SLOTS];
    unsigned next; /* the slot to replace next (round robin) */
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static mf_collator *cache_get(const bson_t *spec)
{
    mf_collator *c = NULL;
    pthread_mutex_lock(&cache.mu);
    for (int i = 0; i < CACHE_SLOTS && !c; i++)
        if (cache.slot[i].c && cache.slot[i].len == spec->len &&
            memcmp(cache.slot[i].spec, bson_get_data(spec), spec->len) == 0)
            c = mf_collator_ref(cache.slot[i].c);
    pthread_mutex_unlock(&cache.mu);
    return c;
}

static void cache_put(const bson_t *spec, mf_collator *c)
{
    uint8_t *copy = malloc(spec->len);
    if (!copy)
        return; /* not remembered: nothing else is lost */
    memcpy(copy, bson_get_data(spec), spec->len);
    pthread_mutex_lock(&cache.mu);
    unsigned i = cache.next++ % CACHE_SLOTS;
    uint8_t *old_spec = cache.slot[i].spec;
    mf_collator *old = cache.slot[i].c;
    cache.slot[i].spec = copy;
    cache.slot[i].len = spec->len;
    cache.slot[i].c = mf_collator_ref(c);
    pthread_mutex_unlock(&cache.mu);
    free(old_spec);
    mf_collator_unref(old);
}

static int collator_open(const bson_t *spec, mf_collator **out, mf_error *err);

int mf_collator_new(const bson_t *spec, mf_collator **out, mf_error *err)
{
    if ((*out = cache_get(spec)) != NULL)
        return 0;
    int rc = collator_open(spec, out, err);
    if (rc == 0 && *out)
        cache_put(spec, *out);
    return rc;
}

/* ---------------------------------------------------------------- opening */

static int collator_open(const bson_t *spec, mf_collator **out, mf_error *err)
{
    bool found;
    const char *id = NULL;
    int rc;
    *out = NULL;
    if ((rc = get_string(spec, "locale", &found, &id, err)) != 0)
        return rc;
    if (!found)
        return mf_error_set(err, MF_NoSuchKey, "Missing expected field \"locale\"");
    bson_iter_t it;
    uint32_t idlen;
    bson_iter_init_find(&it, spec, "locale");
    bson_iter_utf8(&it, &idlen);
    if (strlen(id) != idlen)
        return spec_error(err, MF_BadValue, spec, "%s",
                          "Field 'locale' cannot contain null byte. Collation spec: ");
    if (strcmp(id, "simple") == 0) {
        if (bson_count_keys(spec) > 1)
            return spec_error(err, MF_FailedToParse, spec, "%s",
                              "If locale=simple, no other fields should be present in: ");
        return 0; /* the simple collation: no collator */
    }
    if (*id == '\0')
        return spec_error(err, MF_BadValue, spec, "%s",
                          "Field 'locale' cannot be the empty string in: ");

    /* icu::Locale::createFromName: the canonical name, options included. */
    char name[ULOC_FULLNAME_CAPACITY];
    UErrorCode st = U_ZERO_ERROR;
    int32_t nlen = uloc_getName(id, name, (int32_t)sizeof name, &st);
    if (U_FAILURE(st) || st == U_STRING_NOT_TERMINATED_WARNING)
        return spec_error(err, MF_BadValue, spec, "%s", "Field 'locale' is not valid in: ");
    if (nlen <= 0) /* "root" canonicalises to "" */
        snprintf(name, sizeof name, "%s", id);

    mf_collator *c = calloc(1, sizeof *c);
    if (!c)
        return mf_error_oom(err);
    atomic_init(&c->refs, 1);
    snprintf(c->locale, sizeof c->locale, "%s", name);
    st = U_ZERO_ERROR;
    c->ucol = ucol_open(name, &st);
    if (U_FAILURE(st) || !c->ucol) {
        char what[160];
        snprintf(what, sizeof what, "Failed to create collator: %s. Collation spec: ",
                 u_errorName(st));
        rc = spec_error(err, MF_OperationFailed, spec, "%s", what);
        goto fail;
    }

    /* validateLocaleID: ICU must have used the locale exactly as asked --
     * no canonicalisation, no unknown part, no fallback.  The message
     * offers what ICU would have used. */
    st = U_ZERO_ERROR;
    const char *valid = ucol_getLocaleByType(c->ucol, ULOC_VALID_LOCALE, &st);
    if (U_FAILURE(st) || !valid) {
        rc = spec_error(err, MF_OperationFailed, spec, "%s",
                        "Failed to get locale from icu::Collator. Collation spec: ");
        goto fail;
    }
    if (strcmp(id, valid) != 0) {
        char doc[512];
        mf_bsonx_to_string(spec, doc, sizeof doc);
        if (strcmp(valid, "root") != 0 && *valid)
            rc = mf_error_set(err, MF_BadValue,
                              "Field 'locale' is invalid in: %s. Did you mean '%s'?", doc, valid);
        else
            rc = mf_error_set(err, MF_BadValue, "Field 'locale' is invalid in: %s", doc);
        goto fail;
    }

    if ((rc = parse_options(c, spec, err)) != 0 || (rc = validate(c, err)) != 0)
        goto fail;
    *out = c;
    return 0;
fail:
    if (c->ucol)
        ucol_close(c->ucol);
    free(c);
    return rc;
}

int mf_collator_new_doc(const bson_t *spec, mf_collator **out, mf_error *err)
{
    *out = NULL;
    if (bson_empty(spec))
        return 0;
    bson_t wrap = BSON_INITIALIZER;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT(&wrap, "c", spec);
    bson_iter_init_find(&it, &wrap, "c");
    int rc = mf_collator_new_iter(&it, out, err);
    bson_destroy(&wrap);
    return rc;
}

int mf_collator_new_iter(const bson_iter_t *it, mf_collator **out, mf_error *err)
{
    bson_t spec;
    uint32_t len;
    const uint8_t *data;
    *out = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch, "collation must be an object");
    bson_iter_document(it, &len, &data);
    if (!bson_init_static(&spec, data, len))
        return mf_error_set(err, MF_InvalidBSON, "collation is not a valid document");
    return mf_collator_new(&spec, out, err);
}

mf_collator *mf_collator_ref(const mf_collator *c)
{
    mf_collator *m = (mf_collator *)c;
    if (m)
        atomic_fetch_add(&m->refs, 1);
    return m;
}

void mf_collator_unref(mf_collator *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1) {
        ucol_close(c->ucol);
        free(c);
    }
}

/* ---------------------------------------------------------- describing */

void mf_collator_to_bson(const mf_collator *c, bson_t *out)
{
    static const char *const cf[] = {"off", "upper", "lower"};
    if (!c) {
        BSON_APPEND_UTF8(out, "locale", "simple");
        return;
    }
    BSON_APPEND_UTF8(out, "locale", c->locale);
    BSON_APPEND_BOOL(out, "caseLevel", c->case_level);
    BSON_APPEND_UTF8(out, "caseFirst", cf[c->case_first]);
    BSON_APPEND_INT32(out, "strength", c->strength);
    BSON_APPEND_BOOL(out, "numericOrdering", c->numeric_ordering);
    BSON_APPEND_UTF8(out, "alternate", c->shifted ? "shifted" : "non-ignorable");
    BSON_APPEND_UTF8(out, "maxVariable", c->max_var_space ? "space" : "punct");
    BSON_APPEND_BOOL(out, "normalization", c->normalization);
    BSON_APPEND_BOOL(out, "backwards", c->backwards);
    BSON_APPEND_UTF8(out, "version", U_ICU_VERSION);
}

bool mf_collator_equal(const mf_collator *a, const mf_collator *b)
{
    if (a == b)
        return true;
    if (!a || !b)
        return false;
    return strcmp(a->locale, b->locale) == 0 && a->case_level == b->case_level &&
           a->case_first == b->case_first && a->strength == b->strength &&
           a->numeric_ordering == b->numeric_ordering && a->shifted == b->shifted &&
           a->max_var_space == b->max_var_space && a->normalization == b->normalization &&
           a->backwards == b->backwards;
}

/* ---------------------------------------------------------- comparing */

int mf_collator_strcmp(const mf_collator *c, const char *a, size_t al, const char *b, size_t bl)
{
    UErrorCode st = U_ZERO_ERROR;
    UCollationResult r = ucol_strcollUTF8(c->ucol, a, (int32_t)al, b, (int32_t)bl, &st);
    if (U_FAILURE(st)) {
        /* Only on out of memory (the bytes are validated UTF-8): fall
         * back to the binary order rather than call unequal strings
         * equal. */
        size_t n = al < bl ? al : bl;
        int x = n ? memcmp(a, b, n) : 0;
        return x ? (x < 0 ? -1 : 1) : (al < bl ? -1 : al > bl);
    }
    return r == UCOL_LESS ? -1 : r == UCOL_GREATER ? 1 : 0;
}

int mf_collator_sort_key(const mf_collator *c, const char *s, size_t len, mf_buf *out)
{
    UChar stack16[256];
    UChar *u16 = stack16;
    int32_t n16 = 0, rc = -1;
    UErrorCode st = U_ZERO_ERROR;
    if (len > INT32_MAX / 2)
        return -1;
    u_strFromUTF8Lenient(u16, (int32_t)(sizeof stack16 / sizeof *stack16), &n16, s,
                         (int32_t)len, &st);
    if (st == U_BUFFER_OVERFLOW_ERROR) {
        if (!(u16 = malloc(((size_t)n16 + 1) * sizeof *u16)))
            return -1;
        st = U_ZERO_ERROR;
        u_strFromUTF8Lenient(u16, n16 + 1, &n16, s, (int32_t)len, &st);
    }
    if (U_FAILURE(st))
        goto done;
    /* ucol_getSortKey returns the length the key needs, its terminating
     * 0 included; no other byte of a sort key is 0. */
    size_t start = out->len;
    int32_t want = ucol_getSortKey(c->ucol, u16, n16, NULL, 0);
    if (want <= 0 || mf_buf_reserve(out, (size_t)want) != 0)
        goto done;
    int32_t got = ucol_getSortKey(c->ucol, u16, n16, out->data + start, want);
    if (got != want)
        goto done;
    out->len = start + (size_t)want - 1; /* without the terminator */
    rc = 0;
done:
    if (u16 != stack16)
        free(u16);
    return rc;
}
