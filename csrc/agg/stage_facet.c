/*
 * stage_facet.c -- $facet: several sub-pipelines over the same input, one
 * output document {<name>: [<that sub-pipeline's results>], ...}.
 *
 * On its first pull the stage reads its whole input into one buffer (the
 * documents' BSON back to back); each sub-pipeline starts from its own
 * cursor over that buffer (a "$teeConsumer" source, as mongod's explain
 * names it), and they run one after the other.  The output document is
 * capped at 100 MB (mongod's internalQueryFacetMaxOutputDocSizeBytes,
 * error 4031700).  The stage outputs exactly one document, also for an
 * empty input.
 *
 * Metadata: each buffered document is followed by its metadata (a
 * document, empty for none), which the sub-pipelines' documents carry
 * (mongod's tee buffer keeps Documents whole); the output document has
 * none.
 */
#include "pipeline_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FACET_MAX_OUTPUT_BYTES (100 * 1024 * 1024)

typedef struct {
    mfi_stage base;
    size_t n;
    char **names;
    mf_pipeline **subs;
    mf_buf input;            /* the buffered input documents */
    bool done;
} facet_stage;

/* --------------------------------------------------- the buffered source */

typedef struct {
    mf_agg_source base;
    const facet_stage *f;
    size_t off;
    mf_meta m;               /* the metadata of the document returned last */
} tee_source;

static int tee_next(mf_agg_source *s, bson_t *out, bool *eof, mf_error *err)
{
    tee_source *t = (tee_source *)s;
    const mf_buf *b = &t->f->input;
    if (t->off >= b->len) {
        *eof = true;
        return 0;
    }
    uint32_t len;
    memcpy(&len, b->data + t->off, 4);
    len = BSON_UINT32_FROM_LE(len);
    bson_t tmp;
    uint32_t mlen = 0;
    if (len > b->len - t->off || b->len - t->off - len < 5 ||
        !bson_init_static(&tmp, b->data + t->off, len))
        return mf_error_set(err, MF_InternalError, "a buffered $facet document is damaged");
    memcpy(&mlen, b->data + t->off + len, 4);
    mlen = BSON_UINT32_FROM_LE(mlen);
    if (mlen > b->len - t->off - len ||
        mf_meta_from_bson(&t->m, b->data + t->off + len, mlen) != 0)
        return mf_error_set(err, MF_InternalError, "a buffered $facet document is damaged");
    t->base.meta = t->m.has ? &t->m : NULL;
    bson_init(out);
    bson_concat(out, &tmp);
    t->off += len + mlen;
    *eof = false;
    return 0;
}

static int tee_explain(mf_agg_source *s, int exec, bson_t *out, mf_error *err)
{
    (void)s, (void)exec, (void)out, (void)err;
    return 0;
}

static void tee_free(mf_agg_source *s)
{
    mf_meta_clear(&((tee_source *)s)->m);
    free(s);
}

/* ----------------------------------------------------------- the stage */

/* Read the whole input into f->input. */
static int facet_fill(facet_stage *f, mf_error *err)
{
    for (;;) {
        bson_t d;
        bool eof;
        int rc = mfi_stage_pull(&f->base, &d, &eof, err);
        if (rc || eof)
            return rc;
        bson_t mb = BSON_INITIALIZER;
        mf_meta_to_bson(f->base.in_meta, &mb);
        rc = mf_buf_append(&f->input, bson_get_data(&d), d.len);
        if (rc == 0)
            rc = mf_buf_append(&f->input, bson_get_data(&mb), mb.len);
        bson_destroy(&mb);
        bson_destroy(&d);
        if (rc)
            return mf_error_oom(err);
    }
}

static int facet_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    facet_stage *f = (facet_stage *)s;
    if (f->done) {
        *eof = true;
        return 0;
    }
    f->done = true;
    int rc = facet_fill(f, err);
    if (rc)
        return rc;
    size_t used = 0;
    bson_init(out);
    for (size_t i = 0; rc == 0 && i < f->n; i++) {
        bson_t arr;
        uint32_t k = 0;
        BSON_APPEND_ARRAY_BEGIN(out, f->names[i], &arr);
        for (;;) {
            bson_t d;
            bool end;
            if ((rc = mf_pipeline_next(f->subs[i], &d, &end, err)) != 0 || end)
                break;
            used += d.len;
            if (used > FACET_MAX_OUTPUT_BYTES) {
                rc = mf_error_set(err, 4031700,
                                  "document constructed by $facet is %zu bytes, which exceeds "
                                  "the limit of %d bytes",
                                  used, FACET_MAX_OUTPUT_BYTES);
            } else {
                char key[16];
                snprintf(key, sizeof key, "%u", k++);
                BSON_APPEND_DOCUMENT(&arr, key, &d);
            }
            bson_destroy(&d);
        }
        bson_append_array_end(out, &arr);
    }
    /* the input is no longer needed */
    mf_buf_free(&f->input);
    if (rc) {
        bson_destroy(out);
        return rc;
    }
    *eof = false;
    return 0;
}

/* {<name>: [the sub-pipeline's explained stages], ...} */
static void facet_explain(const mfi_stage *s, bson_t *out)
{
    const facet_stage *f = (const facet_stage *)s;
    for (size_t i = 0; i < f->n; i++) {
        bson_t ex = BSON_INITIALIZER;
        mf_error e;
        bson_iter_t it;
        /* explaining without running only walks the stages */
        if (mf_pipeline_explain(f->subs[i], false, &ex, &e) == 0 &&
            bson_iter_init_find(&it, &ex, "stages"))
            mf_bsonx_append_iter(out, f->names[i], -1, &it);
        bson_destroy(&ex);
    }
}

static void facet_free(mfi_stage *s)
{
    facet_stage *f = (facet_stage *)s;
    for (size_t i = 0; i < f->n; i++) {
        free(f->names[i]);
        mf_pipeline_free(f->subs[i]);
    }
    free(f->names);
    free(f->subs);
    mf_buf_free(&f->input);
}

static const mfi_stage_ops facet_ops = {"$facet", facet_next, facet_explain, facet_free, false,
                                        MFI_DEPS_EXHAUSTIVE_ALL};

/* The stages a $facet refuses (mongod's FacetRequirement::kNotAllowed).
 * $changeStream is not among them here: its stage refuses itself as it is
 * built (40573 on a standalone), before the facet's check could. */
static const char *const refused_in_facet[] = {
    "$collStats", "$currentOp", "$documents", "$facet", "$geoNear",
    "$indexStats", "$listCatalog", "$listLocalSessions", "$listSearchIndexes",
    "$listSessions", "$merge", "$out", "$planCacheStats", "$search", "$searchMeta", NULL};

/* Parse one facet's sub-pipeline (`stages`, an array) into f->subs[i]. */
static int facet_sub(facet_stage *f, size_t i, const bson_t *stages, mfi_agg *agg,
                     mf_error *err)
{
    const char *bad = mfi_pipeline_find_stage(stages, refused_in_facet);
    if (bad)
        return mf_error_set(err, 40600, "%s is not allowed to be used within a $facet stage", bad);
    if (bson_empty(stages))
        return mf_error_set(err, MF_BadValue, "sub-pipeline in $facet stage cannot be empty");
    tee_source *t = calloc(1, sizeof *t);
    if (!t)
        return mf_error_oom(err);
    t->base.next = tee_next;
    t->base.explain = tee_explain;
    t->base.free = tee_free;
    t->f = f;
    mfi_sub_opts o = {.input = &t->base, .parent_meta = true};
    int rc = mfi_pipeline_sub(agg, stages, &o, &f->subs[i], err);
    /* mongod's $facet analyses each sub-pipeline against what its input
     * may carry: their metadata is the stage's to check */
    if (rc == 0)
        agg->parse_needs |= mfi_pipeline_walk_needs(f->subs[i]);
    return rc;
}

int mfi_parse_facet(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    char shown[256];
    bson_iter_t f;
    size_t n = 0;
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_iter_recurse(it, &f);
        while (bson_iter_next(&f))
            n++;
    }
    if (n == 0) {
        mf_bsonx_elem_to_string(it, true, shown, sizeof shown);
        return mf_error_set(err, 40169,
                            "the $facet specification must be a non-empty object, but found: %s",
                            shown);
    }
    /* every facet's shape first, as mongod's extractRawPipelines */
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        /* a facet's name is a FieldPath name (uassertValidFieldName) */
        int rc = mf_bsonx_field_name_check(k, bson_iter_key_len(&f), err);
        if (rc)
            return rc;
        if (!BSON_ITER_HOLDS_ARRAY(&f))
            return mf_error_set(err, 40170, "arguments to $facet must be arrays, %s is type %s", k,
                                mf_bsonx_type_alias(bson_iter_type(&f)));
        bson_iter_t e;
        bson_iter_recurse(&f, &e);
        while (bson_iter_next(&e)) {
            if (BSON_ITER_HOLDS_DOCUMENT(&e))
                continue;
            mf_bsonx_elem_to_string(&e, true, shown, sizeof shown);
            return mf_error_set(err, 40171,
                                "elements of arrays in $facet spec must be non-empty objects, %s "
                                "argument contained an element of type %s: %s",
                                k, mf_bsonx_type_alias(bson_iter_type(&e)), shown);
        }
    }
    facet_stage *fs = mfi_stage_new(out, &facet_ops, sizeof *fs, it, agg, err);
    if (!fs)
        return MF_InternalError;
    if (!(fs->names = calloc(n, sizeof *fs->names)) || !(fs->subs = calloc(n, sizeof *fs->subs)))
        return mf_error_oom(err);
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        uint32_t len;
        const uint8_t *data;
        bson_t stages;
        bson_iter_array(&f, &len, &data);
        if (!bson_init_static(&stages, data, len))
            return mf_error_set(err, MF_InternalError, "a $facet pipeline is damaged");
        if (!(fs->names[fs->n] = bson_strdup(bson_iter_key(&f))))
            return mf_error_oom(err);
        fs->n++;
        int rc = facet_sub(fs, fs->n - 1, &stages, agg, err);
        if (rc)
            return rc;
    }
    return 0;
}
