/*
 * meta.c -- a document's metadata (meta.h): names, values, and its BSON
 * form for stages that keep documents aside.
 */
#include "meta.h"

#include <string.h>

/* In mf_meta_kind's order: $meta's name, then mongod's debug name. */
static const char *const NAMES[MF_META_NKINDS][2] = {
    {"textScore", "text score"},
    {"randVal", "rand val"},
    {"searchScore", "$search score"},
    {"searchHighlights", "$search highlights"},
    {"geoNearDistance", "$geoNear distance"},
    {"geoNearPoint", "$geoNear point"},
    {"recordId", "record ID"},
    {"indexKey", "index key"},
    {"sortKey", "sort key"},
    {"searchScoreDetails", "$search score details"},
    {"searchSequenceToken", "$search sequence token"},
    {"timeseriesBucketMinTime", "timeseries bucket min time"},
    {"timeseriesBucketMaxTime", "timeseries bucket max time"},
    {"vectorSearchScore", "$vectorSearch score"},
};

int mf_meta_kind_of(const char *name)
{
    for (int k = 0; k < MF_META_NKINDS; k++)
        if (strcmp(NAMES[k][0], name) == 0)
            return k;
    return -1;
}

const char *mf_meta_name(mf_meta_kind k)
{
    return (unsigned)k < MF_META_NKINDS ? NAMES[k][0] : "?";
}

const char *mf_meta_debug_name(mf_meta_kind k)
{
    return (unsigned)k < MF_META_NKINDS ? NAMES[k][1] : "?";
}

int mf_meta_unavailable(uint32_t missing, mf_error *err)
{
    int k = 0;
    while (k < MF_META_NKINDS - 1 && !(missing & MF_META_BIT(k)))
        k++;
    return mf_error_set(err, 40218, "query requires %s metadata, but it is not available",
                        mf_meta_debug_name((mf_meta_kind)k));
}

static void unset(mf_meta *m, mf_meta_kind k)
{
    if (m->has & MF_META_BIT(k)) {
        bson_value_destroy(&m->v[k]);
        m->v[k].value_type = BSON_TYPE_EOD;
        m->has &= ~MF_META_BIT(k);
    }
}

void mf_meta_clear(mf_meta *m)
{
    for (int k = 0; m->has && k < MF_META_NKINDS; k++)
        unset(m, (mf_meta_kind)k);
}

void mf_meta_set_double(mf_meta *m, mf_meta_kind k, double d)
{
    unset(m, k);
    m->v[k].value_type = BSON_TYPE_DOUBLE;
    m->v[k].value.v_double = d;
    m->has |= MF_META_BIT(k);
}

void mf_meta_set_long(mf_meta *m, mf_meta_kind k, int64_t i)
{
    unset(m, k);
    m->v[k].value_type = BSON_TYPE_INT64;
    m->v[k].value.v_int64 = i;
    m->has |= MF_META_BIT(k);
}

int mf_meta_set_value(mf_meta *m, mf_meta_kind k, const bson_value_t *v)
{
    unset(m, k);
    if (v->value_type == BSON_TYPE_EOD)
        return 0;
    mf_bsonx_value_copy(v, &m->v[k]);
    if (m->v[k].value_type == BSON_TYPE_EOD)
        return -1;
    m->has |= MF_META_BIT(k);
    return 0;
}

const bson_value_t *mf_meta_get(const mf_meta *m, mf_meta_kind k)
{
    return m && (m->has & MF_META_BIT(k)) ? &m->v[k] : NULL;
}

int mf_meta_copy(mf_meta *dst, const mf_meta *src)
{
    int rc = 0;
    mf_meta_clear(dst);
    for (int k = 0; src && src->has >> k; k++)
        if ((src->has & MF_META_BIT(k)) && mf_meta_set_value(dst, (mf_meta_kind)k, &src->v[k]))
            rc = -1;
    return rc;
}

void mf_meta_to_bson(const mf_meta *m, bson_t *out)
{
    for (int k = 0; m && m->has >> k; k++)
        if (m->has & MF_META_BIT(k))
            mf_bsonx_append_value(out, NAMES[k][0], -1, &m->v[k]);
}

int mf_meta_from_bson(mf_meta *m, const uint8_t *data, size_t len)
{
    bson_t b;
    bson_iter_t it;
    mf_meta_clear(m);
    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b))
        return -1;
    while (bson_iter_next(&it)) {
        int k = mf_meta_kind_of(bson_iter_key(&it));
        if (k < 0 || mf_meta_set_value(m, (mf_meta_kind)k, bson_iter_value(&it)) != 0)
            return -1;
    }
    return 0;
}
