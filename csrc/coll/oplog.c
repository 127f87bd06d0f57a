/*
 * oplog.c -- a replica set's oplog, local.oplog.rs, and the clock of its
 * timestamps (issue 47, docs/transactions.md).
 *
 * Every write of a replica set through this layer logs one entry in the
 * oplog, in the same engine write as the document and its index entries
 * (write.c), so after a crash an entry is there exactly when its write is.
 * Entries are in mongod's format (ts, t, v: 2, op, ns, ui, o, o2, wall);
 * an update's `o` is a $v: 2 diff of the document before and after, or the
 * whole new document when the update replaced it.
 *
 * The clock.  An entry's ts is Timestamp(seconds, increment), strictly
 * after every ts before it: the wall clock's seconds when they are ahead,
 * else the last seconds with the increment raised.  It is handed out with
 * the oplog's collection lock held exclusively, so ts order is the order of
 * the entries in the log.  RecordIds are the ts as (seconds << 32 | inc):
 * the record tree is in ts order, and the last record gives the clock
 * back at open.
 *
 * Retention: past `max_bytes` of entries the oldest are deleted, as a
 * capped collection does (until capped collections, issue 48).
 *
 * Lock order: a writer holds its collection's lock, then takes the
 * oplog's (exclusive); a reader of the oplog holds its lock alone.
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>

#define OPLOG_NS "local.oplog.rs"
#define TERM 1

struct mf_cl_oplog {
    mf_engine *e;
    mf_coll *c;        /* local.oplog.rs: never dropped while open */
    int64_t max_bytes; /* retention */
    int64_t bytes;     /* the entries' bytes (under the collection lock) */
    /* the newest entry: its ts and wall time (under the collection lock;
     * read under `mu` too, by hello and replies) */
    pthread_mutex_t mu;
    mf_cl_optime last;
    int64_t last_wall_ms;
};

static uint64_t optime_rid(mf_cl_optime t)
{
    return (uint64_t)t.secs << 32 | t.inc;
}

void mf_cl_oplog_last(mf_cl_oplog *o, mf_cl_optime *t, int64_t *wall_ms)
{
    pthread_mutex_lock(&o->mu);
    *t = o->last;
    if (wall_ms)
        *wall_ms = o->last_wall_ms;
    pthread_mutex_unlock(&o->mu);
}

/* The next ts (collection lock held exclusively). */
static void tick(mf_cl_oplog *o, mf_cl_optime *t, int64_t *wall_ms)
{
    int64_t now = mf_clock_wall_ms();
    uint32_t secs = (uint32_t)(now / 1000);
    pthread_mutex_lock(&o->mu);
    if (secs > o->last.secs) {
        o->last.secs = secs;
        o->last.inc = 1;
    } else {
        o->last.inc++;
    }
    if (now > o->last_wall_ms)
        o->last_wall_ms = now;
    *t = o->last;
    *wall_ms = o->last_wall_ms;
    pthread_mutex_unlock(&o->mu);
}

/* ------------------------------------------------------------ the diff */

static bool diff_doc(const bson_t *old, const bson_t *new_doc, bson_t *out, int depth);

/* An array's diff: {a: true, l: <new length when shorter>, u<i>: value,
 * s<i>: sub-diff}, indexes ascending. */
static bool diff_array(const bson_t *old, const bson_t *new_arr, bson_t *out, int depth)
{
    bson_iter_t a, b;
    uint32_t n_old = 0, n_new = 0;
    bson_iter_init(&a, old);
    while (bson_iter_next(&a))
        n_old++;
    bson_iter_init(&b, new_arr);
    while (bson_iter_next(&b))
        n_new++;
    BSON_APPEND_BOOL(out, "a", true);
    if (n_new < n_old)
        BSON_APPEND_INT32(out, "l", (int32_t)n_new);
    bson_iter_init(&a, old);
    bson_iter_init(&b, new_arr);
    for (uint32_t i = 0; i < n_new; i++) {
        char key[16];
        bool has_old = i < n_old && bson_iter_next(&a);
        bson_iter_next(&b);
        if (has_old && mf_bsonx_binary_equal(&a, &b))
            continue;
        if (has_old && depth > 0 && bson_iter_type(&a) == bson_iter_type(&b) &&
            (BSON_ITER_HOLDS_DOCUMENT(&b) || BSON_ITER_HOLDS_ARRAY(&b))) {
            bson_t x, y, sub;
            uint32_t lx, ly;
            const uint8_t *dx, *dy;
            if (BSON_ITER_HOLDS_DOCUMENT(&b)) {
                bson_iter_document(&a, &lx, &dx);
                bson_iter_document(&b, &ly, &dy);
            } else {
                bson_iter_array(&a, &lx, &dx);
                bson_iter_array(&b, &ly, &dy);
            }
            bson_init_static(&x, dx, lx);
            bson_init_static(&y, dy, ly);
            snprintf(key, sizeof key, "s%u", i);
            bson_append_document_begin(out, key, -1, &sub);
            bool ok = BSON_ITER_HOLDS_DOCUMENT(&b) ? diff_doc(&x, &y, &sub, depth - 1)
                                                   : diff_array(&x, &y, &sub, depth - 1);
            bson_append_document_end(out, &sub);
            if (!ok)
                return false;
            continue;
        }
        snprintf(key, sizeof key, "u%u", i);
        mf_bsonx_append_iter(out, key, -1, &b);
    }
    return true;
}

/* Whether `new_doc` keeps the fields it shares with `old` in old's order,
 * every new field after them: what applying a diff (updates in place,
 * inserts at the end) can give. */
static bool order_kept(const bson_t *old, const bson_t *new_doc)
{
    bson_iter_t a, b, f;
    bool seen_insert = false;
    bson_iter_init(&a, old);
    bson_iter_init(&b, new_doc);
    while (bson_iter_next(&b)) {
        const char *k = bson_iter_key(&b);
        if (!bson_iter_init_find(&f, old, k)) {
            seen_insert = true;
            continue;
        }
        if (seen_insert)
            return false;
        /* advance `a` to k: it must come later in old than the previous */
        bool found = false;
        while (bson_iter_next(&a))
            if (strcmp(bson_iter_key(&a), k) == 0) {
                found = true;
                break;
            }
        if (!found)
            return false;
    }
    return true;
}

/* A document's diff: d {f: false}, u {f: v}, i {f: v}, then s<f> sub-diffs,
 * as mongod serializes one.  False when the new document cannot be had by
 * applying a diff (fields reordered) or nesting is too deep: the caller
 * logs the whole document. */
static bool diff_doc(const bson_t *old, const bson_t *new_doc, bson_t *out, int depth)
{
    bson_iter_t a, b;
    bson_t sec;
    bool any;

    if (depth <= 0 || !order_kept(old, new_doc))
        return false;
    /* deletes */
    any = false;
    bson_iter_init(&a, old);
    while (bson_iter_next(&a)) {
        if (bson_iter_init_find(&b, new_doc, bson_iter_key(&a)))
            continue;
        if (!any)
            BSON_APPEND_DOCUMENT_BEGIN(out, "d", &sec);
        any = true;
        BSON_APPEND_BOOL(&sec, bson_iter_key(&a), false);
    }
    if (any)
        bson_append_document_end(out, &sec);
    /* updates: changed values that are not a document or array in both */
    any = false;
    bson_iter_init(&b, new_doc);
    while (bson_iter_next(&b)) {
        if (!bson_iter_init_find(&a, old, bson_iter_key(&b)) || mf_bsonx_binary_equal(&a, &b))
            continue;
        if (bson_iter_type(&a) == bson_iter_type(&b) &&
            (BSON_ITER_HOLDS_DOCUMENT(&b) || BSON_ITER_HOLDS_ARRAY(&b)))
            continue; /* a sub-diff */
        if (!any)
            BSON_APPEND_DOCUMENT_BEGIN(out, "u", &sec);
        any = true;
        mf_bsonx_append_iter(&sec, bson_iter_key(&b), -1, &b);
    }
    if (any)
        bson_append_document_end(out, &sec);
    /* inserts */
    any = false;
    bson_iter_init(&b, new_doc);
    while (bson_iter_next(&b)) {
        if (bson_iter_init_find(&a, old, bson_iter_key(&b)))
            continue;
        if (!any)
            BSON_APPEND_DOCUMENT_BEGIN(out, "i", &sec);
        any = true;
        mf_bsonx_append_iter(&sec, bson_iter_key(&b), -1, &b);
    }
    if (any)
        bson_append_document_end(out, &sec);
    /* sub-diffs */
    bson_iter_init(&b, new_doc);
    while (bson_iter_next(&b)) {
        if (!bson_iter_init_find(&a, old, bson_iter_key(&b)) || mf_bsonx_binary_equal(&a, &b) ||
            bson_iter_type(&a) != bson_iter_type(&b) ||
            !(BSON_ITER_HOLDS_DOCUMENT(&b) || BSON_ITER_HOLDS_ARRAY(&b)))
            continue;
        bson_t x, y, sub;
        uint32_t lx, ly;
        const uint8_t *dx, *dy;
        bool is_doc = BSON_ITER_HOLDS_DOCUMENT(&b);
        if (is_doc) {
            bson_iter_document(&a, &lx, &dx);
            bson_iter_document(&b, &ly, &dy);
        } else {
            bson_iter_array(&a, &lx, &dx);
            bson_iter_array(&b, &ly, &dy);
        }
        bson_init_static(&x, dx, lx);
        bson_init_static(&y, dy, ly);
        char key[512];
        if (snprintf(key, sizeof key, "s%s", bson_iter_key(&b)) >= (int)sizeof key)
            return false;
        bson_append_document_begin(out, key, -1, &sub);
        bool ok = is_doc ? diff_doc(&x, &y, &sub, depth - 1) : diff_array(&x, &y, &sub, depth - 1);
        bson_append_document_end(out, &sub);
        if (!ok)
            return false;
    }
    return true;
}

int mf_cl_update_diff(const bson_t *old, const bson_t *new_doc, bson_t *out)
{
    bson_init(out);
    if (diff_doc(old, new_doc, out, 100))
        return 0;
    bson_reinit(out);
    return -1;
}

/* ------------------------------------------------------------ entries */

static void append_id_doc(bson_t *out, const char *key, const bson_t *doc)
{
    bson_iter_t it;
    bson_t d;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &d);
    if (bson_iter_init_find(&it, doc, "_id"))
        mf_bsonx_append_iter(&d, "_id", 3, &it);
    bson_append_document_end(out, &d);
}

/* What an entry says of one write (op, ns, ui, o, o2), appended to `out`:
 * `old` NULL inserts, `new_doc` NULL deletes, both update (`replaced`: o
 * is the new document, else a diff). */
static void build_op(mf_coll *c, const bson_t *old, const bson_t *new_doc, bool replaced,
                     bson_t *out)
{
    uint8_t uuid[16];
    BSON_APPEND_UTF8(out, "op", !old ? "i" : !new_doc ? "d" : "u");
    BSON_APPEND_UTF8(out, "ns", mf_coll_name(c));
    if (mf_cl_uuid(c, uuid))
        bson_append_binary(out, "ui", 2, BSON_SUBTYPE_UUID, uuid, 16);
    if (!old) {
        BSON_APPEND_DOCUMENT(out, "o", new_doc);
        append_id_doc(out, "o2", new_doc);
    } else if (!new_doc) {
        append_id_doc(out, "o", old);
    } else {
        bson_t diff, o;
        if (!replaced && mf_cl_update_diff(old, new_doc, &diff) == 0) {
            BSON_APPEND_DOCUMENT_BEGIN(out, "o", &o);
            BSON_APPEND_INT32(&o, "$v", 2);
            BSON_APPEND_DOCUMENT(&o, "diff", &diff);
            bson_append_document_end(out, &o);
            bson_destroy(&diff);
        } else {
            if (!replaced)
                bson_destroy(&diff);
            BSON_APPEND_DOCUMENT(out, "o", new_doc);
        }
        append_id_doc(out, "o2", new_doc);
    }
}

/* The entry of one write (build_op), with its statement's session. */
static void build_entry(mf_coll *c, const bson_t *old, const bson_t *new_doc, bool replaced,
                        const mf_cl_stmt *st, mf_cl_optime t, int64_t wall_ms, bson_t *out)
{
    bson_init(out);
    if (st) {
        BSON_APPEND_DOCUMENT(out, "lsid", st->lsid);
        BSON_APPEND_INT64(out, "txnNumber", st->txn_number);
    }
    build_op(c, old, new_doc, replaced, out);
    if (st)
        BSON_APPEND_INT32(out, "stmtId", st->stmt_id);
    BSON_APPEND_TIMESTAMP(out, "ts", t.secs, t.inc);
    BSON_APPEND_INT64(out, "t", TERM);
    BSON_APPEND_INT64(out, "v", 2);
    BSON_APPEND_DATE_TIME(out, "wall", wall_ms);
    if (st) {
        bson_t p;
        BSON_APPEND_DOCUMENT_BEGIN(out, "prevOpTime", &p);
        BSON_APPEND_TIMESTAMP(&p, "ts", st->prev.secs, st->prev.inc);
        BSON_APPEND_INT64(&p, "t", st->prev.secs ? TERM : -1);
        bson_append_document_end(out, &p);
    }
}

/* ------------------------------------------------------------ writing */

int mf_cl_oplog_begin(mf_cl_oplog *o, mf_coll *c, const bson_t *old, const bson_t *new_doc,
                      bool replaced, const mf_cl_stmt *st, mf_cl_oplog_put *put)
{
    mf_coll_lock(o->c, true);
    tick(o, &put->t, &put->wall_ms);
    build_entry(c, old, new_doc, replaced, st, put->t, put->wall_ms, &put->entry);
    put->tree = mf_coll_records(o->c);
    mf_record_id_encode(optime_rid(put->t), put->key);
    return 0;
}

void mf_cl_oplog_op(bson_t *arr, uint32_t i, mf_coll *c, const bson_t *old,
                    const bson_t *new_doc)
{
    char key[16];
    const char *k;
    bson_t d;
    size_t kl = bson_uint32_to_string(i, &k, key, sizeof key);
    bson_append_document_begin(arr, k, (int)kl, &d);
    build_op(c, old, new_doc, false, &d);
    bson_append_document_end(arr, &d);
}

int mf_cl_oplog_begin_apply(mf_cl_oplog *o, const bson_t *ops, const mf_cl_stmt *st,
                            mf_cl_oplog_put *put)
{
    bson_t cmd, p;
    mf_coll_lock(o->c, true);
    tick(o, &put->t, &put->wall_ms);
    bson_init(&put->entry);
    if (st) {
        BSON_APPEND_DOCUMENT(&put->entry, "lsid", st->lsid);
        BSON_APPEND_INT64(&put->entry, "txnNumber", st->txn_number);
    }
    BSON_APPEND_UTF8(&put->entry, "op", "c");
    BSON_APPEND_UTF8(&put->entry, "ns", "admin.$cmd");
    BSON_APPEND_DOCUMENT_BEGIN(&put->entry, "o", &cmd);
    BSON_APPEND_ARRAY(&cmd, "applyOps", ops);
    bson_append_document_end(&put->entry, &cmd);
    BSON_APPEND_TIMESTAMP(&put->entry, "ts", put->t.secs, put->t.inc);
    BSON_APPEND_INT64(&put->entry, "t", TERM);
    BSON_APPEND_INT64(&put->entry, "v", 2);
    BSON_APPEND_DATE_TIME(&put->entry, "wall", put->wall_ms);
    BSON_APPEND_DOCUMENT_BEGIN(&put->entry, "prevOpTime", &p);
    BSON_APPEND_TIMESTAMP(&p, "ts", 0, 0);
    BSON_APPEND_INT64(&p, "t", -1);
    bson_append_document_end(&put->entry, &p);
    put->tree = mf_coll_records(o->c);
    mf_record_id_encode(optime_rid(put->t), put->key);
    return 0;
}

/* Delete the oldest entries past the retention (collection lock held). */
static void trim(mf_cl_oplog *o)
{
    mf_cl_indexes ix = {0};
    mf_lsn lsn = 0;
    mf_error err;
    if (o->bytes <= o->max_bytes)
        return;
    if (mf_cl_indexes_load(o->c, &ix, &err) == 0 &&
        mf_cl_trim_oldest(o->e, o->c, &ix, &o->bytes, o->max_bytes, &lsn, &err) != 0)
        mf_log(MF_LOG_WARNING, "REPL", 21000, "oplog", "trimming the oplog: %s", err.msg);
    mf_cl_indexes_free(&ix);
}

void mf_cl_oplog_end(mf_cl_oplog *o, mf_cl_oplog_put *put, bool written)
{
    if (written) {
        o->bytes += put->entry.len;
        trim(o);
        mf_cl_capped_signal(); /* a tailing reader looks once the lock is let go */
    }
    bson_destroy(&put->entry);
    mf_coll_unlock(o->c);
}

int mf_cl_oplog_noop(mf_cl_oplog *o, const char *msg, mf_lsn *lsn, mf_error *err)
{
    mf_cl_oplog_put put;
    bson_t m;
    mf_coll_lock(o->c, true);
    tick(o, &put.t, &put.wall_ms);
    bson_init(&put.entry);
    BSON_APPEND_UTF8(&put.entry, "op", "n");
    BSON_APPEND_UTF8(&put.entry, "ns", "");
    BSON_APPEND_DOCUMENT_BEGIN(&put.entry, "o", &m);
    BSON_APPEND_UTF8(&m, "msg", msg);
    bson_append_document_end(&put.entry, &m);
    BSON_APPEND_TIMESTAMP(&put.entry, "ts", put.t.secs, put.t.inc);
    BSON_APPEND_INT64(&put.entry, "t", TERM);
    BSON_APPEND_INT64(&put.entry, "v", 2);
    BSON_APPEND_DATE_TIME(&put.entry, "wall", put.wall_ms);
    mf_record_id_encode(optime_rid(put.t), put.key);
    mf_op op = {.kind = MF_OP_PUT, .tree = mf_coll_records(o->c), .key = put.key, .klen = 8,
                .val = bson_get_data(&put.entry), .vlen = put.entry.len};
    int rc = mf_engine_write(o->e, &op, 1, lsn, err);
    mf_cl_oplog_end(o, &put, rc == 0);
    return rc;
}

int mf_cl_oplog_entry_at(mf_cl_oplog *o, mf_cl_optime t, bson_t *out, bool *found,
                         mf_error *err)
{
    uint8_t k[8];
    const uint8_t *v;
    size_t vl;
    bson_t doc;
    bson_init(out);
    mf_record_id_encode(optime_rid(t), k);
    mf_coll_lock(o->c, false);
    int rc = mf_btree_get(mf_engine_tree(o->e, mf_coll_records(o->c)), k, 8, found, &v, &vl, err);
    if (rc == 0 && *found) {
        if (bson_init_static(&doc, v, vl))
            bson_concat(out, &doc);
        else
            rc = mf_error_set(err, MF_DataCorruption, "a damaged oplog entry");
    }
    mf_coll_unlock(o->c);
    return rc;
}

int mf_cl_oplog_read(mf_cl_oplog *o, mf_cl_optime from, size_t max, bson_t **out, size_t *n,
                     mf_cl_optime *oldest, mf_lsn *lsn, mf_error *err)
{
    uint8_t k[8];
    const uint8_t *key, *v;
    size_t kl, vl;
    bool valid;
    mf_cursor cur;
    int rc;
    *n = 0;
    *oldest = (mf_cl_optime){0, 0};
    mf_coll_lock(o->c, false);
    mf_cursor_init(&cur, mf_engine_tree(o->e, mf_coll_records(o->c)));
    if ((rc = mf_cursor_first(&cur, &valid, err)) == 0 && valid) {
        mf_cursor_key(&cur, &key, &kl);
        uint64_t rid = mf_record_id_decode(key);
        *oldest = (mf_cl_optime){(uint32_t)(rid >> 32), (uint32_t)rid};
    }
    mf_record_id_encode(optime_rid(from), k);
    if (rc == 0)
        rc = mf_cursor_seek(&cur, k, 8, false, &valid, err);
    while (rc == 0 && valid && *n < max) {
        bson_t doc;
        mf_cursor_value(&cur, &v, &vl);
        if (!bson_init_static(&doc, v, vl)) {
            rc = mf_error_set(err, MF_DataCorruption, "a damaged oplog entry");
            break;
        }
        if (!(out[*n] = bson_copy(&doc))) {
            rc = mf_error_oom(err);
            break;
        }
        (*n)++;
        rc = mf_cursor_next(&cur, &valid, err);
    }
    /* every entry read was applied, and so is covered by the newest LSN */
    *lsn = mf_engine_last_lsn(o->e);
    mf_coll_unlock(o->c);
    if (rc != 0) {
        while (*n > 0)
            bson_destroy(out[--*n]);
    }
    return rc;
}

/* ------------------------------------------------------------ catalog changes */

bool mf_cl_ns_replicated(const char *ns)
{
    const char *dot = strchr(ns, '.');
    return strncmp(ns, "local.", 6) != 0 && !(dot && strcmp(dot + 1, "system.profile") == 0);
}

void mf_cl_ddl_init(mf_cl_ddl *d, mf_cl_log *lg, const char *ns)
{
    *d = (mf_cl_ddl){.lg = lg};
    d->logged = lg && (lg->txn_ops || lg->oplog) && mf_cl_ns_replicated(ns);
}

/* {op: "c", ns: "<db>.$cmd", ui, o, o2}: what an entry and a transaction's
 * operation say of a catalog change. */
static void build_cmd(const char *ns, const uint8_t *ui, const bson_t *o, const bson_t *o2,
                      bson_t *out)
{
    const char *dot = strchr(ns, '.');
    char cmd_ns[256];
    snprintf(cmd_ns, sizeof cmd_ns, "%.*s.$cmd", dot ? (int)(dot - ns) : (int)strlen(ns), ns);
    BSON_APPEND_UTF8(out, "op", "c");
    BSON_APPEND_UTF8(out, "ns", cmd_ns);
    if (ui)
        bson_append_binary(out, "ui", 2, BSON_SUBTYPE_UUID, ui, 16);
    BSON_APPEND_DOCUMENT(out, "o", o);
    if (o2)
        BSON_APPEND_DOCUMENT(out, "o2", o2);
}

static int ddl_grow(mf_cl_ddl *d, mf_error *err)
{
    size_t cap = d->cap ? d->cap * 2 : 4;
    bson_t **entry = realloc(d->entry, cap * sizeof *entry);
    if (entry)
        d->entry = entry;
    uint8_t(*key)[8] = realloc(d->key, cap * sizeof *key);
    if (key)
        d->key = key;
    mf_op *ops = realloc(d->ops, cap * sizeof *ops);
    if (ops)
        d->ops = ops;
    if (!entry || !key || !ops)
        return mf_error_oom(err);
    d->cap = cap;
    return 0;
}

int mf_cl_ddl_add(mf_cl_ddl *d, const char *ns, const uint8_t *ui, const bson_t *o,
                  const bson_t *o2, mf_error *err)
{
    if (!d->logged)
        return 0;
    if (d->lg->txn_ops) { /* listed in the commit's applyOps */
        char key[16];
        const char *k;
        bson_t op;
        size_t kl = bson_uint32_to_string(bson_count_keys(d->lg->txn_ops), &k, key, sizeof key);
        bson_append_document_begin(d->lg->txn_ops, k, (int)kl, &op);
        build_cmd(ns, ui, o, o2, &op);
        bson_append_document_end(d->lg->txn_ops, &op);
        return 0;
    }
    if (d->n == d->cap && ddl_grow(d, err) != 0)
        return err->code;
    mf_cl_oplog *log = d->lg->oplog;
    if (!d->locked) {
        mf_coll_lock(log->c, true);
        d->locked = true;
    }
    int64_t wall_ms;
    bson_t *e = bson_new();
    tick(log, &d->last, &wall_ms);
    build_cmd(ns, ui, o, o2, e);
    BSON_APPEND_TIMESTAMP(e, "ts", d->last.secs, d->last.inc);
    BSON_APPEND_INT64(e, "t", TERM);
    BSON_APPEND_INT64(e, "v", 2);
    BSON_APPEND_DATE_TIME(e, "wall", wall_ms);
    d->entry[d->n] = e;
    mf_record_id_encode(optime_rid(d->last), d->key[d->n]);
    d->ops[d->n] = (mf_op){.kind = MF_OP_PUT, .tree = mf_coll_records(log->c),
                           .key = d->key[d->n], .klen = 8, .val = bson_get_data(e),
                           .vlen = e->len};
    d->n++;
    return 0;
}

const mf_op_list *mf_cl_ddl_ops(mf_cl_ddl *d)
{
    d->list = (mf_op_list){d->ops, d->n};
    return d->n ? &d->list : NULL;
}

void mf_cl_ddl_end(mf_cl_ddl *d, bool written)
{
    if (d->locked) {
        mf_cl_oplog *log = d->lg->oplog;
        if (written) {
            for (size_t i = 0; i < d->n; i++)
                log->bytes += d->entry[i]->len;
            d->lg->op_time = d->last;
            trim(log);
            mf_cl_capped_signal();
        }
        mf_coll_unlock(log->c);
    }
    for (size_t i = 0; i < d->n; i++)
        bson_destroy(d->entry[i]);
    free(d->entry);
    free(d->key);
    free(d->ops);
    *d = (mf_cl_ddl){0};
}

int mf_cl_ddl_write(mf_cl_ddl *d, mf_engine *e, mf_lsn *lsn, mf_error *err)
{
    int rc = d->n ? mf_engine_write(e, d->ops, d->n, lsn, err) : 0;
    mf_cl_ddl_end(d, rc == 0);
    return rc;
}

/* ------------------------------------------------------------ open */

int mf_cl_oplog_open(mf_engine *e, int64_t max_bytes, mf_cl_oplog **out, mf_error *err)
{
    mf_cl_oplog *o = calloc(1, sizeof *o);
    int rc;
    if (!o)
        return mf_error_oom(err);
    o->e = e;
    o->max_bytes = max_bytes;
    pthread_mutex_init(&o->mu, NULL);
    /* created as mongod creates it: capped, no _id index */
    mf_engine_catalog_lock(e, false);
    o->c = mf_engine_coll(e, OPLOG_NS);
    mf_engine_catalog_unlock(e);
    if (!o->c) {
        bson_t opts = BSON_INITIALIZER;
        BSON_APPEND_BOOL(&opts, "capped", true);
        BSON_APPEND_INT64(&opts, "size", max_bytes);
        rc = mf_cl_create(e, NULL, OPLOG_NS, &opts, NULL, false, err);
        bson_destroy(&opts);
        if (rc != 0 && rc != MF_NamespaceExists)
            goto fail;
        mf_engine_catalog_lock(e, false);
        o->c = mf_engine_coll(e, OPLOG_NS);
        mf_engine_catalog_unlock(e);
    }
    /* where retryable writes keep their sessions' records (write.c) */
    /* and change streams' pre-images (changes.c) */
    static const char *const side[] = {"config.transactions", "config.image_collection",
                                       "config.system.preimages"};
    for (size_t i = 0; i < 3; i++) {
        bson_t none = BSON_INITIALIZER;
        rc = mf_cl_create(e, NULL, side[i], &none, NULL, true, err);
        if (rc != 0 && rc != MF_NamespaceExists)
            goto fail;
    }
    /* the clock resumes after the newest entry */
    mf_coll_lock(o->c, false);
    uint64_t next;
    rc = mf_cl_next_record_id(e, o->c, &next, err);
    if (rc == 0)
        rc = mf_cl_doc_bytes(e, o->c, &o->bytes, err);
    mf_coll_unlock(o->c);
    if (rc != 0)
        goto fail;
    if (next > 1) {
        o->last.secs = (uint32_t)((next - 1) >> 32);
        o->last.inc = (uint32_t)(next - 1);
    }
    o->last_wall_ms = mf_clock_wall_ms();
    if (next == 1) { /* a new set: its first entry, as replSetInitiate writes */
        mf_lsn lsn = 0;
        if ((rc = mf_cl_oplog_noop(o, "initiating set", &lsn, err)) != 0 ||
            (rc = mf_engine_sync(e, lsn, err)) != 0)
            goto fail;
    }
    *out = o;
    return 0;
fail:
    mf_cl_oplog_close(o);
    return rc;
}

void mf_cl_oplog_close(mf_cl_oplog *o)
{
    if (!o)
        return;
    pthread_mutex_destroy(&o->mu);
    free(o);
}
