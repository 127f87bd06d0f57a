/*
 * schema.c -- {$jsonSchema: {...}}: mongod's dialect of JSON Schema draft 4,
 * parsed once into a tree of schemas, then applied to a document's bytes.
 *
 * A schema applies to one value: the document at the top, a property's
 * value below `properties`, an element below `items`.  Each keyword holds
 * only for values of the kind it speaks of and passes every other value:
 *
 *   KEYWORD                                     APPLIES TO
 *   bsonType, type, enum, allOf, anyOf,         every value
 *     oneOf, not
 *   required, properties, patternProperties,    documents
 *     additionalProperties, minProperties,
 *     maxProperties, dependencies
 *   items, additionalItems, minItems,           arrays
 *     maxItems, uniqueItems
 *   minimum, maximum, exclusiveMinimum,         numbers
 *     exclusiveMaximum, multipleOf
 *   minLength, maxLength, pattern               strings
 *   title, description                          nothing (they annotate)
 *
 * Unlike a query's paths, a schema never looks through an array: a
 * property whose value is [1] is an array, not an int.  A property that is
 * missing satisfies its schema (only `required` asks for it).  Equality
 * (enum, uniqueItems) is by value with documents compared whatever the
 * order of their fields, as mongod's UnorderedFieldsBSONElementComparator.
 * The top-level schema's type must allow "object" or nothing matches.
 *
 * The same tree answers why a document failed (mf_schema_explain): the
 * rules it did not satisfy, in the shape mongod 5.0+ gives in a
 * DocumentValidationFailure's errInfo.details.
 */
#include "query_int.h"
#include "schema.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct js js;

typedef struct js_prop {
    char *name;
    js *schema;
} js_prop;

typedef struct js_pattern {
    char *source;
    pcre2_code *re;
    js *schema;
} js_pattern;

typedef struct js_dep {
    char *name;
    js *schema;    /* the schema form, or */
    char **fields; /* the property-list form */
    size_t nfields;
} js_dep;

typedef enum { ADDL_ANY, ADDL_NONE, ADDL_SCHEMA } addl_kind;

struct js {
    bson_t spec;          /* the keywords as given, for specifiedAs */
    bool top;             /* applies to the whole document (not to a property
                             or an item): its scalar and array keywords are
                             checked but hold for every document */
    bool always_false;    /* top, and its type leaves out "object" */
    bool enum_no_object;  /* top, and its enum lists no document */
    /* every value */
    bool has_type;        /* type or bsonType */
    bool type_is_bson;    /* which of the two */
    uint32_t types;       /* MFI_TYPE_* bits */
    bson_t enum_;         /* {"": [values]} when present */
    bool has_enum;
    js **all_of, **any_of, **one_of;
    size_t nall, nany, none;
    js *not_;
    char *description, *title;
    char *deps_title, *deps_description; /* dependencies' own annotations */
    /* documents */
    char **required;
    size_t nrequired;
    js_prop *props;
    size_t nprops;
    bool has_props;
    js_pattern *patterns;
    size_t npatterns;
    bool has_patterns;
    addl_kind addl;
    js *addl_schema;
    bool has_addl;
    int64_t min_props, max_props; /* -1: none */
    js_dep *deps;
    size_t ndeps;
    /* arrays */
    js *items;            /* the schema form, or */
    js **items_list;      /* the list form */
    size_t nitems;
    bool has_items_list;
    addl_kind addl_items; /* only with the list form */
    js *addl_items_schema;
    bool has_addl_items;
    int64_t min_items, max_items;
    bool unique_items;
    /* numbers */
    bson_t minimum, maximum; /* {"": number} when present */
    bool has_min, has_max, excl_min, excl_max;
    bson_t multiple_of;
    bool has_multiple;
    /* strings */
    int64_t min_len, max_len;
    pcre2_code *pattern;
    char *pattern_src;
};

/* ---------------------------------------------------------------- freeing */

static void js_free(js *s);

static void js_list_free(js **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        js_free(v[i]);
    free(v);
}

static void js_free(js *s)
{
    if (!s)
        return;
    bson_destroy(&s->spec);
    bson_destroy(&s->enum_);
    bson_destroy(&s->minimum);
    bson_destroy(&s->maximum);
    bson_destroy(&s->multiple_of);
    js_list_free(s->all_of, s->nall);
    js_list_free(s->any_of, s->nany);
    js_list_free(s->one_of, s->none);
    js_free(s->not_);
    free(s->description);
    free(s->title);
    free(s->deps_title);
    free(s->deps_description);
    for (size_t i = 0; i < s->nrequired; i++)
        free(s->required[i]);
    free(s->required);
    for (size_t i = 0; i < s->nprops; i++) {
        free(s->props[i].name);
        js_free(s->props[i].schema);
    }
    free(s->props);
    for (size_t i = 0; i < s->npatterns; i++) {
        free(s->patterns[i].source);
        pcre2_code_free(s->patterns[i].re);
        js_free(s->patterns[i].schema);
    }
    free(s->patterns);
    js_free(s->addl_schema);
    for (size_t i = 0; i < s->ndeps; i++) {
        free(s->deps[i].name);
        js_free(s->deps[i].schema);
        for (size_t j = 0; j < s->deps[i].nfields; j++)
            free(s->deps[i].fields[j]);
        free(s->deps[i].fields);
    }
    free(s->deps);
    js_free(s->items);
    js_list_free(s->items_list, s->nitems);
    js_free(s->addl_items_schema);
    pcre2_code_free(s->pattern);
    free(s->pattern_src);
    free(s);
}

void mf_schema_free(mf_schema *s)
{
    js_free((js *)s);
}

/* ---------------------------------------------------------------- parsing */

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

static bool is_number(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        return true;
    default:
        return false;
    }
}

/* A number as a double (a decimal through its string). */
static double number_of(const bson_iter_t *it)
{
    if (BSON_ITER_HOLDS_DECIMAL128(it)) {
        bson_decimal128_t dec;
        char str[BSON_DECIMAL128_STRING];
        bson_iter_decimal128(it, &dec);
        bson_decimal128_to_string(&dec, str);
        return strtod(str, NULL);
    }
    return bson_iter_as_double(it);
}

static const char *type_of(const bson_iter_t *it)
{
    return mf_bsonx_type_alias(bson_iter_type(it));
}

static char *dup_utf8(const bson_iter_t *it)
{
    return strdup(bson_iter_utf8(it, NULL));
}

/* Keep the element `it` as {"": value} in `dst`. */
static void keep(bson_t *dst, const bson_iter_t *it)
{
    bson_destroy(dst);
    bson_init(dst);
    mf_bsonx_append_iter(dst, "", 0, it);
}

static bool kept_value(const bson_t *b, bson_iter_t *it)
{
    return bson_iter_init(it, b) && bson_iter_next(it);
}

static int parse_schema(const bson_iter_t *it, bool top, js **out, mf_error *err);

/* A count (minLength, minItems, ...): a whole number >= 0, as mongod's
 * parseIntegerElementToNonNegativeLong words its refusals. */
static int count_arg(const bson_iter_t *it, int64_t *out, mf_error *err)
{
    char e[256];
    mf_bsonx_elem_to_string(it, true, e, sizeof e);
    if (!is_number(it))
        return mf_error_set(err, MF_FailedToParse, "Expected a number in: %s", e);
    if (BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it)) {
        *out = bson_iter_as_int64(it);
    } else {
        double d = number_of(it);
        if (isnan(d))
            return mf_error_set(err, MF_FailedToParse, "Expected an integer, but found NaN in: %s",
                                e);
        if (d != floor(d) && !isinf(d))
            return mf_error_set(err, MF_FailedToParse, "Expected an integer: %s", e);
        if (!(d >= -9.2233720368547758e18 && d < 9.2233720368547758e18))
            return mf_error_set(err, MF_FailedToParse, "Cannot represent as a 64-bit integer: %s",
                                e);
        *out = (int64_t)d;
    }
    if (*out < 0)
        return mf_error_set(err, MF_FailedToParse, "Expected a non-negative number in: %s", e);
    return 0;
}

/* One name of `type` (JSON Schema's names and "number") or of `bsonType`
 * ($type's aliases), into `*mask`. */
static int type_name(const char *s, bool bson, uint32_t *mask, mf_error *err)
{
    static const struct { const char *name; uint32_t bits; } json[] = {
        {"object", 1u << BSON_TYPE_DOCUMENT}, {"array", 1u << BSON_TYPE_ARRAY},
        {"number", MFI_TYPE_NUMBER}, {"boolean", 1u << BSON_TYPE_BOOL},
        {"string", 1u << BSON_TYPE_UTF8}, {"null", 1u << BSON_TYPE_NULL},
    };
    if (strcmp(s, "integer") == 0)
        return mf_error_set(err, MF_FailedToParse,
                            "$jsonSchema type 'integer' is not currently supported.");
    if (strcmp(s, "missing") == 0)
        return mf_error_set(err, MF_BadValue,
                            "'missing' is not a legal type name. To query for non-existence of a "
                            "field, use {$exists:false}.");
    if (!bson) {
        for (size_t i = 0; i < sizeof json / sizeof json[0]; i++)
            if (strcmp(s, json[i].name) == 0) {
                *mask |= json[i].bits;
                return 0;
            }
        return mf_error_set(err, MF_BadValue, "Unknown type name alias: %s", s);
    }
    bson_t one = BSON_INITIALIZER;
    bson_iter_t it;
    uint32_t m = 0;
    BSON_APPEND_UTF8(&one, "", s);
    bson_iter_init(&it, &one);
    bson_iter_next(&it);
    int rc = mfi_type_mask(&it, &m, err);
    bson_destroy(&one);
    *mask |= m;
    return rc;
}

static int parse_types(const bson_iter_t *it, bool bson, js *s, mf_error *err)
{
    const char *kw = bson ? "bsonType" : "type";
    s->has_type = true;
    s->type_is_bson = bson;
    if (BSON_ITER_HOLDS_UTF8(it))
        return type_name(bson_iter_utf8(it, NULL), bson, &s->types, err);
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword '%s' must be either a string or an array of "
                            "strings",
                            kw);
    bson_iter_t el;
    bson_iter_recurse(it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_UTF8(&el))
            return mf_error_set(err, MF_TypeMismatch,
                                "$jsonSchema keyword '%s' array elements must be strings", kw);
        uint32_t before = s->types;
        int rc = type_name(bson_iter_utf8(&el, NULL), bson, &s->types, err);
        if (rc)
            return rc;
        if (s->types == before)
            return mf_error_set(err, MF_FailedToParse,
                                "$jsonSchema keyword '%s' has duplicate value: %s", kw,
                                bson_iter_utf8(&el, NULL));
    }
    if (!s->types)
        return mf_error_set(err, MF_FailedToParse,
                            "$jsonSchema keyword '%s' must name at least one type", kw);
    return 0;
}

/* allOf / anyOf / oneOf: a non-empty array of schemas at the same place. */
static int parse_list(const bson_iter_t *it, const char *kw, bool top, js ***out, size_t *n,
                      mf_error *err)
{
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mf_error_set(err, MF_TypeMismatch, "$jsonSchema keyword '%s' must be an array",
                            kw);
    bson_iter_t el;
    bson_iter_recurse(it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&el))
            return mf_error_set(err, MF_TypeMismatch,
                                "$jsonSchema keyword '%s' must be an array of objects, but found "
                                "an element of type %s",
                                kw, type_of(&el));
        js **v = realloc(*out, (*n + 1) * sizeof *v);
        if (!v)
            return oom(err);
        *out = v;
        int rc = parse_schema(&el, top, &v[*n], err);
        if (rc)
            return rc;
        (*n)++;
    }
    if (*n == 0)
        return mf_error_set(err, MF_BadValue,
                            "$jsonSchema keyword '%s' must be a non-empty array", kw);
    return 0;
}

static int parse_required(const bson_iter_t *it, js *s, mf_error *err)
{
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'required' must be an array, but found an "
                            "element of type %s",
                            type_of(it));
    bson_iter_t el;
    bson_iter_recurse(it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_UTF8(&el))
            return mf_error_set(err, MF_TypeMismatch,
                                "$jsonSchema keyword 'required' must be an array of strings, but "
                                "found an element of type: %s",
                                type_of(&el));
        const char *name = bson_iter_utf8(&el, NULL);
        for (size_t i = 0; i < s->nrequired; i++)
            if (strcmp(s->required[i], name) == 0)
                return mf_error_set(err, MF_FailedToParse,
                                    "$jsonSchema keyword 'required' array cannot contain "
                                    "duplicate values");
        char **v = realloc(s->required, (s->nrequired + 1) * sizeof *v);
        if (!v)
            return oom(err);
        s->required = v;
        if (!(v[s->nrequired] = strdup(name)))
            return oom(err);
        s->nrequired++;
    }
    if (s->nrequired == 0)
        return mf_error_set(err, MF_FailedToParse,
                            "$jsonSchema keyword 'required' cannot be an empty array");
    return 0;
}

static int parse_properties(const bson_iter_t *it, js *s, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'properties' must be an object");
    s->has_props = true;
    bson_iter_t f;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&f))
            return mf_error_set(err, MF_TypeMismatch,
                                "Nested schema for $jsonSchema property '%s' must be an object",
                                bson_iter_key(&f));
        js_prop *v = realloc(s->props, (s->nprops + 1) * sizeof *v);
        if (!v)
            return oom(err);
        s->props = v;
        js_prop *p = &v[s->nprops++];
        *p = (js_prop){strdup(bson_iter_key(&f)), NULL};
        if (!p->name)
            return oom(err);
        int rc = parse_schema(&f, false, &p->schema, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_pattern_props(const bson_iter_t *it, js *s, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'patternProperties' must be an object");
    s->has_patterns = true;
    bson_iter_t f;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&f))
            return mf_error_set(err, MF_TypeMismatch,
                                "$jsonSchema keyword 'patternProperties' has property '%s' which "
                                "is not an object",
                                bson_iter_key(&f));
        js_pattern *v = realloc(s->patterns, (s->npatterns + 1) * sizeof *v);
        if (!v)
            return oom(err);
        s->patterns = v;
        js_pattern *p = &v[s->npatterns++];
        *p = (js_pattern){strdup(bson_iter_key(&f)), NULL, NULL};
        if (!p->source)
            return oom(err);
        /* mongod compiles these with no option at all */
        int code;
        PCRE2_SIZE at;
        p->re = pcre2_compile((PCRE2_SPTR)p->source, PCRE2_ZERO_TERMINATED, 0, &code, &at, NULL);
        if (!p->re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            return mf_error_set(err, MF_BadValue, "Invalid regular expression: %s", (char *)msg);
        }
        int rc = parse_schema(&f, false, &p->schema, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_addl_props(const bson_iter_t *it, js *s, mf_error *err)
{
    s->has_addl = true;
    if (BSON_ITER_HOLDS_BOOL(it)) {
        s->addl = bson_iter_bool(it) ? ADDL_ANY : ADDL_NONE;
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'additionalProperties' must be an object or a "
                            "boolean");
    s->addl = ADDL_SCHEMA;
    return parse_schema(it, false, &s->addl_schema, err);
}

static int parse_items(const bson_iter_t *it, js *s, mf_error *err)
{
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        return parse_schema(it, false, &s->items, err);
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'items' must be an array or an object, not %s",
                            type_of(it));
    s->has_items_list = true;
    bson_iter_t el;
    bson_iter_recurse(it, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&el))
            return mf_error_set(err, MF_TypeMismatch,
                                "$jsonSchema keyword 'items' requires that each element of the "
                                "array is an object, but found a %s",
                                type_of(&el));
        js **v = realloc(s->items_list, (s->nitems + 1) * sizeof *v);
        if (!v)
            return oom(err);
        s->items_list = v;
        int rc = parse_schema(&el, false, &v[s->nitems], err);
        if (rc)
            return rc;
        s->nitems++;
    }
    return 0;
}

static int parse_addl_items(const bson_iter_t *it, js *s, mf_error *err)
{
    s->has_addl_items = true;
    if (BSON_ITER_HOLDS_BOOL(it)) {
        s->addl_items = bson_iter_bool(it) ? ADDL_ANY : ADDL_NONE;
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'additionalItems' must be either an object or a "
                            "boolean, but got a %s",
                            type_of(it));
    s->addl_items = ADDL_SCHEMA;
    return parse_schema(it, false, &s->addl_items_schema, err);
}

static int parse_deps(const bson_iter_t *it, bool top, js *s, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'dependencies' must be an object");
    bson_iter_t f;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        /* mongod takes a string "title" or "description" here as the
         * keyword's own annotation */
        if (BSON_ITER_HOLDS_UTF8(&f) && (strcmp(k, "title") == 0 || strcmp(k, "description") == 0)) {
            char **to = k[0] == 't' ? &s->deps_title : &s->deps_description;
            free(*to);
            if (!(*to = dup_utf8(&f)))
                return oom(err);
            continue;
        }
        js_dep *v = realloc(s->deps, (s->ndeps + 1) * sizeof *v);
        if (!v)
            return oom(err);
        s->deps = v;
        js_dep *d = &v[s->ndeps++];
        *d = (js_dep){strdup(k), NULL, NULL, 0};
        if (!d->name)
            return oom(err);
        if (BSON_ITER_HOLDS_DOCUMENT(&f)) {
            int rc = parse_schema(&f, top, &d->schema, err);
            if (rc)
                return rc;
            continue;
        }
        if (!BSON_ITER_HOLDS_ARRAY(&f))
            return mf_error_set(err, MF_TypeMismatch,
                                "property '%s' in $jsonSchema keyword 'dependencies' must be "
                                "either an object or an array",
                                k);
        bson_iter_t el;
        bson_iter_recurse(&f, &el);
        while (bson_iter_next(&el)) {
            if (!BSON_ITER_HOLDS_UTF8(&el))
                return mf_error_set(err, MF_TypeMismatch,
                                    "array '%s' in $jsonSchema keyword 'dependencies' can only "
                                    "contain strings, but found element of type: %s",
                                    k, type_of(&el));
            const char *name = bson_iter_utf8(&el, NULL);
            for (size_t i = 0; i < d->nfields; i++)
                if (strcmp(d->fields[i], name) == 0)
                    return mf_error_set(err, MF_FailedToParse,
                                        "array '%s' in $jsonSchema keyword 'dependencies' "
                                        "contains duplicate element: %s",
                                        k, name);
            char **fv = realloc(d->fields, (d->nfields + 1) * sizeof *fv);
            if (!fv)
                return oom(err);
            d->fields = fv;
            if (!(fv[d->nfields] = strdup(name)))
                return oom(err);
            d->nfields++;
        }
        if (d->nfields == 0)
            return mf_error_set(err, MF_FailedToParse,
                                "property '%s' in $jsonSchema keyword 'dependencies' cannot be "
                                "an empty array",
                                k);
    }
    return 0;
}

static int parse_enum(const bson_iter_t *it, js *s, mf_error *err)
{
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'enum' must be an array, but found an element "
                            "of type %s",
                            type_of(it));
    bson_iter_t el, prev;
    bson_iter_recurse(it, &el);
    size_t n = 0, objects = 0;
    while (bson_iter_next(&el)) {
        bson_iter_recurse(it, &prev);
        for (size_t i = 0; i < n && bson_iter_next(&prev); i++)
            if (mf_schema_values_equal(&prev, &el))
                return mf_error_set(err, MF_FailedToParse,
                                    "$jsonSchema keyword 'enum' array cannot contain duplicate "
                                    "values.");
        objects += BSON_ITER_HOLDS_DOCUMENT(&el);
        n++;
    }
    if (n == 0)
        return mf_error_set(err, MF_FailedToParse,
                            "$jsonSchema keyword 'enum' cannot be an empty array");
    keep(&s->enum_, it);
    s->has_enum = true;
    s->enum_no_object = s->top && objects == 0;
    return 0;
}

/* The bounds: `maximum` with `exclusiveMaximum`, or the minimum pair. */
static int parse_bound(const bson_iter_t *bound, const bson_iter_t *excl, bool max, js *s,
                       mf_error *err)
{
    const char *kw = max ? "maximum" : "minimum";
    const char *ekw = max ? "exclusiveMaximum" : "exclusiveMinimum";
    if (excl) {
        if (!bound)
            return mf_error_set(err, MF_FailedToParse,
                                "$jsonSchema keyword '%s' must be a present if %s is present", kw,
                                ekw);
        if (!BSON_ITER_HOLDS_BOOL(excl))
            return mf_error_set(err, MF_TypeMismatch, "$jsonSchema keyword '%s' must be a boolean",
                                ekw);
        *(max ? &s->excl_max : &s->excl_min) = bson_iter_bool(excl);
    }
    if (!bound)
        return 0;
    if (!is_number(bound))
        return mf_error_set(err, MF_TypeMismatch, "$jsonSchema keyword '%s' must be a number", kw);
    keep(max ? &s->maximum : &s->minimum, bound);
    *(max ? &s->has_max : &s->has_min) = true;
    return 0;
}

static int parse_multiple_of(const bson_iter_t *m, js *s, mf_error *err)
{
    if (!is_number(m))
        return mf_error_set(err, MF_TypeMismatch,
                            "$jsonSchema keyword 'multipleOf' must be a number");
    double d = number_of(m);
    if (!(d > 0) && !isnan(d))
        return mf_error_set(err, MF_FailedToParse,
                            "$jsonSchema keyword 'multipleOf' must have a positive value");
    if (!s->top && isnan(d))
        return mf_error_set(err, MF_BadValue, "divisor cannot be NaN");
    if (!s->top && isinf(d))
        return mf_error_set(err, MF_BadValue, "divisor cannot be infinite");
    keep(&s->multiple_of, m);
    s->has_multiple = true;
    return 0;
}

static int parse_pattern(const bson_iter_t *it, js *s, mf_error *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, MF_TypeMismatch, "$jsonSchema keyword 'pattern' must be a string");
    if (s->top) /* no effect there, and mongod never compiles it */
        return 0;
    if (!(s->pattern_src = dup_utf8(it)))
        return oom(err);
    int code;
    PCRE2_SIZE at;
    s->pattern = pcre2_compile((PCRE2_SPTR)s->pattern_src, PCRE2_ZERO_TERMINATED, PCRE2_UTF,
                               &code, &at, NULL);
    if (!s->pattern) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return mf_error_set(err, 51091, "Regular expression is invalid: %s", (char *)msg);
    }
    return 0;
}

static const char *const unsupported[] = {"$ref", "$schema", "default", "definitions", "format",
                                          "id"};

enum {
    K_additionalItems, K_additionalProperties, K_allOf, K_anyOf, K_bsonType, K_dependencies,
    K_description, K_encrypt, K_encryptMetadata, K_enum, K_exclusiveMaximum, K_exclusiveMinimum,
    K_items, K_maxItems, K_maxLength, K_maxProperties, K_maximum, K_minItems, K_minLength,
    K_minProperties, K_minimum, K_multipleOf, K_not, K_oneOf, K_pattern, K_patternProperties,
    K_properties, K_required, K_title, K_type, K_uniqueItems, NKEYWORDS
};

static const char *const keywords[NKEYWORDS] = {
    "additionalItems", "additionalProperties", "allOf", "anyOf", "bsonType", "dependencies",
    "description", "encrypt", "encryptMetadata", "enum", "exclusiveMaximum", "exclusiveMinimum",
    "items", "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
    "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern", "patternProperties",
    "properties", "required", "title", "type", "uniqueItems"};

/* The keywords of `s->spec`, checked in mongod's order (so the first
 * error reported is mongod's): annotations, type, the scalar keywords,
 * the array keywords, the object keywords, the logical ones. */
/* Where each keyword was found (a struct, so that an array of them keeps
 * bson_iter_t's alignment). */
typedef struct kw_slot {
    bson_iter_t it;
    bool has;
} kw_slot;

static bson_iter_t *kw_at(kw_slot *at, int k)
{
    return at[k].has ? &at[k].it : NULL;
}

static int parse_keywords(js *s, mf_error *err)
{
    bson_iter_t given;
    kw_slot at[NKEYWORDS];
    for (int i = 0; i < NKEYWORDS; i++)
        at[i].has = false;
    bson_iter_init(&given, &s->spec);
    while (bson_iter_next(&given)) {
        const char *k = bson_iter_key(&given);
        int i;
        for (i = 0; i < NKEYWORDS && strcmp(keywords[i], k) != 0; i++)
            ;
        if (i == NKEYWORDS) {
            for (size_t u = 0; u < sizeof unsupported / sizeof unsupported[0]; u++)
                if (strcmp(unsupported[u], k) == 0)
                    return mf_error_set(err, MF_FailedToParse,
                                        "$jsonSchema keyword '%s' is not currently supported", k);
            return mf_error_set(err, MF_FailedToParse, "Unknown $jsonSchema keyword: %s", k);
        }
        if (at[i].has)
            return mf_error_set(err, MF_FailedToParse, "Duplicate $jsonSchema keyword: %s", k);
        at[i].has = true;
        at[i].it = given;
    }
#define AT(k) kw_at(at, K_##k)
    int rc = 0;
    static const int notes[2] = {K_description, K_title};
    for (int t = 0; t < 2; t++) {
        const bson_iter_t *a = kw_at(at, notes[t]);
        if (!a)
            continue;
        if (!BSON_ITER_HOLDS_UTF8(a))
            return mf_error_set(err, MF_TypeMismatch,
                                "$jsonSchema keyword '%s' must be of type string",
                                keywords[notes[t]]);
        if (!(*(t ? &s->title : &s->description) = dup_utf8(a)))
            return oom(err);
    }
    if (AT(type) && AT(bsonType))
        return mf_error_set(err, MF_FailedToParse,
                            "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'");
    if (AT(encrypt) || AT(encryptMetadata))
        /* client-side field level encryption is not built */
        return mf_error_set(err, MF_NotImplemented,
                            "$jsonSchema keyword '%s' is not supported by MultiforaDB: "
                            "client-side field level encryption is not built",
                            AT(encrypt) ? "encrypt" : "encryptMetadata");
    if (AT(type) || AT(bsonType)) {
        rc = parse_types(AT(type) ? AT(type) : AT(bsonType), !AT(type), s, err);
        if (rc == 0 && s->top && !(s->types & (1u << BSON_TYPE_DOCUMENT)))
            s->always_false = true;
    }
    if (rc == 0 && AT(pattern))
        rc = parse_pattern(AT(pattern), s, err);
    if (rc == 0 && AT(maxLength))
        rc = count_arg(AT(maxLength), &s->max_len, err);
    if (rc == 0 && AT(minLength))
        rc = count_arg(AT(minLength), &s->min_len, err);
    if (rc == 0 && AT(multipleOf))
        rc = parse_multiple_of(AT(multipleOf), s, err);
    if (rc == 0)
        rc = parse_bound(AT(maximum), AT(exclusiveMaximum), true, s, err);
    if (rc == 0)
        rc = parse_bound(AT(minimum), AT(exclusiveMinimum), false, s, err);
    if (rc == 0 && AT(minItems))
        rc = count_arg(AT(minItems), &s->min_items, err);
    if (rc == 0 && AT(maxItems))
        rc = count_arg(AT(maxItems), &s->max_items, err);
    if (rc == 0 && AT(uniqueItems)) {
        if (!BSON_ITER_HOLDS_BOOL(AT(uniqueItems)))
            return mf_error_set(err, MF_TypeMismatch,
                                "$jsonSchema keyword 'uniqueItems' must be a boolean");
        s->unique_items = bson_iter_bool(AT(uniqueItems));
    }
    if (rc == 0 && AT(items))
        rc = parse_items(AT(items), s, err);
    if (rc == 0 && AT(additionalItems))
        rc = parse_addl_items(AT(additionalItems), s, err);
    if (rc == 0 && AT(required))
        rc = parse_required(AT(required), s, err);
    if (rc == 0 && AT(properties))
        rc = parse_properties(AT(properties), s, err);
    if (rc == 0 && AT(patternProperties))
        rc = parse_pattern_props(AT(patternProperties), s, err);
    if (rc == 0 && AT(additionalProperties))
        rc = parse_addl_props(AT(additionalProperties), s, err);
    if (rc == 0 && AT(minProperties))
        rc = count_arg(AT(minProperties), &s->min_props, err);
    if (rc == 0 && AT(maxProperties))
        rc = count_arg(AT(maxProperties), &s->max_props, err);
    if (rc == 0 && AT(dependencies))
        rc = parse_deps(AT(dependencies), s->top, s, err);
    if (rc == 0 && AT(allOf))
        rc = parse_list(AT(allOf), "allOf", s->top, &s->all_of, &s->nall, err);
    if (rc == 0 && AT(anyOf))
        rc = parse_list(AT(anyOf), "anyOf", s->top, &s->any_of, &s->nany, err);
    if (rc == 0 && AT(oneOf))
        rc = parse_list(AT(oneOf), "oneOf", s->top, &s->one_of, &s->none, err);
    if (rc == 0 && AT(not)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(AT(not)))
            return mf_error_set(err, MF_TypeMismatch,
                                "$jsonSchema keyword 'not' must be an object, but found an "
                                "element of type %s",
                                type_of(AT(not)));
        rc = parse_schema(AT(not), s->top, &s->not_, err);
    }
    if (rc == 0 && AT(enum))
        rc = parse_enum(AT(enum), s, err);
#undef AT
    return rc;
}

static int parse_schema(const bson_iter_t *it, bool top, js **out, mf_error *err)
{
    js *s = calloc(1, sizeof *s);
    if (!s)
        return oom(err);
    bson_init(&s->enum_);
    bson_init(&s->minimum);
    bson_init(&s->maximum);
    bson_init(&s->multiple_of);
    s->top = top;
    s->min_props = s->max_props = s->min_items = s->max_items = -1;
    s->min_len = s->max_len = -1;
    uint32_t len;
    const uint8_t *data;
    bson_t given;
    bson_iter_document(it, &len, &data);
    if (!bson_init_static(&given, data, len)) {
        bson_init(&s->spec);
        js_free(s);
        return mf_error_set(err, MF_BadValue, "$jsonSchema: a damaged document");
    }
    bson_copy_to(&given, &s->spec);
    int rc = parse_keywords(s, err);
    if (rc) {
        js_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int mf_schema_parse(const bson_iter_t *it, mf_schema **out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch, "$jsonSchema must be an object");
    js *s;
    int rc = parse_schema(it, true, &s, err);
    if (rc == 0)
        *out = (mf_schema *)s;
    return rc;
}

/* ------------------------------------------------------------- equality */

static bool equal_unordered(const bson_iter_t *a, const bson_iter_t *b);

/* Documents equal whatever the order of their fields: the same names,
 * each with equal values (no two fields of one document share a name in
 * what this compares; a repeated name compares its first value). */
static bool docs_equal_unordered(const bson_iter_t *a, const bson_iter_t *b)
{
    bson_iter_t x, y;
    size_t na = 0, nb = 0;
    bson_iter_recurse(a, &x);
    while (bson_iter_next(&x))
        na++;
    bson_iter_recurse(b, &y);
    while (bson_iter_next(&y))
        nb++;
    if (na != nb)
        return false;
    bson_iter_recurse(a, &x);
    while (bson_iter_next(&x)) {
        bson_iter_recurse(b, &y);
        if (!bson_iter_find(&y, bson_iter_key(&x)) || !equal_unordered(&x, &y))
            return false;
    }
    return true;
}

static bool equal_unordered(const bson_iter_t *a, const bson_iter_t *b)
{
    bson_type_t ta = bson_iter_type(a), tb = bson_iter_type(b);
    if (ta == BSON_TYPE_DOCUMENT && tb == BSON_TYPE_DOCUMENT)
        return docs_equal_unordered(a, b);
    if (ta == BSON_TYPE_ARRAY && tb == BSON_TYPE_ARRAY) {
        bson_iter_t x, y;
        bson_iter_recurse(a, &x);
        bson_iter_recurse(b, &y);
        for (;;) {
            bool mx = bson_iter_next(&x), my = bson_iter_next(&y);
            if (mx != my)
                return false;
            if (!mx)
                return true;
            if (!equal_unordered(&x, &y))
                return false;
        }
    }
    return mf_bsonx_compare_values(a, b) == 0;
}

bool mf_schema_values_equal(const bson_iter_t *a, const bson_iter_t *b)
{
    return equal_unordered(a, b);
}

/* ----------------------------------------------------------- evaluation */

/* A value a schema applies to: an element, or the whole document. */
typedef struct jv {
    const bson_iter_t *it; /* NULL: `doc` */
    const bson_t *doc;
} jv;

static bson_type_t jv_type(const jv *v)
{
    return v->it ? bson_iter_type(v->it) : BSON_TYPE_DOCUMENT;
}

/* An iterator over the fields (elements) of a document (array) value. */
static void jv_children(const jv *v, bson_iter_t *out)
{
    if (v->it)
        bson_iter_recurse(v->it, out);
    else
        bson_iter_init(out, v->doc);
}

static void append_jv(bson_t *to, const char *key, const jv *v)
{
    if (v->it)
        mf_bsonx_append_iter(to, key, (int)strlen(key), v->it);
    else
        bson_append_document(to, key, -1, v->doc);
}

static bool is_numeric_type(bson_type_t t)
{
    return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
}

static bool type_allows(uint32_t mask, bson_type_t t)
{
    if (t == BSON_TYPE_MINKEY)
        return mask & MFI_TYPE_MINKEY;
    if (t == BSON_TYPE_MAXKEY)
        return mask & MFI_TYPE_MAXKEY;
    if ((mask & MFI_TYPE_NUMBER) && is_numeric_type(t))
        return true;
    return t < 32 && (mask & (1u << t));
}

/* An output array under construction. */
typedef struct arr {
    bson_t b;
    uint32_t n;
} arr;

static void arr_init(arr *a)
{
    bson_init(&a->b);
    a->n = 0;
}

static void arr_key(arr *a, const char **key, char *buf)
{
    bson_uint32_to_string(a->n++, key, buf, 16);
}

static void arr_doc(arr *a, const bson_t *d)
{
    char buf[16];
    const char *key;
    arr_key(a, &key, buf);
    bson_append_document(&a->b, key, -1, d);
}

static void arr_utf8(arr *a, const char *s)
{
    char buf[16];
    const char *key;
    arr_key(a, &key, buf);
    bson_append_utf8(&a->b, key, -1, s, -1);
}

static void arr_iter(arr *a, const bson_iter_t *it)
{
    char buf[16];
    const char *key;
    arr_key(a, &key, buf);
    mf_bsonx_append_iter(&a->b, key, (int)strlen(key), it);
}

static void arr_int(arr *a, int32_t v)
{
    char buf[16];
    const char *key;
    arr_key(a, &key, buf);
    bson_append_int32(&a->b, key, -1, v);
}

/* Add {operatorName: kw, specifiedAs: {kw: <as given>[, also: <as given>]}}
 * to a fresh rule `r`. */
static void rule_begin(bson_t *r, const js *s, const char *kw, const char *also)
{
    bson_t sa;
    bson_iter_t it;
    bson_init(r);
    BSON_APPEND_UTF8(r, "operatorName", kw);
    if (!also && !bson_iter_init_find(&it, &s->spec, kw))
        return;
    BSON_APPEND_DOCUMENT_BEGIN(r, "specifiedAs", &sa);
    if (bson_iter_init_find(&it, &s->spec, kw))
        mf_bsonx_append_iter(&sa, kw, (int)strlen(kw), &it);
    if (also && bson_iter_init_find(&it, &s->spec, also))
        mf_bsonx_append_iter(&sa, also, (int)strlen(also), &it);
    bson_append_document_end(r, &sa);
}

static void rule_done(arr *o, bson_t *r)
{
    arr_doc(o, r);
    bson_destroy(r);
}

static void annotations(bson_t *to, const js *s)
{
    if (s->title)
        BSON_APPEND_UTF8(to, "title", s->title);
    if (s->description)
        BSON_APPEND_UTF8(to, "description", s->description);
}

static bool check(const js *s, const jv *v, arr *o);

/* `s` applied to `v`, its failed rules (if asked for) into `details`. */
static bool check_sub(const js *s, const jv *v, arr *details)
{
    if (details)
        arr_init(details);
    return check(s, v, details);
}

/* Whether the bound (kept as {"": n}) holds for the number `v`. */
static bool bound_ok(const bson_t *bound, bool exclusive, bool max, const bson_iter_t *v)
{
    bson_iter_t b;
    kept_value(bound, &b);
    bool vn = false, bn = false;
    if (BSON_ITER_HOLDS_DOUBLE(v) || BSON_ITER_HOLDS_DECIMAL128(v))
        vn = isnan(number_of(v));
    if (BSON_ITER_HOLDS_DOUBLE(&b) || BSON_ITER_HOLDS_DECIMAL128(&b))
        bn = isnan(number_of(&b));
    if (vn || bn)
        return vn && bn && !exclusive;
    int c = mf_bsonx_compare_values(v, &b);
    if (max)
        return exclusive ? c < 0 : c <= 0;
    return exclusive ? c > 0 : c >= 0;
}

static mf_dec dec_of(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DECIMAL128: {
        mf_dec d;
        bson_iter_decimal128(it, &d);
        return d;
    }
    case BSON_TYPE_DOUBLE:
        return mf_dec_from_double(bson_iter_double(it));
    default:
        return mf_dec_from_int64(bson_iter_as_int64(it));
    }
}

/* multipleOf, in decimal arithmetic as mongod (0.3 is a multiple of 0.1). */
static bool multiple_ok(const bson_t *divisor, const bson_iter_t *v)
{
    bson_iter_t d;
    kept_value(divisor, &d);
    if ((BSON_ITER_HOLDS_INT32(v) || BSON_ITER_HOLDS_INT64(v)) &&
        (BSON_ITER_HOLDS_INT32(&d) || BSON_ITER_HOLDS_INT64(&d))) {
        int64_t a = bson_iter_as_int64(v), b = bson_iter_as_int64(&d);
        return b == -1 || a % b == 0;
    }
    mf_dec r = mf_dec_mod(dec_of(v), dec_of(&d));
    return !mf_dec_isnan(r) && mf_dec_iszero(r);
}

/* The length of a UTF-8 string in code points. */
static int64_t code_points(const char *s, uint32_t len)
{
    int64_t n = 0;
    for (uint32_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

static bool re_search(const pcre2_code *re, const char *s, size_t len)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return false;
    int rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

#define FAILED()                                                                                   \
    do {                                                                                           \
        ok = false;                                                                                \
        if (!o)                                                                                    \
            return false;                                                                          \
    } while (0)

static bool check_string(const js *s, const bson_iter_t *v, arr *o)
{
    bool ok = true;
    uint32_t len;
    const char *str = bson_iter_utf8(v, &len);
    bson_t r;
    if (s->pattern && !re_search(s->pattern, str, len)) {
        FAILED();
        rule_begin(&r, s, "pattern", NULL);
        BSON_APPEND_UTF8(&r, "reason", "regular expression did not match");
        mf_bsonx_append_iter(&r, "consideredValue", 15, v);
        rule_done(o, &r);
    }
    int64_t n = (s->max_len >= 0 || s->min_len >= 0) ? code_points(str, len) : 0;
    for (int m = 0; m < 2; m++) {
        int64_t lim = m ? s->min_len : s->max_len;
        if (lim < 0 || (m ? n >= lim : n <= lim))
            continue;
        FAILED();
        rule_begin(&r, s, m ? "minLength" : "maxLength", NULL);
        BSON_APPEND_UTF8(&r, "reason", "specified string length was not satisfied");
        mf_bsonx_append_iter(&r, "consideredValue", 15, v);
        rule_done(o, &r);
    }
    return ok;
}

static bool check_number(const js *s, const bson_iter_t *v, arr *o)
{
    bool ok = true;
    bson_t r;
    if (s->has_multiple && !multiple_ok(&s->multiple_of, v)) {
        FAILED();
        rule_begin(&r, s, "multipleOf", NULL);
        BSON_APPEND_UTF8(&r, "reason", "considered value is not a multiple of the specified value");
        mf_bsonx_append_iter(&r, "consideredValue", 15, v);
        rule_done(o, &r);
    }
    for (int m = 0; m < 2; m++) { /* maximum, then minimum */
        bool has = m ? s->has_min : s->has_max, excl = m ? s->excl_min : s->excl_max;
        if (!has || bound_ok(m ? &s->minimum : &s->maximum, excl, !m, v))
            continue;
        FAILED();
        rule_begin(&r, s, m ? "minimum" : "maximum",
                   excl ? (m ? "exclusiveMinimum" : "exclusiveMaximum") : NULL);
        BSON_APPEND_UTF8(&r, "reason", "comparison failed");
        mf_bsonx_append_iter(&r, "consideredValue", 15, v);
        rule_done(o, &r);
    }
    return ok;
}

static bool check_array(const js *s, const bson_iter_t *v, arr *o)
{
    bool ok = true;
    bson_t r;
    bson_iter_t el, prev;
    int64_t n = 0;
    bson_iter_recurse(v, &el);
    while (bson_iter_next(&el))
        n++;
    for (int m = 0; m < 2; m++) {
        int64_t lim = m ? s->max_items : s->min_items;
        if (lim < 0 || (m ? n <= lim : n >= lim))
            continue;
        FAILED();
        rule_begin(&r, s, m ? "maxItems" : "minItems", NULL);
        BSON_APPEND_UTF8(&r, "reason", "array did not match specified length");
        mf_bsonx_append_iter(&r, "consideredValue", 15, v);
        BSON_APPEND_INT32(&r, "numberOfItems", (int32_t)n);
        rule_done(o, &r);
    }
    if (s->unique_items) {
        bool dup = false;
        int64_t i = 0;
        bson_iter_recurse(v, &el);
        while (!dup && bson_iter_next(&el)) {
            bson_iter_recurse(v, &prev);
            for (int64_t j = 0; j < i && bson_iter_next(&prev); j++)
                if (equal_unordered(&prev, &el)) {
                    dup = true;
                    break;
                }
            i++;
        }
        if (dup) {
            FAILED();
            rule_begin(&r, s, "uniqueItems", NULL);
            BSON_APPEND_UTF8(&r, "reason", "found a duplicate item");
            mf_bsonx_append_iter(&r, "consideredValue", 15, v);
            mf_bsonx_append_iter(&r, "duplicatedValue", 15, &el);
            rule_done(o, &r);
        }
    }
    if (s->items) { /* one schema: every element; the first failure is told */
        int32_t i = 0;
        bson_iter_recurse(v, &el);
        while (bson_iter_next(&el)) {
            jv e = {&el, NULL};
            arr d;
            if (!check_sub(s->items, &e, o ? &d : NULL)) {
                FAILED();
                bson_init(&r);
                BSON_APPEND_UTF8(&r, "operatorName", "items");
                annotations(&r, s->items);
                BSON_APPEND_UTF8(&r, "reason", "At least one item did not match the sub-schema");
                BSON_APPEND_INT32(&r, "itemIndex", i);
                bson_append_array(&r, "details", -1, &d.b);
                bson_destroy(&d.b);
                rule_done(o, &r);
                break;
            }
            if (o)
                bson_destroy(&d.b);
            i++;
        }
    }
    if (s->has_items_list) {
        arr fails;
        int32_t i = 0;
        if (o)
            arr_init(&fails);
        bson_iter_recurse(v, &el);
        while ((size_t)i < s->nitems && bson_iter_next(&el)) {
            jv e = {&el, NULL};
            arr d;
            if (!check_sub(s->items_list[i], &e, o ? &d : NULL)) {
                FAILED();
                bson_t f = BSON_INITIALIZER;
                BSON_APPEND_INT32(&f, "itemIndex", i);
                bson_append_array(&f, "details", -1, &d.b);
                arr_doc(&fails, &f);
                bson_destroy(&f);
            }
            if (o)
                bson_destroy(&d.b);
            i++;
        }
        if (o && fails.n) {
            bson_init(&r);
            BSON_APPEND_UTF8(&r, "operatorName", "items");
            bson_append_array(&r, "details", -1, &fails.b);
            rule_done(o, &r);
        }
        if (o)
            bson_destroy(&fails.b);
        /* additionalItems: the elements past the list */
        if (s->has_addl_items && s->addl_items == ADDL_NONE && n > (int64_t)s->nitems) {
            FAILED();
            arr extra;
            arr_init(&extra);
            bson_iter_recurse(v, &el);
            for (int64_t j = 0; bson_iter_next(&el); j++)
                if (j >= (int64_t)s->nitems)
                    arr_iter(&extra, &el);
            rule_begin(&r, s, "additionalItems", NULL);
            BSON_APPEND_UTF8(&r, "reason", "found additional items");
            bson_append_array(&r, "additionalItems", -1, &extra.b);
            bson_destroy(&extra.b);
            rule_done(o, &r);
        } else if (s->has_addl_items && s->addl_items == ADDL_SCHEMA) {
            bson_iter_recurse(v, &el);
            for (int32_t j = 0; bson_iter_next(&el); j++) {
                if (j < (int32_t)s->nitems)
                    continue;
                jv e = {&el, NULL};
                arr d;
                if (!check_sub(s->addl_items_schema, &e, o ? &d : NULL)) {
                    FAILED();
                    bson_init(&r);
                    BSON_APPEND_UTF8(&r, "operatorName", "additionalItems");
                    annotations(&r, s->addl_items_schema);
                    BSON_APPEND_UTF8(&r, "reason",
                                     "At least one additional item did not match the sub-schema");
                    BSON_APPEND_INT32(&r, "itemIndex", j);
                    bson_append_array(&r, "details", -1, &d.b);
                    bson_destroy(&d.b);
                    rule_done(o, &r);
                    break;
                }
                if (o)
                    bson_destroy(&d.b);
            }
        }
    }
    return ok;
}

static bool is_listed_property(const js *s, const char *k)
{
    for (size_t i = 0; i < s->nprops; i++)
        if (strcmp(s->props[i].name, k) == 0)
            return true;
    return false;
}

static bool matches_a_pattern(const js *s, const char *k, uint32_t klen)
{
    for (size_t i = 0; i < s->npatterns; i++)
        if (re_search(s->patterns[i].re, k, klen))
            return true;
    return false;
}

static bool has_field(const jv *v, const char *name)
{
    bson_iter_t f;
    jv_children(v, &f);
    return bson_iter_find(&f, name);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool check_object(const js *s, const jv *v, arr *o)
{
    bool ok = true;
    bson_t r;
    bson_iter_t f;
    if (s->has_props) {
        arr fails;
        if (o)
            arr_init(&fails);
        for (size_t i = 0; i < s->nprops; i++) {
            jv_children(v, &f);
            if (!bson_iter_find(&f, s->props[i].name))
                continue;
            jv e = {&f, NULL};
            arr d;
            if (!check_sub(s->props[i].schema, &e, o ? &d : NULL)) {
                FAILED();
                if (d.n) {
                    bson_t p = BSON_INITIALIZER;
                    BSON_APPEND_UTF8(&p, "propertyName", s->props[i].name);
                    annotations(&p, s->props[i].schema);
                    bson_append_array(&p, "details", -1, &d.b);
                    arr_doc(&fails, &p);
                    bson_destroy(&p);
                }
            }
            if (o)
                bson_destroy(&d.b);
        }
        if (o && fails.n) {
            bson_init(&r);
            BSON_APPEND_UTF8(&r, "operatorName", "properties");
            bson_append_array(&r, "propertiesNotSatisfied", -1, &fails.b);
            rule_done(o, &r);
        }
        if (o)
            bson_destroy(&fails.b);
    }
    if (s->has_addl && s->addl == ADDL_NONE) {
        arr extra;
        if (o)
            arr_init(&extra);
        bool any = false;
        jv_children(v, &f);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (is_listed_property(s, k) || matches_a_pattern(s, k, bson_iter_key_len(&f)))
                continue;
            any = true;
            if (!o)
                break;
            arr_utf8(&extra, k);
        }
        if (any) {
            FAILED();
            rule_begin(&r, s, "additionalProperties", NULL);
            bson_append_array(&r, "additionalProperties", -1, &extra.b);
            rule_done(o, &r);
        }
        if (o)
            bson_destroy(&extra.b);
    } else if (s->has_addl && s->addl == ADDL_SCHEMA) {
        jv_children(v, &f);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (is_listed_property(s, k) || matches_a_pattern(s, k, bson_iter_key_len(&f)))
                continue;
            jv e = {&f, NULL};
            arr d;
            if (!check_sub(s->addl_schema, &e, o ? &d : NULL)) {
                FAILED();
                bson_init(&r);
                BSON_APPEND_UTF8(&r, "operatorName", "additionalProperties");
                annotations(&r, s->addl_schema);
                BSON_APPEND_UTF8(&r, "reason",
                                 "at least one additional property did not match the subschema");
                BSON_APPEND_UTF8(&r, "failingProperty", k);
                bson_append_array(&r, "details", -1, &d.b);
                bson_destroy(&d.b);
                rule_done(o, &r);
                break;
            }
            if (o)
                bson_destroy(&d.b);
        }
    }
    if (s->has_patterns) {
        arr fails;
        if (o)
            arr_init(&fails);
        for (size_t i = 0; i < s->npatterns; i++) {
            jv_children(v, &f);
            while (bson_iter_next(&f)) {
                const char *k = bson_iter_key(&f);
                if (!re_search(s->patterns[i].re, k, bson_iter_key_len(&f)))
                    continue;
                jv e = {&f, NULL};
                arr d;
                if (!check_sub(s->patterns[i].schema, &e, o ? &d : NULL)) {
                    FAILED();
                    bson_t p = BSON_INITIALIZER;
                    BSON_APPEND_UTF8(&p, "propertyName", k);
                    annotations(&p, s->patterns[i].schema);
                    BSON_APPEND_UTF8(&p, "regexMatched", s->patterns[i].source);
                    bson_append_array(&p, "details", -1, &d.b);
                    arr_doc(&fails, &p);
                    bson_destroy(&p);
                    bson_destroy(&d.b);
                    break;
                }
                if (o)
                    bson_destroy(&d.b);
            }
        }
        if (o && fails.n) {
            bson_init(&r);
            BSON_APPEND_UTF8(&r, "operatorName", "patternProperties");
            bson_append_array(&r, "details", -1, &fails.b);
            rule_done(o, &r);
        }
        if (o)
            bson_destroy(&fails.b);
    }
    if (s->nrequired) {
        const char **missing = o ? calloc(s->nrequired, sizeof *missing) : NULL;
        size_t nmissing = 0;
        for (size_t i = 0; i < s->nrequired; i++) {
            if (has_field(v, s->required[i]))
                continue;
            FAILED();
            if (missing)
                missing[nmissing++] = s->required[i];
        }
        if (nmissing) {
            arr m;
            arr_init(&m);
            qsort(missing, nmissing, sizeof *missing, cmp_names);
            for (size_t i = 0; i < nmissing; i++)
                arr_utf8(&m, missing[i]);
            rule_begin(&r, s, "required", NULL);
            bson_append_array(&r, "missingProperties", -1, &m.b);
            bson_destroy(&m.b);
            rule_done(o, &r);
        }
        free(missing);
    }
    if (s->min_props >= 0 || s->max_props >= 0) {
        int64_t n = 0;
        jv_children(v, &f);
        while (bson_iter_next(&f))
            n++;
        for (int m = 0; m < 2; m++) {
            int64_t lim = m ? s->max_props : s->min_props;
            if (lim < 0 || (m ? n <= lim : n >= lim))
                continue;
            FAILED();
            rule_begin(&r, s, m ? "maxProperties" : "minProperties", NULL);
            BSON_APPEND_UTF8(&r, "reason", "specified number of properties was not satisfied");
            BSON_APPEND_INT32(&r, "numberOfProperties", (int32_t)n);
            rule_done(o, &r);
        }
    }
    if (s->ndeps) {
        arr fails;
        if (o)
            arr_init(&fails);
        for (size_t i = 0; i < s->ndeps; i++) {
            const js_dep *d = &s->deps[i];
            if (!has_field(v, d->name))
                continue;
            bson_t fd = BSON_INITIALIZER;
            if (d->schema) {
                arr sub;
                if (!check_sub(d->schema, v, o ? &sub : NULL)) {
                    FAILED();
                    BSON_APPEND_UTF8(&fd, "conditionalProperty", d->name);
                    bson_append_array(&fd, "details", -1, &sub.b);
                    arr_doc(&fails, &fd);
                }
                if (o)
                    bson_destroy(&sub.b);
            } else {
                arr m;
                arr_init(&m);
                for (size_t j = 0; j < d->nfields; j++)
                    if (!has_field(v, d->fields[j]))
                        arr_utf8(&m, d->fields[j]);
                if (m.n && !o) {
                    bson_destroy(&m.b);
                    bson_destroy(&fd);
                    return false;
                }
                if (m.n) {
                    ok = false;
                    BSON_APPEND_UTF8(&fd, "conditionalProperty", d->name);
                    bson_append_array(&fd, "missingProperties", -1, &m.b);
                    arr_doc(&fails, &fd);
                }
                bson_destroy(&m.b);
            }
            bson_destroy(&fd);
        }
        if (o && fails.n) {
            bson_init(&r);
            BSON_APPEND_UTF8(&r, "operatorName", "dependencies");
            if (s->deps_title)
                BSON_APPEND_UTF8(&r, "title", s->deps_title);
            if (s->deps_description)
                BSON_APPEND_UTF8(&r, "description", s->deps_description);
            bson_append_array(&r, "failingDependencies", -1, &fails.b);
            rule_done(o, &r);
        }
        if (o)
            bson_destroy(&fails.b);
    }
    return ok;
}

/* {index, title?, description?, details} for a schema of a list. */
static void list_entry(arr *to, int32_t i, const js *s, const arr *d)
{
    bson_t e = BSON_INITIALIZER;
    BSON_APPEND_INT32(&e, "index", i);
    annotations(&e, s);
    bson_append_array(&e, "details", -1, &d->b);
    arr_doc(to, &e);
    bson_destroy(&e);
}

static bool check_logic(const js *s, const jv *v, arr *o)
{
    bool ok = true;
    bson_t r;
    if (s->nall) {
        arr fails;
        if (o)
            arr_init(&fails);
        for (size_t i = 0; i < s->nall; i++) {
            arr d;
            if (!check_sub(s->all_of[i], v, o ? &d : NULL)) {
                FAILED();
                list_entry(&fails, (int32_t)i, s->all_of[i], &d);
            }
            if (o)
                bson_destroy(&d.b);
        }
        if (o && fails.n) {
            bson_init(&r);
            BSON_APPEND_UTF8(&r, "operatorName", "allOf");
            bson_append_array(&r, "schemasNotSatisfied", -1, &fails.b);
            rule_done(o, &r);
        }
        if (o)
            bson_destroy(&fails.b);
    }
    if (s->nany) {
        bool any = false;
        for (size_t i = 0; i < s->nany && !any; i++)
            any = check(s->any_of[i], v, NULL);
        if (!any) {
            FAILED();
            arr all;
            arr_init(&all);
            for (size_t i = 0; i < s->nany; i++) {
                arr d;
                check_sub(s->any_of[i], v, &d);
                list_entry(&all, (int32_t)i, s->any_of[i], &d);
                bson_destroy(&d.b);
            }
            bson_init(&r);
            BSON_APPEND_UTF8(&r, "operatorName", "anyOf");
            bson_append_array(&r, "schemasNotSatisfied", -1, &all.b);
            bson_destroy(&all.b);
            rule_done(o, &r);
        }
    }
    if (s->none) {
        size_t matched = 0;
        for (size_t i = 0; i < s->none; i++)
            matched += check(s->one_of[i], v, NULL);
        if (matched != 1) {
            FAILED();
            arr all;
            arr_init(&all);
            bson_init(&r);
            BSON_APPEND_UTF8(&r, "operatorName", "oneOf");
            if (matched == 0) {
                for (size_t i = 0; i < s->none; i++) {
                    arr d;
                    check_sub(s->one_of[i], v, &d);
                    list_entry(&all, (int32_t)i, s->one_of[i], &d);
                    bson_destroy(&d.b);
                }
                bson_append_array(&r, "schemasNotSatisfied", -1, &all.b);
            } else {
                for (size_t i = 0; i < s->none; i++)
                    if (check(s->one_of[i], v, NULL))
                        arr_int(&all, (int32_t)i);
                BSON_APPEND_UTF8(&r, "reason", "more than one subschema matched");
                bson_append_array(&r, "matchingSchemaIndexes", -1, &all.b);
            }
            bson_destroy(&all.b);
            rule_done(o, &r);
        }
    }
    if (s->not_ && check(s->not_, v, NULL)) {
        FAILED();
        bson_init(&r);
        BSON_APPEND_UTF8(&r, "operatorName", "not");
        BSON_APPEND_UTF8(&r, "reason", "child expression matched");
        rule_done(o, &r);
    }
    if (s->has_enum) {
        bool found = false;
        bson_iter_t list, el;
        kept_value(&s->enum_, &list);
        bson_iter_recurse(&list, &el);
        if (!v->it) { /* the whole document, against the enum's documents */
            bson_t wrap = BSON_INITIALIZER;
            bson_iter_t w;
            BSON_APPEND_DOCUMENT(&wrap, "", v->doc);
            bson_iter_init(&w, &wrap);
            bson_iter_next(&w);
            while (!found && bson_iter_next(&el))
                found = BSON_ITER_HOLDS_DOCUMENT(&el) && equal_unordered(&w, &el);
            bson_destroy(&wrap);
        } else {
            while (!found && bson_iter_next(&el))
                found = equal_unordered(v->it, &el);
        }
        if (!found) {
            FAILED();
            rule_begin(&r, s, "enum", NULL);
            if (s->enum_no_object) {
                BSON_APPEND_UTF8(&r, "reason", "expression always evaluates to false");
            } else {
                BSON_APPEND_UTF8(&r, "reason", "value was not found in enum");
                append_jv(&r, "consideredValue", v);
            }
            rule_done(o, &r);
        }
    }
    return ok;
}

/* `s` against `v`; with `o`, every rule it fails is added to `o` in
 * mongod's order (scalar keywords, array keywords, object keywords, the
 * logical ones, the type last), else the first failure ends it. */
static bool check(const js *s, const jv *v, arr *o)
{
    bool ok = true;
    bson_type_t t = jv_type(v);
    if (s->always_false) {
        FAILED();
        bson_t r;
        rule_begin(&r, s, s->type_is_bson ? "bsonType" : "type", NULL);
        BSON_APPEND_UTF8(&r, "reason", "expression always evaluates to false");
        rule_done(o, &r);
        return false;
    }
    if (!s->top) {
        if (t == BSON_TYPE_UTF8 && !check_string(s, v->it, o))
            FAILED();
        if (is_numeric_type(t) && !check_number(s, v->it, o))
            FAILED();
        if (t == BSON_TYPE_ARRAY && !check_array(s, v->it, o))
            FAILED();
    }
    if (t == BSON_TYPE_DOCUMENT && !check_object(s, v, o))
        FAILED();
    if (!check_logic(s, v, o))
        FAILED();
    if (!s->top && s->has_type && !type_allows(s->types, t)) {
        FAILED();
        bson_t r;
        rule_begin(&r, s, s->type_is_bson ? "bsonType" : "type", NULL);
        BSON_APPEND_UTF8(&r, "reason", "type did not match");
        append_jv(&r, "consideredValue", v);
        BSON_APPEND_UTF8(&r, "consideredType", mf_bsonx_type_alias(t));
        rule_done(o, &r);
    }
    return ok;
}

bool mf_schema_match(const mf_schema *sc, const bson_t *doc)
{
    jv v = {NULL, doc};
    return check((const js *)sc, &v, NULL);
}

bool mf_schema_match_value(const mf_schema *sc, const bson_iter_t *value)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(value))
        return false;
    jv v = {value, NULL};
    return check((const js *)sc, &v, NULL);
}

void mf_schema_explain(const mf_schema *sc, const bson_t *doc, bool inverted, bson_t *out)
{
    const js *s = (const js *)sc;
    BSON_APPEND_UTF8(out, "operatorName", "$jsonSchema");
    if (inverted) {
        BSON_APPEND_UTF8(out, "reason", "schema matched");
        return;
    }
    if (s->always_false || s->enum_no_object) {
        bson_t sa;
        BSON_APPEND_DOCUMENT_BEGIN(out, "specifiedAs", &sa);
        BSON_APPEND_DOCUMENT(&sa, "$jsonSchema", &s->spec);
        bson_append_document_end(out, &sa);
        BSON_APPEND_UTF8(out, "reason", "expression always evaluates to false");
        return;
    }
    annotations(out, s);
    arr rules;
    jv v = {NULL, doc};
    check_sub(s, &v, &rules);
    bson_append_array(out, "schemaRulesNotSatisfied", -1, &rules.b);
    bson_destroy(&rules.b);
}
