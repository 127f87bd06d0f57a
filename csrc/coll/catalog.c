/*
 * catalog.c -- creating a collection (its catalog entry, with a fresh uuid
 * and the options, and its _id index, as one durable step), dropping a
 * collection or a database's, renaming, and listing the namespaces.
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define ID_INDEX_SPEC_NAME "_id_"

int mf_cl_new_uuid(uint8_t out[16], mf_error *err)
{
    if (getrandom(out, 16, 0) != 16)
        return mf_error_set(err, MF_InternalError, "no randomness for a UUID");
    out[6] = (uint8_t)((out[6] & 0x0f) | 0x40); /* version 4 */
    out[8] = (uint8_t)((out[8] & 0x3f) | 0x80);
    return 0;
}

/* "c" of "db.c". */
static const char *coll_part(const char *ns)
{
    const char *dot = strchr(ns, '.');
    return dot ? dot + 1 : ns;
}

/* Create `ns` (catalog lock held exclusively); durable on return.  Its
 * entry: {create: <coll>, <options>, idIndex} (mongod's, less a clustered
 * collection's idIndex).  A transaction's is MF_COLL_PENDING until its
 * commit (dropped at the next open if that never comes). */
static int create_coll(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *options,
                       const mf_collator *coll, bool id_index, mf_error *err)
{
    uint8_t uuid[16];
    if (mf_cl_new_uuid(uuid, err) != 0)
        return err->code;
    bson_t meta, spec, o = BSON_INITIALIZER;
    bson_iter_t it;
    bson_init(&meta);
    bson_append_binary(&meta, "uuid", 4, BSON_SUBTYPE_UUID, uuid, 16);
    BSON_APPEND_DOCUMENT(&meta, "options", options);
    mf_index_id_spec(coll, &spec);
    mf_cl_ddl d;
    mf_cl_ddl_init(&d, lg, ns);
    BSON_APPEND_UTF8(&o, "create", coll_part(ns));
    bson_concat(&o, options);
    if (id_index && !bson_iter_init_find(&it, options, "clusteredIndex"))
        BSON_APPEND_DOCUMENT(&o, "idIndex", &spec);
    mf_coll *c;
    mf_lsn lsn;
    int rc = mf_cl_ddl_add(&d, ns, uuid, &o, NULL, err);
    if (rc == 0)
        rc = mf_engine_coll_create(e, ns, bson_get_data(&meta), meta.len,
                                   lg && lg->txn_ops ? MF_COLL_PENDING : 0, &c,
                                   mf_cl_ddl_ops(&d), &lsn, err);
    mf_cl_ddl_end(&d, rc == 0);
    bson_destroy(&meta);
    bson_destroy(&o);
    if (rc == 0 && id_index) {
        mf_coll_lock(c, true);
        rc = mf_coll_index_create(e, c, ID_INDEX_SPEC_NAME, bson_get_data(&spec), spec.len,
                                  NULL, &lsn, err);
        mf_coll_unlock(c);
    }
    bson_destroy(&spec);
    return rc ? rc : mf_engine_sync(e, lsn, err);
}

int mf_cl_create_held(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *options,
                      const mf_collator *coll, bool id_index, mf_error *err)
{
    return mf_engine_coll(e, ns)
               ? mf_error_set(err, MF_NamespaceExists, "Collection %s already exists.", ns)
               : create_coll(e, lg, ns, options, coll, id_index, err);
}

int mf_cl_create(mf_engine *e, mf_cl_log *lg, const char *ns, const bson_t *options,
                 const mf_collator *coll, bool id_index, mf_error *err)
{
    mf_engine_catalog_lock(e, true);
    int rc = mf_cl_create_held(e, lg, ns, options, coll, id_index, err);
    mf_engine_catalog_unlock(e);
    return rc;
}

bool mf_cl_exists(mf_engine *e, const char *ns)
{
    mf_engine_catalog_lock(e, false);
    bool found = mf_engine_coll(e, ns) != NULL;
    mf_engine_catalog_unlock(e);
    return found;
}

/* How many records `c` holds (catalog lock held): what a drop's entry
 * says in o2's numRecords. */
static int count_records(mf_engine *e, mf_coll *c, int64_t *n, mf_error *err)
{
    mf_btree_usage u;
    mf_coll_lock(c, false);
    int rc = mf_engine_tree_measure(e, mf_coll_records(c), &u, err);
    mf_coll_unlock(c);
    *n = rc == 0 ? (int64_t)u.entries : 0;
    return rc;
}

/* Drop `c` (catalog lock held exclusively), logged as mongod's {drop:
 * <coll>} with o2 {numRecords}. */
static int drop_coll(mf_engine *e, mf_cl_log *lg, mf_coll *c, mf_lsn *lsn, mf_error *err)
{
    const char *ns = mf_coll_name(c);
    mf_cl_ddl d;
    int64_t n = 0;
    int rc = 0;
    mf_cl_ddl_init(&d, lg, ns);
    if (d.logged && (rc = count_records(e, c, &n, err)) == 0) {
        uint8_t ui[16];
        bson_t o = BSON_INITIALIZER, o2 = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&o, "drop", coll_part(ns));
        BSON_APPEND_INT64(&o2, "numRecords", n);
        rc = mf_cl_ddl_add(&d, ns, mf_cl_uuid(c, ui) ? ui : NULL, &o, &o2, err);
        bson_destroy(&o);
        bson_destroy(&o2);
    }
    if (rc == 0)
        rc = mf_engine_coll_drop(e, ns, mf_cl_ddl_ops(&d), lsn, err);
    mf_cl_ddl_end(&d, rc == 0);
    return rc;
}

int mf_cl_drop_held(mf_cl_db *db, mf_cl_log *lg, const char *ns, int *nindexes, mf_lsn *lsn,
                    mf_error *err)
{
    mf_coll *c = mf_engine_coll(db->engine, ns);
    if (!c)
        return mf_error_set(err, MF_NamespaceNotFound, "ns not found %s", ns);
    if (nindexes)
        *nindexes = (int)mf_coll_index_count(c);
    int rc = drop_coll(db->engine, lg, c, lsn, err);
    if (rc == 0)
        mf_cl_usage_forget(db, ns, NULL);
    return rc;
}

int mf_cl_drop(mf_cl_db *db, mf_cl_log *lg, const char *ns, int *nindexes, mf_lsn *lsn,
               mf_error *err)
{
    mf_engine_catalog_lock(db->engine, true);
    int rc = mf_cl_drop_held(db, lg, ns, nindexes, lsn, err);
    mf_engine_catalog_unlock(db->engine);
    return rc;
}

int mf_cl_drop_if_empty(mf_cl_db *db, const char *ns, mf_error *err)
{
    mf_engine *e = db->engine;
    mf_lsn lsn = 0;
    int rc = 0;
    mf_engine_catalog_lock(e, true);
    mf_coll *c = mf_engine_coll(e, ns);
    if (c) {
        mf_cursor cur;
        bool any;
        mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
        rc = mf_cursor_first(&cur, &any, err);
        if (rc == 0 && !any)
            rc = mf_engine_coll_drop(e, ns, NULL, &lsn, err);
        else if (rc == 0 && mf_coll_pending(c)) /* kept: no longer the transaction's */
            rc = mf_engine_colls_settle(e, &c, 1, NULL, 0, &lsn, err);
    }
    mf_engine_catalog_unlock(e);
    if (rc == 0 && lsn) {
        mf_cl_usage_forget(db, ns, NULL);
        rc = mf_engine_sync(e, lsn, err);
    }
    return rc;
}

/* Catalog lock held: gather the names of `db`'s collections. */
typedef struct in_db {
    const char *db;
    size_t dblen;
    mf_cl_names *out;
    int rc;
} in_db;

static int names_add(mf_cl_names *l, const char *ns)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->ns, cap * sizeof *v);
        if (!v)
            return -1;
        l->ns = v;
        l->cap = cap;
    }
    if (!(l->ns[l->n] = strdup(ns)))
        return -1;
    l->n++;
    return 0;
}

static void gather(mf_coll *c, void *arg)
{
    in_db *g = arg;
    const char *ns = mf_coll_name(c);
    if (g->rc == 0 && (!g->db || (strncmp(ns, g->db, g->dblen) == 0 && ns[g->dblen] == '.')))
        g->rc = names_add(g->out, ns);
}

static int names_of(mf_engine *e, const char *db, mf_cl_names *out, mf_error *err)
{
    *out = (mf_cl_names){0};
    in_db g = {.db = db, .dblen = db ? strlen(db) : 0, .out = out};
    mf_engine_coll_each(e, gather, &g);
    if (g.rc) {
        mf_cl_names_free(out);
        return mf_error_oom(err);
    }
    return 0;
}

int mf_cl_names_get(mf_engine *e, mf_cl_names *out, mf_error *err)
{
    mf_engine_catalog_lock(e, false);
    int rc = names_of(e, NULL, out, err);
    mf_engine_catalog_unlock(e);
    return rc;
}

void mf_cl_names_free(mf_cl_names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ns[i]);
    free(l->ns);
    *l = (mf_cl_names){0};
}

int mf_cl_drop_db(mf_cl_db *db, mf_cl_log *lg, const char *name, mf_lsn *lsn, mf_error *err)
{
    mf_engine *e = db->engine;
    mf_cl_names l;
    mf_engine_catalog_lock(e, true);
    int rc = names_of(e, name, &l, err);
    for (size_t i = 0; i < l.n && rc == 0; i++) {
        rc = drop_coll(e, lg, mf_engine_coll(e, l.ns[i]), lsn, err);
        if (rc == 0)
            mf_cl_usage_forget(db, l.ns[i], NULL);
    }
    /* then the database's own entry, {dropDatabase: 1} (as mongod's, after
     * its collections' drops) */
    if (rc == 0 && l.n > 0) {
        mf_cl_ddl d;
        bson_t o = BSON_INITIALIZER;
        BSON_APPEND_INT32(&o, "dropDatabase", 1);
        mf_cl_ddl_init(&d, lg, l.ns[0]);
        rc = mf_cl_ddl_add(&d, l.ns[0], NULL, &o, NULL, err);
        if (rc == 0)
            rc = mf_cl_ddl_write(&d, e, lsn, err);
        else
            mf_cl_ddl_end(&d, false);
        bson_destroy(&o);
    }
    mf_engine_catalog_unlock(e);
    mf_cl_names_free(&l);
    return rc;
}

int mf_cl_rename_held(mf_cl_db *db, mf_cl_log *lg, const char *from, const char *to,
                      bool drop_target, mf_lsn *lsn, mf_error *err)
{
    mf_engine *e = db->engine;
    mf_coll *c = mf_engine_coll(e, from), *t = mf_engine_coll(e, to);
    int rc = 0;
    if (!c)
        return mf_error_set(err, MF_NamespaceNotFound, "Source collection %s does not exist",
                            from);
    if (strcmp(from, to) == 0)
        return mf_error_set(err, MF_IllegalOperation, "Can't rename a collection to itself");
    if (t && !drop_target)
        return mf_error_set(err, MF_NamespaceExists, "target namespace exists");
    /* {renameCollection: from, to, stayTemp, dropTarget: <the dropped
     * target's uuid>} with o2 {numRecords} of the target */
    mf_cl_ddl d;
    mf_cl_ddl_init(&d, lg, from);
    if (d.logged) {
        uint8_t ui[16], tui[16];
        int64_t n = 0;
        bson_t o = BSON_INITIALIZER, o2 = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&o, "renameCollection", from);
        BSON_APPEND_UTF8(&o, "to", to);
        BSON_APPEND_BOOL(&o, "stayTemp", false);
        if (t && mf_cl_uuid(t, tui))
            bson_append_binary(&o, "dropTarget", 10, BSON_SUBTYPE_UUID, tui, 16);
        if (t && (rc = count_records(e, t, &n, err)) == 0)
            BSON_APPEND_INT64(&o2, "numRecords", n);
        if (rc == 0)
            rc = mf_cl_ddl_add(&d, from, mf_cl_uuid(c, ui) ? ui : NULL, &o, t ? &o2 : NULL,
                               err);
        bson_destroy(&o);
        bson_destroy(&o2);
    }
    if (rc == 0)
        rc = mf_engine_coll_rename(e, from, to, drop_target, mf_cl_ddl_ops(&d), lsn, err);
    mf_cl_ddl_end(&d, rc == 0);
    if (rc == 0) {
        mf_cl_usage_forget(db, from, NULL);
        mf_cl_usage_forget(db, to, NULL);
    }
    return rc;
}

int mf_cl_rename(mf_cl_db *db, mf_cl_log *lg, const char *from, const char *to,
                 bool drop_target, mf_lsn *lsn, mf_error *err)
{
    mf_engine_catalog_lock(db->engine, true);
    int rc = mf_cl_rename_held(db, lg, from, to, drop_target, lsn, err);
    mf_engine_catalog_unlock(db->engine);
    return rc;
}
