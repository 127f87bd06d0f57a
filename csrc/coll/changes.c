/*
 * changes.c -- change streams: a replica set's oplog read as mongod 7.0's
 * change events (docs/change-streams.md).
 *
 * A stream reads local.oplog.rs from the first ts it has not read
 * (`next`), a chunk of entries at a time under the oplog's shared lock:
 * writers hold that lock exclusively from the ts they take to the end of
 * their engine write, so what a reader finds is every entry up to the
 * newest, with no gap a later writer could fill.  Each entry gives its
 * events: an insert, update or delete one, a catalog change one (or none),
 * a transaction's applyOps one per operation in order (txnOpIndex).  An
 * event is kept when it is of the stream's namespaces and types, then
 * gets its images (fullDocument, fullDocumentBeforeChange) and is handed
 * out.  The stream's token order is the oplog's: (ts, txnOpIndex).
 *
 * Resuming from an event's token skips the events up to it at its ts, and
 * the event must be there (280 otherwise); a high-water mark's token
 * (tokenType 0, what a batch with no event says) needs nothing found:
 * every event at or after its ts compares after it.
 *
 * Pre-images live in config.system.preimages, {_id: {nsUUID, ts,
 * applyOpsIndex}, preImage, operationTime}, written by write.c in the
 * engine write of the update or delete (when the collection has
 * changeStreamPreAndPostImages enabled); a post-image is the pre-image
 * with the entry's diff applied (diff.c).
 */
#include "coll.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 64              /* entries read per lock */
#define NS_MAX 319            /* "db.coll" (mongod's limit) */
#define PREIMAGES_NS "config.system.preimages"

/* ------------------------------------------------------------ the token */

/* The token is built as mongod's KeyString (V1, ascending) of its fields:
 * a type byte, then the value. */
enum {
    KS_MINKEY = 10, KS_UNDEFINED = 15, KS_NULL = 20, KS_NEG_LARGE = 31, KS_NEG_1 = 39,
    KS_ZERO = 41, KS_POS_1 = 43, KS_POS_LARGE = 51, KS_STRING = 60, KS_OBJECT = 70,
    KS_ARRAY = 80, KS_BINDATA = 90, KS_OID = 100, KS_FALSE = 110, KS_TRUE = 111,
    KS_DATE = 120, KS_TIMESTAMP = 130, KS_REGEX = 140, KS_DBREF = 150, KS_CODE = 160,
    KS_CODE_W_SCOPE = 170, KS_MAXKEY = 240, KS_END = 4
};

#define TOKEN_VERSION 2
#define TOKEN_EVENT 128
#define TOKEN_HWM 0

static int put(mf_buf *b, const void *p, size_t n)
{
    return mf_buf_append(b, p, n);
}

static int put_byte(mf_buf *b, uint8_t v)
{
    return mf_buf_append(b, &v, 1);
}

static int put_be(mf_buf *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        x[i] = (uint8_t)v;
    return put(b, x, (size_t)n);
}

/* An integer: zero, or its magnitude shifted left one (the low bit marks a
 * fraction) in as few bytes as hold it, the type byte saying how many;
 * a negative one's bytes inverted. */
static int put_int(mf_buf *b, int64_t v)
{
    if (v == 0)
        return put_byte(b, KS_ZERO);
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (mag >= (uint64_t)1 << 62) /* past what the shift keeps: as a large magnitude */
        return put_byte(b, v < 0 ? KS_NEG_LARGE : KS_POS_LARGE) || put_be(b, v < 0 ? ~mag : mag, 8);
    uint64_t enc = mag << 1;
    int n = 1;
    while (n < 8 && enc >> (8 * n))
        n++;
    if (v > 0)
        return put_byte(b, (uint8_t)(KS_POS_1 + n - 1)) || put_be(b, enc, n);
    return put_byte(b, (uint8_t)(KS_NEG_1 - (n - 1))) || put_be(b, ~enc, n);
}

/* String bytes with each 0x00 written 0x00 0xFF, then 0x00. */
static int put_str(mf_buf *b, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (put_byte(b, (uint8_t)s[i]) || (s[i] == 0 && put_byte(b, 0xFF)))
            return -1;
    return put_byte(b, 0);
}

static int put_value(mf_buf *b, const bson_iter_t *it, int depth);

/* An object's or array's body: each element's type byte, its name (an
 * object's), its value; then 0x00. */
static int put_fields(mf_buf *b, const bson_iter_t *parent, bool names, int depth)
{
    bson_iter_t c;
    if (depth > 200 || !bson_iter_recurse(parent, &c))
        return -1;
    while (bson_iter_next(&c)) {
        mf_buf val = {0};
        int rc = put_value(&val, &c, depth + 1);
        /* the type byte first, then the name, then the rest of the value */
        if (rc == 0)
            rc = put(b, val.data, 1);
        if (rc == 0 && names)
            rc = put_str(b, bson_iter_key(&c), strlen(bson_iter_key(&c)));
        if (rc == 0)
            rc = put(b, val.data + 1, val.len - 1);
        mf_buf_free(&val);
        if (rc)
            return -1;
    }
    return put_byte(b, 0);
}

static int put_value(mf_buf *b, const bson_iter_t *it, int depth)
{
    uint32_t len;
    const char *s;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_MINKEY:
        return put_byte(b, KS_MINKEY);
    case BSON_TYPE_MAXKEY:
        return put_byte(b, KS_MAXKEY);
    case BSON_TYPE_UNDEFINED:
        return put_byte(b, KS_UNDEFINED);
    case BSON_TYPE_NULL:
        return put_byte(b, KS_NULL);
    case BSON_TYPE_INT32:
        return put_int(b, bson_iter_int32(it));
    case BSON_TYPE_INT64:
        return put_int(b, bson_iter_int64(it));
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (d == (double)(int64_t)d && d > -9007199254740992.0 && d < 9007199254740992.0)
            return put_int(b, (int64_t)d);
        /* a fraction or beyond 2^53: its bits, ordered as a large magnitude */
        uint64_t bits;
        memcpy(&bits, &d, 8);
        return put_byte(b, d < 0 ? KS_NEG_LARGE : KS_POS_LARGE) ||
               put_be(b, d < 0 ? ~bits : bits, 8);
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dec;
        bson_iter_decimal128(it, &dec);
        return put_byte(b, KS_POS_LARGE) || put_be(b, dec.high, 8) || put_be(b, dec.low, 8);
    }
    case BSON_TYPE_UTF8:
        s = bson_iter_utf8(it, &len);
        return put_byte(b, KS_STRING) || put_str(b, s, len);
    case BSON_TYPE_SYMBOL:
        s = bson_iter_symbol(it, &len);
        return put_byte(b, KS_STRING) || put_str(b, s, len);
    case BSON_TYPE_DOCUMENT:
        return put_byte(b, KS_OBJECT) || put_fields(b, it, true, depth);
    case BSON_TYPE_ARRAY:
        return put_byte(b, KS_ARRAY) || put_fields(b, it, false, depth);
    case BSON_TYPE_BINARY: {
        bson_subtype_t st;
        const uint8_t *d;
        bson_iter_binary(it, &st, &len, &d);
        if (put_byte(b, KS_BINDATA))
            return -1;
        if (len < 0xFF ? put_byte(b, (uint8_t)len) : (put_byte(b, 0xFF) || put_be(b, len, 4)))
            return -1;
        return put_byte(b, (uint8_t)st) || put(b, d, len);
    }
    case BSON_TYPE_OID:
        return put_byte(b, KS_OID) || put(b, bson_iter_oid(it)->bytes, 12);
    case BSON_TYPE_BOOL:
        return put_byte(b, bson_iter_bool(it) ? KS_TRUE : KS_FALSE);
    case BSON_TYPE_DATE_TIME:
        return put_byte(b, KS_DATE) ||
               put_be(b, (uint64_t)bson_iter_date_time(it) ^ (1ull << 63), 8);
    case BSON_TYPE_TIMESTAMP: {
        uint32_t t, i;
        bson_iter_timestamp(it, &t, &i);
        return put_byte(b, KS_TIMESTAMP) || put_be(b, (uint64_t)t << 32 | i, 8);
    }
    case BSON_TYPE_REGEX: {
        const char *opts;
        s = bson_iter_regex(it, &opts);
        return put_byte(b, KS_REGEX) || put_str(b, s, strlen(s)) ||
               put_str(b, opts, strlen(opts));
    }
    case BSON_TYPE_DBPOINTER: {
        const bson_oid_t *oid;
        bson_iter_dbpointer(it, &len, &s, &oid);
        return put_byte(b, KS_DBREF) || put_str(b, s, len) || put(b, oid->bytes, 12);
    }
    case BSON_TYPE_CODE:
        s = bson_iter_code(it, &len);
        return put_byte(b, KS_CODE) || put_str(b, s, len);
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t sl;
        const uint8_t *scope;
        bson_t sd;
        bson_iter_t si;
        s = bson_iter_codewscope(it, &len, &sl, &scope);
        if (put_byte(b, KS_CODE_W_SCOPE) || put_str(b, s, len) ||
            !bson_init_static(&sd, scope, sl) || !bson_iter_init(&si, &sd))
            return -1;
        /* the scope's fields, as an object's body */
        bson_t wrap = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT(&wrap, "s", &sd);
        bson_iter_t w;
        int rc = bson_iter_init_find(&w, &wrap, "s") ? put_fields(b, &w, true, depth) : -1;
        bson_destroy(&wrap);
        return rc;
    }
    default:
        return -1;
    }
}

/* A document as a KeyString object. */
static int put_doc(mf_buf *b, const bson_t *doc)
{
    bson_t wrap = BSON_INITIALIZER;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT(&wrap, "d", doc);
    int rc = bson_iter_init_find(&it, &wrap, "d") ? put_value(b, &it, 0) : -1;
    bson_destroy(&wrap);
    return rc;
}

/* The token's bytes: for a high-water mark (`ident` NULL) the fields up to
 * a null UUID. */
static int token_bytes(mf_buf *b, mf_cl_optime ts, int64_t txn_idx, bool from_invalidate,
                       const uint8_t *uuid, const bson_t *ident)
{
    b->len = 0;
    if (put_byte(b, KS_TIMESTAMP) || put_be(b, (uint64_t)ts.secs << 32 | ts.inc, 8) ||
        put_int(b, TOKEN_VERSION) || put_int(b, ident ? TOKEN_EVENT : TOKEN_HWM) ||
        put_int(b, txn_idx) || put_byte(b, from_invalidate ? KS_TRUE : KS_FALSE))
        return -1;
    if (uuid) {
        if (put_byte(b, KS_BINDATA) || put_byte(b, 16) || put_byte(b, BSON_SUBTYPE_UUID) ||
            put(b, uuid, 16))
            return -1;
    } else if (put_byte(b, KS_NULL)) {
        return -1;
    }
    if (ident && put_doc(b, ident))
        return -1;
    return put_byte(b, KS_END);
}

/* {_data: "<upper-case hex>"} as `key` of `out`. */
static void append_token(bson_t *out, const char *key, const uint8_t *data, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char *s = bson_malloc(2 * len + 1);
    for (size_t i = 0; i < len; i++) {
        s[2 * i] = hex[data[i] >> 4];
        s[2 * i + 1] = hex[data[i] & 15];
    }
    s[2 * len] = 0;
    bson_t d;
    bson_append_document_begin(out, key, -1, &d);
    BSON_APPEND_UTF8(&d, "_data", s);
    bson_append_document_end(out, &d);
    bson_free(s);
}

/* Read an integer field of a token at *p (0 on success). */
static int get_int(const uint8_t **p, const uint8_t *end, int64_t *v)
{
    if (*p >= end)
        return -1;
    uint8_t t = *(*p)++;
    if (t == KS_ZERO) {
        *v = 0;
        return 0;
    }
    if (t < KS_POS_1 || t >= KS_POS_1 + 8)
        return -1;
    int n = t - KS_POS_1 + 1;
    if (end - *p < n)
        return -1;
    uint64_t enc = 0;
    for (int i = 0; i < n; i++)
        enc = enc << 8 | *(*p)++;
    *v = (int64_t)(enc >> 1);
    return 0;
}

static int bad_token(mf_error *err)
{
    return mf_error_set(err, 50811, "Bad resume token: the token is damaged or not a change "
                                    "stream's");
}

int mf_cl_token_parse(const bson_iter_t *it, mf_cl_token *out, mf_error *err)
{
    bson_iter_t d;
    memset(out, 0, sizeof *out);
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &d) ||
        !bson_iter_find(&d, "_data"))
        return mf_error_set(err, 40647, "Bad resume token: _data of missing or of wrong type. "
                                        "Expected string, got missing");
    if (!BSON_ITER_HOLDS_UTF8(&d))
        return mf_error_set(err, 40647, "Bad resume token: _data of missing or of wrong type. "
                                        "Expected string, got %s",
                            mf_bsonx_type_alias(bson_iter_type(&d)));
    uint32_t hl;
    const char *hex = bson_iter_utf8(&d, &hl);
    if (hl == 0)
        return mf_error_set(err, 40649, "invalid empty resume token");
    if (hl % 2)
        return mf_error_set(err, MF_FailedToParse, "resume token string was not a valid hex "
                                                   "string");
    out->len = hl / 2;
    if (!(out->data = malloc(out->len)))
        return mf_error_oom(err);
    for (size_t i = 0; i < out->len; i++) {
        int v = 0;
        for (int j = 0; j < 2; j++) {
            char c = hex[2 * i + (size_t)j];
            int x = isdigit((unsigned char)c) ? c - '0'
                    : c >= 'a' && c <= 'f'    ? c - 'a' + 10
                    : c >= 'A' && c <= 'F'    ? c - 'A' + 10
                                              : -1;
            if (x < 0) {
                mf_cl_token_free(out);
                return mf_error_set(err, MF_FailedToParse,
                                    "resume token string was not a valid hex string");
            }
            v = v << 4 | x;
        }
        out->data[i] = (uint8_t)v;
    }
    const uint8_t *p = out->data, *end = p + out->len;
    int64_t version, type, idx;
    if (end - p < 9 || *p != KS_TIMESTAMP) {
        mf_cl_token_free(out);
        return bad_token(err);
    }
    uint64_t ts = 0;
    for (int i = 1; i <= 8; i++)
        ts = ts << 8 | p[i];
    out->ts = (mf_cl_optime){(uint32_t)(ts >> 32), (uint32_t)ts};
    p += 9;
    if (get_int(&p, end, &version) != 0) {
        mf_cl_token_free(out);
        return bad_token(err);
    }
    if (version != TOKEN_VERSION) {
        mf_cl_token_free(out);
        return mf_error_set(err, 50795, "Invalid Resume Token: only supports version 2, "
                                        "got %lld",
                            (long long)version);
    }
    if (get_int(&p, end, &type) != 0 || (type != TOKEN_EVENT && type != TOKEN_HWM)) {
        mf_cl_token_free(out);
        return mf_error_set(err, 51057, "Bad resume token: unknown token type");
    }
    if (get_int(&p, end, &idx) != 0) {
        mf_cl_token_free(out);
        return mf_error_set(err, 50794, "Invalid Resume Token: txnOpIndex should be non-negative");
    }
    if (p >= end || (*p != KS_TRUE && *p != KS_FALSE)) {
        mf_cl_token_free(out);
        return mf_error_set(err, 50870, "Bad resume token: fromInvalidate must be a bool");
    }
    out->from_invalidate = *p++ == KS_TRUE;
    if (p < end && *p == KS_BINDATA) {
        if (end - p < 19 || p[1] != 16 || p[2] != BSON_SUBTYPE_UUID) {
            mf_cl_token_free(out);
            return bad_token(err);
        }
        memcpy(out->uuid, p + 3, 16);
        out->has_uuid = true;
        p += 19;
    } else if (p < end && *p == KS_NULL) {
        p++;
    } else {
        mf_cl_token_free(out);
        return bad_token(err);
    }
    if (p >= end || end[-1] != KS_END) {
        mf_cl_token_free(out);
        return bad_token(err);
    }
    out->event = type == TOKEN_EVENT;
    out->txn_op_index = idx;
    return 0;
}

void mf_cl_token_free(mf_cl_token *t)
{
    free(t->data);
    t->data = NULL;
    t->len = 0;
}

/* ------------------------------------------------------------ the stream */

struct mf_cl_changes {
    mf_cl_db *db;
    char *dbname;             /* NULL: every database */
    char *coll;               /* NULL: every collection */
    bool expanded, system_events;
    mf_cl_full_doc full_document;
    mf_cl_before before_change;
    mf_cl_optime next;        /* the first ts not read */
    mf_lsn lsn;               /* covers everything read */
    /* resuming from an event's token: skip to it (at its ts) */
    mf_cl_token skip;
    bool skipping;
    bool swallow_invalidate;  /* startAfter an invalidate: not again */
    /* entries read, not yet turned into events */
    bson_t *chunk[CHUNK];
    size_t nchunk, at;
    /* the entry being turned into events: its ops (one, or applyOps') */
    bson_t *entry;
    bson_iter_t ops;          /* applyOps' array, when `in_apply` */
    bool in_apply, single_done;
    int64_t op_index;
    /* after an invalidating event: the invalidate, then nothing */
    bool invalidate_next;
    mf_buf inval_token;
    mf_cl_optime inval_ts;
    int64_t inval_wall;
    bool done;
};

static bool optime_lt(mf_cl_optime a, mf_cl_optime b)
{
    return a.secs < b.secs || (a.secs == b.secs && a.inc < b.inc);
}

static mf_cl_optime optime_after(mf_cl_optime t)
{
    return t.inc == UINT32_MAX ? (mf_cl_optime){t.secs + 1, 0} : (mf_cl_optime){t.secs, t.inc + 1};
}

int mf_cl_changes_open(mf_cl_db *db, const mf_cl_changes_spec *s, mf_cl_changes **out,
                       mf_error *err)
{
    *out = NULL;
    if (!db->oplog)
        return mf_error_set(err, 40573, "The $changeStream stage is only supported on replica "
                                        "sets");
    const mf_cl_token *tok = s->resume_after ? s->resume_after : s->start_after;
    if (s->resume_after && s->resume_after->from_invalidate)
        return mf_error_set(err, MF_InvalidResumeToken,
                            "Attempting to resume a change stream using 'resumeAfter' is not "
                            "allowed from an invalidate notification.");
    if (tok && tok->event && !tok->has_uuid && s->coll)
        return mf_error_set(err, MF_InvalidResumeToken,
                            "Attempted to resume a single-collection stream, but the resume "
                            "token does not include a UUID.");
    mf_cl_changes *ch = calloc(1, sizeof *ch);
    if (!ch)
        return mf_error_oom(err);
    ch->db = db;
    ch->expanded = s->expanded;
    ch->system_events = s->system_events;
    ch->full_document = s->full_document;
    ch->before_change = s->before_change;
    if ((s->db && !(ch->dbname = strdup(s->db))) || (s->coll && !(ch->coll = strdup(s->coll)))) {
        mf_cl_changes_free(ch);
        return mf_error_oom(err);
    }
    mf_cl_optime last;
    mf_cl_oplog_last(db->oplog, &last, NULL);
    if (tok) {
        ch->next = tok->ts;
        if (tok->event) {
            ch->skip = *tok;
            if (!(ch->skip.data = malloc(tok->len))) {
                mf_cl_changes_free(ch);
                return mf_error_oom(err);
            }
            memcpy(ch->skip.data, tok->data, tok->len);
            ch->skipping = true;
            ch->swallow_invalidate = tok->from_invalidate;
        }
    } else if (s->has_start_at) {
        ch->next = s->start_at;
    } else {
        ch->next = optime_after(last); /* what is written from now on */
    }
    /* the start must still be in the oplog */
    if (tok || s->has_start_at) {
        bson_t *none[1];
        size_t n;
        mf_cl_optime oldest;
        mf_lsn lsn;
        int rc = mf_cl_oplog_read(db->oplog, ch->next, 0, none, &n, &oldest, &lsn, err);
        if (rc == 0 && optime_lt(ch->next, oldest))
            rc = mf_error_set(err, MF_ChangeStreamHistoryLost,
                              "Resume of change stream was not possible, as the resume point "
                              "may no longer be in the oplog.");
        if (rc) {
            mf_cl_changes_free(ch);
            return rc;
        }
    }
    *out = ch;
    return 0;
}

void mf_cl_changes_free(mf_cl_changes *ch)
{
    if (!ch)
        return;
    for (size_t i = ch->at; i < ch->nchunk; i++)
        bson_destroy(ch->chunk[i]);
    if (ch->entry)
        bson_destroy(ch->entry);
    mf_cl_token_free(&ch->skip);
    mf_buf_free(&ch->inval_token);
    free(ch->dbname);
    free(ch->coll);
    free(ch);
}

bool mf_cl_changes_done(const mf_cl_changes *ch)
{
    return ch->done;
}

mf_lsn mf_cl_changes_lsn(const mf_cl_changes *ch)
{
    return ch->lsn;
}

void mf_cl_changes_hwm(const mf_cl_changes *ch, bson_t *out, const char *key)
{
    mf_buf b = {0};
    if (token_bytes(&b, ch->next, 0, false, NULL, NULL) == 0)
        append_token(out, key, b.data, b.len);
    mf_buf_free(&b);
}

/* ------------------------------------------------------------ one event */

/* What one operation of the oplog says, as an event to be. */
typedef struct op_event {
    const char *type;         /* operationType; NULL: no event */
    char db[NS_MAX + 1];
    const char *coll;         /* NULL: the database's (dropDatabase) */
    char to_db[NS_MAX + 1];
    const char *to_coll;      /* rename's target, or NULL */
    bool has_uuid;
    uint8_t uuid[16];
    bson_t key;               /* documentKey (static), when has_key */
    bool has_key;
    const bson_t *full;       /* insert / replace: the document */
    bson_t diff;              /* update: the $v: 2 diff (static) */
    bool has_diff;
    bson_t desc;              /* operationDescription (owned) */
    bson_t before;            /* modify: stateBeforeChange (owned) */
    bool has_before;
    bool invalidates;
    bson_t o_doc, o2_doc;     /* the operation's o and o2 (static) */
    bool has_o2;
} op_event;

/* Split "db.coll" into ev->db and a pointer to its collection part (in
 * `ns`, which outlives the event). */
static const char *split_ns(const char *ns, char *db)
{
    const char *dot = strchr(ns, '.');
    size_t n = dot ? (size_t)(dot - ns) : strlen(ns);
    if (n > NS_MAX)
        n = NS_MAX;
    memcpy(db, ns, n);
    db[n] = 0;
    return dot ? dot + 1 : "";
}

static bool internal_db(const char *db)
{
    return strcmp(db, "admin") == 0 || strcmp(db, "config") == 0 || strcmp(db, "local") == 0;
}

/* Whether the stream watches an event of db.coll (coll NULL: about the
 * database itself) -- or, for a rename, of either side. */
static bool watched(const mf_cl_changes *ch, const char *db, const char *coll)
{
    if (ch->dbname ? strcmp(db, ch->dbname) != 0 : internal_db(db))
        return false;
    if (ch->coll)
        return !coll || strcmp(coll, ch->coll) == 0;
    return !coll || ch->system_events || strncmp(coll, "system.", 7) != 0;
}

static void event_clear(op_event *ev)
{
    bson_destroy(&ev->desc);
    bson_destroy(&ev->before);
}

/* `o` without its first field (the command's name). */
static void rest_of(const bson_t *o, bson_t *out)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, o) || !bson_iter_next(&it))
        return;
    while (bson_iter_next(&it))
        mf_bsonx_append_iter(out, bson_iter_key(&it), -1, &it);
}

static void append_ns(bson_t *out, const char *key, const char *db, const char *coll)
{
    bson_t d;
    bson_append_document_begin(out, key, -1, &d);
    BSON_APPEND_UTF8(&d, "db", db);
    if (coll)
        BSON_APPEND_UTF8(&d, "coll", coll);
    bson_append_document_end(out, &d);
}

/* A catalog change's event (op "c" on "<db>.$cmd"). */
static void command_event(const mf_cl_changes *ch, op_event *ev)
{
    bson_iter_t it, f;
    if (!bson_iter_init(&it, &ev->o_doc) || !bson_iter_next(&it))
        return;
    const char *cmd = bson_iter_key(&it);
    const char *name = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : NULL;
    if (strcmp(cmd, "dropDatabase") == 0) {
        ev->type = "dropDatabase";
        ev->coll = NULL;
        ev->invalidates = ch->coll || ch->dbname;
        return;
    }
    if (!name)
        return;
    if (strcmp(cmd, "renameCollection") == 0) {
        /* {renameCollection: "db.from", to: "db.to", stayTemp, dropTarget?} */
        const char *to = bson_iter_init_find(&f, &ev->o_doc, "to") && BSON_ITER_HOLDS_UTF8(&f)
                             ? bson_iter_utf8(&f, NULL)
                             : "";
        ev->coll = split_ns(name, ev->db);
        ev->to_coll = split_ns(to, ev->to_db);
        ev->type = "rename";
        append_ns(&ev->desc, "to", ev->to_db, ev->to_coll);
        if (bson_iter_init_find(&f, &ev->o_doc, "dropTarget"))
            mf_bsonx_append_iter(&ev->desc, "dropTarget", -1, &f);
        ev->invalidates = ch->coll != NULL;
        return;
    }
    ev->coll = name;
    if (strcmp(cmd, "drop") == 0) {
        ev->type = "drop";
        ev->invalidates = ch->coll != NULL;
    } else if (strcmp(cmd, "create") == 0) {
        ev->type = "create";
        rest_of(&ev->o_doc, &ev->desc);
    } else if (strcmp(cmd, "createIndexes") == 0) {
        bson_t arr, spec;
        ev->type = "createIndexes";
        BSON_APPEND_ARRAY_BEGIN(&ev->desc, "indexes", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &spec);
        rest_of(&ev->o_doc, &spec);
        bson_append_document_end(&arr, &spec);
        bson_append_array_end(&ev->desc, &arr);
    } else if (strcmp(cmd, "commitIndexBuild") == 0) {
        ev->type = "createIndexes";
        if (bson_iter_init_find(&f, &ev->o_doc, "indexes"))
            mf_bsonx_append_iter(&ev->desc, "indexes", -1, &f);
    } else if (strcmp(cmd, "dropIndexes") == 0) {
        bson_t arr;
        ev->type = "dropIndexes";
        BSON_APPEND_ARRAY_BEGIN(&ev->desc, "indexes", &arr);
        if (ev->has_o2)
            BSON_APPEND_DOCUMENT(&arr, "0", &ev->o2_doc);
        bson_append_array_end(&ev->desc, &arr);
    } else if (strcmp(cmd, "collMod") == 0) {
        ev->type = "modify";
        rest_of(&ev->o_doc, &ev->desc);
        ev->has_before = true;
        if (ev->has_o2 && bson_iter_init_find(&f, &ev->o2_doc, "collectionOptions_old"))
            mf_bsonx_append_iter(&ev->before, "collectionOptions", -1, &f);
        if (ev->has_o2 && bson_iter_init_find(&f, &ev->o2_doc, "indexOptions_old"))
            mf_bsonx_append_iter(&ev->before, "indexOptions", -1, &f);
    }
    /* startIndexBuild, abortIndexBuild, emptycapped ...: no event */
}

/* Read operation `op` ({op, ns, ui, o, o2}) into `ev`; ev->type NULL when
 * it makes no event this stream shows. */
static void read_op(const mf_cl_changes *ch, const bson_t *op, op_event *ev)
{
    bson_iter_t it;
    memset(ev, 0, sizeof *ev);
    bson_init(&ev->desc);
    bson_init(&ev->before);
    const char *kind = bson_iter_init_find(&it, op, "op") && BSON_ITER_HOLDS_UTF8(&it)
                           ? bson_iter_utf8(&it, NULL)
                           : "";
    const char *ns = bson_iter_init_find(&it, op, "ns") && BSON_ITER_HOLDS_UTF8(&it)
                         ? bson_iter_utf8(&it, NULL)
                         : "";
    if (bson_iter_init_find(&it, op, "ui") && BSON_ITER_HOLDS_BINARY(&it)) {
        bson_subtype_t st;
        uint32_t len;
        const uint8_t *d;
        bson_iter_binary(&it, &st, &len, &d);
        if (len == 16) {
            memcpy(ev->uuid, d, 16);
            ev->has_uuid = true;
        }
    }
    if (!bson_iter_init_find(&it, op, "o") || !mf_bsonx_doc_view(&it, &ev->o_doc))
        return;
    ev->has_o2 = bson_iter_init_find(&it, op, "o2") && mf_bsonx_doc_view(&it, &ev->o2_doc);
    ev->coll = split_ns(ns, ev->db);
    if (strcmp(kind, "i") == 0) {
        ev->type = "insert";
        ev->full = &ev->o_doc;
        ev->key = ev->has_o2 ? ev->o2_doc : ev->o_doc;
        ev->has_key = true;
    } else if (strcmp(kind, "u") == 0) {
        bson_iter_t v, d;
        ev->key = ev->o2_doc;
        ev->has_key = ev->has_o2;
        if (bson_iter_init_find(&v, &ev->o_doc, "$v") && bson_iter_init_find(&d, &ev->o_doc, "diff") &&
            mf_bsonx_doc_view(&d, &ev->diff)) {
            ev->type = "update";
            ev->has_diff = true;
        } else {
            ev->type = "replace";
            ev->full = &ev->o_doc;
        }
    } else if (strcmp(kind, "d") == 0) {
        ev->type = "delete";
        ev->key = ev->o_doc;
        ev->has_key = true;
    } else if (strcmp(kind, "c") == 0 && strcmp(ev->coll, "$cmd") == 0) {
        command_event(ch, ev);
    }
    if (!ev->type)
        return;
    /* the stream's namespaces: a rename from or to one it watches */
    bool mine = watched(ch, ev->db, ev->coll) ||
                (ev->to_coll && watched(ch, ev->to_db, ev->to_coll));
    if (ev->coll && ev->coll[0] == '$')
        mine = false;
    /* without showExpandedEvents, the classic types only */
    bool classic = strcmp(ev->type, "create") != 0 && strcmp(ev->type, "createIndexes") != 0 &&
                   strcmp(ev->type, "dropIndexes") != 0 && strcmp(ev->type, "modify") != 0;
    if (!mine || (!classic && !ch->expanded)) {
        ev->type = NULL;
        ev->invalidates = false;
    }
}

/* The event's identity in its token: {operationType, documentKey} or
 * {operationType, operationDescription}. */
static void identity(const op_event *ev, bson_t *out)
{
    bson_init(out);
    BSON_APPEND_UTF8(out, "operationType", ev->type);
    if (ev->has_key)
        BSON_APPEND_DOCUMENT(out, "documentKey", &ev->key);
    else
        BSON_APPEND_DOCUMENT(out, "operationDescription", &ev->desc);
}

/* A copy of db.coll's document with _id `key`'s, if the collection is
 * still the one `uuid` names.  Takes the catalog's and the collection's
 * locks. */
static int lookup(mf_engine *e, const char *ns, const uint8_t *uuid, const bson_t *key,
                  bson_t *out, bool *found, mf_error *err)
{
    uint8_t now[16];
    int rc = 0;
    *found = false;
    bson_init(out);
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (c && (!uuid || (mf_cl_uuid(c, now) && memcmp(now, uuid, 16) == 0))) {
        bson_destroy(out);
        rc = mf_cl_read_by_id(e, ns, key, out, found, err);
    }
    mf_engine_catalog_unlock(e);
    return rc;
}

/* The pre-image of the operation at (ts, index) of collection `uuid`. */
static int pre_image(mf_engine *e, const uint8_t *uuid, mf_cl_optime ts, int64_t index,
                     bson_t *out, bool *found, mf_error *err)
{
    bson_t id = BSON_INITIALIZER, key, doc;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT_BEGIN(&id, "_id", &key);
    bson_append_binary(&key, "nsUUID", 6, BSON_SUBTYPE_UUID, uuid, 16);
    BSON_APPEND_TIMESTAMP(&key, "ts", ts.secs, ts.inc);
    BSON_APPEND_INT64(&key, "applyOpsIndex", index);
    bson_append_document_end(&id, &key);
    mf_engine_catalog_lock(e, false);
    int rc = mf_cl_read_by_id(e, PREIMAGES_NS, &id, &doc, found, err);
    mf_engine_catalog_unlock(e);
    bson_destroy(&id);
    bson_init(out);
    if (rc == 0 && *found) {
        bson_t img;
        *found = bson_iter_init_find(&it, &doc, "preImage") && mf_bsonx_doc_view(&it, &img);
        if (*found)
            bson_concat(out, &img);
    }
    bson_destroy(&doc);
    return rc;
}

/* The fields of an event's description in a "required" image's error. */
static void describe(const op_event *ev, mf_cl_optime ts, const bson_t *entry, char *out,
                     size_t cap)
{
    bson_t d = BSON_INITIALIZER, ns;
    bson_iter_t it;
    BSON_APPEND_UTF8(&d, "operationType", ev->type);
    BSON_APPEND_DOCUMENT_BEGIN(&d, "ns", &ns);
    BSON_APPEND_UTF8(&ns, "db", ev->db);
    if (ev->coll)
        BSON_APPEND_UTF8(&ns, "coll", ev->coll);
    bson_append_document_end(&d, &ns);
    BSON_APPEND_TIMESTAMP(&d, "clusterTime", ts.secs, ts.inc);
    if (bson_iter_init_find(&it, entry, "txnNumber"))
        mf_bsonx_append_iter(&d, "txnNumber", -1, &it);
    mf_bsonx_to_string(&d, out, cap);
    bson_destroy(&d);
}

/* Build the event for `ev` into `out`, with its images. */
static int build_event(mf_cl_changes *ch, const op_event *ev, const bson_t *entry,
                       mf_cl_optime ts, int64_t index, const uint8_t *token, size_t token_len,
                       bson_t *out, mf_error *err)
{
    mf_engine *e = ch->db->engine;
    bson_iter_t it;
    int64_t wall = bson_iter_init_find(&it, entry, "wall") && BSON_ITER_HOLDS_DATE_TIME(&it)
                       ? bson_iter_date_time(&it)
                       : 0;
    bool is_update = strcmp(ev->type, "update") == 0;
    bool has_pre = strcmp(ev->type, "delete") == 0 || is_update ||
                   strcmp(ev->type, "replace") == 0;
    char ns[2 * NS_MAX + 2];
    snprintf(ns, sizeof ns, "%s.%s", ev->db, ev->coll ? ev->coll : "");
    bson_t pre = BSON_INITIALIZER, full = BSON_INITIALIZER;
    bool pre_found = false, full_found = false;
    int rc = 0;
    /* the images first: their errors end the event */
    bool want_pre = has_pre && ev->has_uuid &&
                    (ch->before_change != MF_CL_BEFORE_OFF ||
                     (is_update && (ch->full_document == MF_CL_FULL_WHEN_AVAILABLE ||
                                    ch->full_document == MF_CL_FULL_REQUIRED)));
    if (want_pre) {
        bson_destroy(&pre);
        rc = pre_image(e, ev->uuid, ts, index, &pre, &pre_found, err);
    }
    if (rc == 0 && is_update && ch->full_document == MF_CL_FULL_UPDATE_LOOKUP && ev->has_key) {
        bson_destroy(&full);
        rc = lookup(e, ns, ev->has_uuid ? ev->uuid : NULL, &ev->key, &full, &full_found, err);
    } else if (rc == 0 && is_update && ch->full_document >= MF_CL_FULL_WHEN_AVAILABLE) {
        if (pre_found && ev->has_diff) {
            /* (a diff of nothing leaves the document as it was) */
            bson_destroy(&full);
            if (bson_empty(&ev->diff)) {
                bson_copy_to(&pre, &full);
                full_found = true;
            } else if (!(full_found = mf_cl_diff_apply(&pre, &ev->diff, &full, err) == 0)) {
                bson_init(&full);
            }
        }
        if (!full_found && ch->full_document == MF_CL_FULL_REQUIRED) {
            char what[512];
            describe(ev, ts, entry, what, sizeof what);
            rc = mf_error_set(err, MF_NoMatchingDocument,
                              "Change stream was configured to require a post-image for all "
                              "update events, but the post-image was not found for event: %s",
                              what);
        }
    }
    if (rc == 0 && has_pre && !pre_found && ch->before_change == MF_CL_BEFORE_REQUIRED) {
        char what[512];
        describe(ev, ts, entry, what, sizeof what);
        rc = mf_error_set(err, MF_NoMatchingDocument,
                          "Change stream was configured to require a pre-image for all update, "
                          "delete and replace events, but the pre-image was not found for "
                          "event: %s",
                          what);
    }
    if (rc) {
        bson_destroy(&pre);
        bson_destroy(&full);
        return rc;
    }

    bson_init(out);
    /* a transaction's operations name it (a retryable write's do not) */
    if (ch->in_apply) {
        if (bson_iter_init_find(&it, entry, "txnNumber"))
            mf_bsonx_append_iter(out, "txnNumber", -1, &it);
        if (bson_iter_init_find(&it, entry, "lsid"))
            mf_bsonx_append_iter(out, "lsid", -1, &it);
    }
    append_token(out, "_id", token, token_len);
    BSON_APPEND_UTF8(out, "operationType", ev->type);
    BSON_APPEND_TIMESTAMP(out, "clusterTime", ts.secs, ts.inc);
    if (ch->expanded && ev->has_uuid && strcmp(ev->type, "dropDatabase") != 0)
        bson_append_binary(out, "collectionUUID", 14, BSON_SUBTYPE_UUID, ev->uuid, 16);
    BSON_APPEND_DATE_TIME(out, "wallTime", wall);
    if (ev->full)
        BSON_APPEND_DOCUMENT(out, "fullDocument", ev->full);
    else if (is_update && ch->full_document != MF_CL_FULL_DEFAULT) {
        if (full_found)
            BSON_APPEND_DOCUMENT(out, "fullDocument", &full);
        else
            BSON_APPEND_NULL(out, "fullDocument");
    }
    append_ns(out, "ns", ev->db, ev->coll);
    if (ev->to_coll)
        append_ns(out, "to", ev->to_db, ev->to_coll);
    if (ev->has_key)
        BSON_APPEND_DOCUMENT(out, "documentKey", &ev->key);
    if (ch->expanded && !ev->has_key && strcmp(ev->type, "drop") != 0 &&
        strcmp(ev->type, "dropDatabase") != 0)
        BSON_APPEND_DOCUMENT(out, "operationDescription", &ev->desc);
    if (is_update && ev->has_diff) {
        bson_t ud;
        BSON_APPEND_DOCUMENT_BEGIN(out, "updateDescription", &ud);
        if (bson_empty(&ev->diff)) { /* an update that changed nothing */
            bson_t x;
            BSON_APPEND_DOCUMENT_BEGIN(&ud, "updatedFields", &x);
            bson_append_document_end(&ud, &x);
            BSON_APPEND_ARRAY_BEGIN(&ud, "removedFields", &x);
            bson_append_array_end(&ud, &x);
            BSON_APPEND_ARRAY_BEGIN(&ud, "truncatedArrays", &x);
            bson_append_array_end(&ud, &x);
            if (ch->expanded) {
                BSON_APPEND_DOCUMENT_BEGIN(&ud, "disambiguatedPaths", &x);
                bson_append_document_end(&ud, &x);
            }
        } else {
            rc = mf_cl_diff_describe(&ev->diff, ch->expanded, &ud, err);
        }
        bson_append_document_end(out, &ud);
    }
    if (ev->has_before)
        BSON_APPEND_DOCUMENT(out, "stateBeforeChange", &ev->before);
    if (has_pre && ch->before_change != MF_CL_BEFORE_OFF) {
        if (pre_found)
            BSON_APPEND_DOCUMENT(out, "fullDocumentBeforeChange", &pre);
        else
            BSON_APPEND_NULL(out, "fullDocumentBeforeChange");
    }
    bson_destroy(&pre);
    bson_destroy(&full);
    if (rc)
        bson_destroy(out);
    return rc;
}

/* ------------------------------------------------------------ reading */

/* The next entry into ch->entry, reading a chunk when none is left;
 * false when the oplog has nothing more. */
static int next_entry(mf_cl_changes *ch, bool *got, mf_error *err)
{
    *got = false;
    if (ch->at == ch->nchunk) {
        mf_cl_optime oldest;
        mf_lsn lsn;
        ch->nchunk = ch->at = 0;
        int rc = mf_cl_oplog_read(ch->db->oplog, ch->next, CHUNK, ch->chunk, &ch->nchunk, &oldest,
                                  &lsn, err);
        if (rc)
            return rc;
        if (ch->nchunk == 0)
            return 0;
        /* an oplog trimmed past where the stream stands */
        if (optime_lt(ch->next, oldest))
            return mf_error_set(err, MF_ChangeStreamHistoryLost,
                                "Resume of change stream was not possible, as the resume point "
                                "may no longer be in the oplog.");
        if (lsn > ch->lsn)
            ch->lsn = lsn;
    }
    ch->entry = ch->chunk[ch->at++];
    *got = true;
    bson_iter_t it, o;
    /* a transaction's (or a batch's) operations, one event each */
    ch->in_apply = bson_iter_init_find(&it, ch->entry, "op") && BSON_ITER_HOLDS_UTF8(&it) &&
                   strcmp(bson_iter_utf8(&it, NULL), "c") == 0 &&
                   bson_iter_init_find(&it, ch->entry, "o") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
                   bson_iter_recurse(&it, &o) && bson_iter_find(&o, "applyOps") &&
                   BSON_ITER_HOLDS_ARRAY(&o) && bson_iter_recurse(&o, &ch->ops);
    ch->single_done = false;
    ch->op_index = 0;
    return 0;
}

/* The current entry's ts. */
static mf_cl_optime entry_ts(const bson_t *entry)
{
    bson_iter_t it;
    mf_cl_optime t = {0, 0};
    if (bson_iter_init_find(&it, entry, "ts") && BSON_ITER_HOLDS_TIMESTAMP(&it))
        bson_iter_timestamp(&it, &t.secs, &t.inc);
    return t;
}

static void entry_done(mf_cl_changes *ch)
{
    mf_cl_optime t = entry_ts(ch->entry);
    if (!optime_lt(optime_after(t), ch->next))
        ch->next = optime_after(t);
    bson_destroy(ch->entry);
    ch->entry = NULL;
}

static int token_not_found(mf_cl_changes *ch, mf_error *err)
{
    (void)ch;
    return mf_error_set(err, MF_ChangeStreamFatalError,
                        "cannot resume stream; the resume token was not found.");
}

/* After invalidating event `ev`: its invalidate comes next, with its
 * token marked fromInvalidate, and then nothing. */
static int invalidate_after(mf_cl_changes *ch, const op_event *ev, mf_cl_optime ts,
                            int64_t index, mf_error *err)
{
    bson_t ident;
    bson_iter_t w;
    identity(ev, &ident);
    int rc = token_bytes(&ch->inval_token, ts, index, true, ev->has_uuid ? ev->uuid : NULL,
                         &ident) == 0
                 ? 0
                 : mf_error_oom(err);
    bson_destroy(&ident);
    ch->inval_ts = ts;
    ch->inval_wall = bson_iter_init_find(&w, ch->entry, "wall") && BSON_ITER_HOLDS_DATE_TIME(&w)
                         ? bson_iter_date_time(&w)
                         : 0;
    ch->invalidate_next = rc == 0;
    return rc;
}

int mf_cl_changes_next(mf_cl_changes *ch, bson_t *out, bool *none, mf_error *err)
{
    int rc = 0;
    *none = false;
    if (ch->invalidate_next) {
        /* {_id: the invalidating event's token marked fromInvalidate,
         * operationType, clusterTime, wallTime} */
        bson_init(out);
        append_token(out, "_id", ch->inval_token.data, ch->inval_token.len);
        BSON_APPEND_UTF8(out, "operationType", "invalidate");
        BSON_APPEND_TIMESTAMP(out, "clusterTime", ch->inval_ts.secs, ch->inval_ts.inc);
        BSON_APPEND_DATE_TIME(out, "wallTime", ch->inval_wall);
        ch->invalidate_next = false;
        ch->done = true;
        return 0;
    }
    mf_buf tok = {0};
    for (;;) {
        if (ch->done) {
            *none = true;
            break;
        }
        if (!ch->entry) {
            bool got;
            if ((rc = next_entry(ch, &got, err)) != 0)
                break;
            if (!got) {
                /* everything read: a resume token never met is not there */
                if (ch->skipping && optime_lt(ch->skip.ts, ch->next))
                    rc = token_not_found(ch, err);
                *none = true;
                break;
            }
        }
        mf_cl_optime ts = entry_ts(ch->entry);
        if (ch->skipping && optime_lt(ch->skip.ts, ts)) {
            rc = token_not_found(ch, err);
            break;
        }
        /* the entry's next operation */
        bson_t op;
        int64_t index = ch->op_index;
        if (ch->in_apply) {
            if (!bson_iter_next(&ch->ops)) {
                entry_done(ch);
                continue;
            }
            ch->op_index++;
            if (!mf_bsonx_doc_view(&ch->ops, &op))
                continue;
        } else {
            if (ch->single_done) {
                entry_done(ch);
                continue;
            }
            ch->single_done = true;
            bson_init_static(&op, bson_get_data(ch->entry), ch->entry->len);
        }
        op_event ev;
        read_op(ch, &op, &ev);
        if (!ev.type) {
            event_clear(&ev);
            continue;
        }
        bson_t ident;
        identity(&ev, &ident);
        rc = token_bytes(&tok, ts, index, false, ev.has_uuid ? ev.uuid : NULL, &ident) == 0
                 ? 0
                 : mf_error_oom(err);
        bson_destroy(&ident);
        if (rc) {
            event_clear(&ev);
            break;
        }
        if (ch->skipping) {
            /* at the token's ts: up to its event, which must be met */
            int cmp = index < ch->skip.txn_op_index ? -1 : index > ch->skip.txn_op_index;
            bool same = cmp == 0 && tok.len == ch->skip.len &&
                        /* the token may name the invalidate of this event */
                        memcmp(tok.data, ch->skip.data, tok.len) == 0;
            if (cmp == 0 && !same && ch->skip.from_invalidate && tok.len == ch->skip.len) {
                /* the same event's token but for fromInvalidate */
                mf_buf inv = {0};
                bson_t id2;
                identity(&ev, &id2);
                same = token_bytes(&inv, ts, index, true, ev.has_uuid ? ev.uuid : NULL, &id2) ==
                           0 &&
                       inv.len == ch->skip.len && memcmp(inv.data, ch->skip.data, inv.len) == 0;
                bson_destroy(&id2);
                mf_buf_free(&inv);
            }
            if (cmp > 0 || (cmp == 0 && !same)) {
                event_clear(&ev);
                rc = token_not_found(ch, err);
                break;
            }
            if (cmp == 0) {
                /* met: what follows is the stream's -- after an
                 * invalidating event, its invalidate (unless the token
                 * was the invalidate's: startAfter) */
                ch->skipping = false;
                if (ev.invalidates && !ch->skip.from_invalidate &&
                    (rc = invalidate_after(ch, &ev, ts, index, err)) == 0) {
                    event_clear(&ev);
                    mf_buf_free(&tok);
                    return mf_cl_changes_next(ch, out, none, err);
                }
            }
            event_clear(&ev);
            if (rc)
                break;
            continue;
        }
        rc = build_event(ch, &ev, ch->entry, ts, index, tok.data, tok.len, out, err);
        if (rc == 0 && ev.invalidates && (rc = invalidate_after(ch, &ev, ts, index, err)) != 0)
            bson_destroy(out);
        event_clear(&ev);
        break;
    }
    mf_buf_free(&tok);
    return rc;
}

/* ------------------------------------------------------------ expiry */

int mf_cl_preimages_expire(mf_cl_db *db, int64_t expire_before_ms, uint64_t *deleted,
                           mf_error *err)
{
    mf_engine *e = db->engine;
    mf_cl_optime oldest = {0, 0};
    int rc = 0;
    *deleted = 0;
    if (db->oplog) {
        bson_t *none[1];
        size_t n;
        mf_lsn lsn;
        if ((rc = mf_cl_oplog_read(db->oplog, oldest, 0, none, &n, &oldest, &lsn, err)) != 0)
            return rc;
    }
    for (;;) {
        /* a batch of expired records' ids, then their deletes */
        uint64_t rids[256];
        size_t nr = 0;
        mf_lsn lsn = 0;
        mf_engine_catalog_lock(e, false);
        mf_coll *c = mf_engine_coll(e, PREIMAGES_NS);
        if (!c) {
            mf_engine_catalog_unlock(e);
            return 0;
        }
        mf_coll_lock(c, true);
        mf_cl_indexes ix = {0};
        mf_cursor cur;
        bool valid;
        rc = mf_cl_indexes_load(c, &ix, err);
        mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
        if (rc == 0)
            rc = mf_cursor_first(&cur, &valid, err);
        while (rc == 0 && valid && nr < 256) {
            const uint8_t *k, *v;
            size_t kl, vl;
            bson_t doc;
            bson_iter_t it, id;
            mf_cursor_key(&cur, &k, &kl);
            mf_cursor_value(&cur, &v, &vl);
            bool expired = false;
            if (bson_init_static(&doc, v, vl)) {
                mf_cl_optime ts = {0, 0};
                if (bson_iter_init_find(&it, &doc, "_id") && bson_iter_recurse(&it, &id) &&
                    bson_iter_find(&id, "ts") && BSON_ITER_HOLDS_TIMESTAMP(&id))
                    bson_iter_timestamp(&id, &ts.secs, &ts.inc);
                expired = optime_lt(ts, oldest);
                if (!expired && expire_before_ms > 0 &&
                    bson_iter_init_find(&it, &doc, "operationTime") &&
                    BSON_ITER_HOLDS_DATE_TIME(&it))
                    expired = bson_iter_date_time(&it) < expire_before_ms;
            }
            if (expired)
                rids[nr++] = mf_record_id_decode(k);
            rc = mf_cursor_next(&cur, &valid, err);
        }
        for (size_t i = 0; rc == 0 && i < nr; i++) {
            uint8_t key[8];
            bson_t old;
            bool found;
            mf_record_id_encode(rids[i], key);
            if ((rc = mf_cl_record_doc(e, c, key, &old, &found, err)) != 0 || !found)
                continue;
            bson_t *copy = bson_copy(&old);
            rc = mf_cl_write_doc(e, c, &ix, rids[i], copy, NULL, &lsn, NULL, err);
            bson_destroy(copy);
            if (rc == 0)
                (*deleted)++;
        }
        mf_cl_indexes_free(&ix);
        mf_coll_unlock(c);
        mf_engine_catalog_unlock(e);
        if (rc == 0 && lsn)
            rc = mf_engine_sync(e, lsn, err);
        if (rc != 0 || nr < 256)
            return rc;
    }
}
