/*
 * sessions.c -- the logical-session registry: mongod's LogicalSessionCache
 * on a standalone, kept in memory only.
 *
 * Every command that carries `lsid` ({id: UUID, uid?: 32-byte digest})
 * records the session here, or refreshes its lastUse, before its handler
 * runs (mf_command_run calls mfi_session_use).  A session is known by the
 * pair (id, uid): uid is the SHA-256 digest of the user who owns it.  A
 * session a client names without uid belongs to the user the connection
 * is authenticated as, or to the unauthenticated user, whose digest
 * mongod defines as the SHA-256 of the empty string (e3b0c442...).  A
 * client may name another uid only if it holds `impersonate` (without
 * access control, everyone does).
 *
 * The registry is a chained hash table under its own mutex.  A session idle
 * longer than localLogicalSessionTimeoutMinutes is gone: it is dropped when
 * a listing or a sweep meets it (a sweep runs each time the table has grown
 * by a quarter since the last one), so an idle session costs memory until
 * then but is never reported.  At most MAX_SESSIONS live at once
 * (mongod's maxSessions); one more is TooManyLogicalSessions (261).
 *
 * Who uses it: startSession, refreshSessions (here), endSessions and
 * killAllSessions (cmd_admin.c), and $listLocalSessions through the
 * aggregation environment's list_sessions (mfi_sessions_list).
 */
#include "command_int.h"
#include "authz_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SESSIONS 1000000 /* mongod's maxSessions default */
#define MIN_BUCKETS 64

/* ---------------------------------------------------------------- SHA-256 */

/* FIPS 180-4 SHA-256, enough for the short user names a uid digests. */
static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25);
        uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
        uint32_t t1 = v[7] + s1 + ch + sha_k[i] + w[i];
        uint32_t s0 = ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22);
        uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        memmove(&v[1], &v[0], 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + s0 + maj;
    }
    for (int i = 0; i < 8; i++)
        h[i] += v[i];
}

void mfi_sha256(const void *data, size_t len, uint8_t out[32])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t left = len;
    for (; left >= 64; p += 64, left -= 64)
        sha_block(h, p);
    uint8_t tail[128] = {0};
    memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t n = left < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[n - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha_block(h, tail);
    if (n == 128)
        sha_block(h, tail + 64);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

void mfi_session_user_digest(const char *user, const char *db, uint8_t out[32])
{
    /* mongod's getLogicalSessionUserDigestFor: the unauthenticated user's
     * digest for ("", ""), else SHA-256 of "user@db" (a user name always
     * has the '@', so the two cannot collide). */
    if (!*user && !*db) {
        mfi_sha256("", 0, out);
        return;
    }
    size_t lu = strlen(user), ld = strlen(db);
    char *s = malloc(lu + ld + 2);
    if (!s) { /* digest nothing rather than crash: matches no one */
        memset(out, 0xff, 32);
        return;
    }
    memcpy(s, user, lu);
    s[lu] = '@';
    memcpy(s + lu + 1, db, ld);
    mfi_sha256(s, lu + ld + 1, out);
    free(s);
}

/* --------------------------------------------------------------- registry */

typedef struct entry {
    uint8_t id[16];
    uint8_t uid[32];
    int64_t last_use_ms; /* wall clock */
    bool dirty;          /* used since the last refresh of config.system.sessions */
    struct entry *next;
} entry;

struct mfi_sessions {
    pthread_mutex_t mu;
    entry **buckets;
    size_t nbuckets; /* a power of two */
    size_t n;
    size_t n_at_sweep; /* n after the last sweep */
    int64_t timeout_ms;
    mfi_session_key *ended; /* ended since the last refresh (their records go) */
    size_t nended, capended;
};

static size_t bucket_of(const mfi_sessions *s, const uint8_t id[16])
{
    uint64_t h;
    memcpy(&h, id, sizeof h); /* a UUID's bytes are random enough */
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return (size_t)h & (s->nbuckets - 1);
}

int mfi_sessions_open(mf_instance *inst, mf_error *err)
{
    mfi_sessions *s = calloc(1, sizeof *s);
    if (s)
        s->buckets = calloc(MIN_BUCKETS, sizeof *s->buckets);
    if (!s || !s->buckets) {
        free(s);
        return mf_error_oom(err);
    }
    s->nbuckets = MIN_BUCKETS;
    s->timeout_ms = (int64_t)MF_SESSION_TIMEOUT_MINUTES * 60 * 1000;
    pthread_mutex_init(&s->mu, NULL);
    inst->sessions = s;
    return 0;
}

void mfi_sessions_close(mf_instance *inst)
{
    mfi_sessions *s = inst->sessions;
    if (!s)
        return;
    for (size_t b = 0; b < s->nbuckets; b++) {
        for (entry *e = s->buckets[b], *nx; e; e = nx) {
            nx = e->next;
            free(e);
        }
    }
    free(s->buckets);
    free(s->ended);
    pthread_mutex_destroy(&s->mu);
    free(s);
    inst->sessions = NULL;
}

void mfi_sessions_set_timeout_ms(mf_instance *inst, int64_t ms)
{
    pthread_mutex_lock(&inst->sessions->mu);
    inst->sessions->timeout_ms = ms;
    pthread_mutex_unlock(&inst->sessions->mu);
}

/* Unlink every entry matching `keep` == false; mutex held. */
typedef bool (*keep_fn)(const entry *e, const void *arg);

static size_t remove_where(mfi_sessions *s, keep_fn keep, const void *arg)
{
    size_t removed = 0;
    for (size_t b = 0; b < s->nbuckets; b++) {
        entry **pp = &s->buckets[b];
        while (*pp) {
            entry *e = *pp;
            if (keep(e, arg)) {
                pp = &e->next;
                continue;
            }
            *pp = e->next;
            free(e);
            removed++;
        }
    }
    s->n -= removed;
    return removed;
}

static bool is_live(const entry *e, const void *arg)
{
    return e->last_use_ms >= *(const int64_t *)arg;
}

/* Drop sessions idle past the timeout; mutex held. */
static void sweep(mfi_sessions *s, int64_t now_ms)
{
    int64_t oldest = now_ms - s->timeout_ms;
    remove_where(s, is_live, &oldest);
    s->n_at_sweep = s->n;
}

/* Double the buckets when the chains average more than two; mutex held.
 * Failing to grow only makes chains longer. */
static void maybe_grow(mfi_sessions *s)
{
    if (s->n <= 2 * s->nbuckets)
        return;
    size_t nb = s->nbuckets * 2;
    entry **v = calloc(nb, sizeof *v);
    if (!v)
        return;
    entry **old = s->buckets;
    size_t oldn = s->nbuckets;
    s->buckets = v;
    s->nbuckets = nb;
    for (size_t b = 0; b < oldn; b++) {
        for (entry *e = old[b], *nx; e; e = nx) {
            nx = e->next;
            size_t i = bucket_of(s, e->id);
            e->next = v[i];
            v[i] = e;
        }
    }
    free(old);
}

int mfi_sessions_touch(mf_instance *inst, const uint8_t id[16], const uint8_t uid[32],
                       int64_t now_ms, mf_error *err)
{
    mfi_sessions *s = inst->sessions;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    size_t b = bucket_of(s, id);
    for (entry *e = s->buckets[b]; e; e = e->next) {
        if (memcmp(e->id, id, 16) == 0 && memcmp(e->uid, uid, 32) == 0) {
            if (now_ms > e->last_use_ms)
                e->last_use_ms = now_ms;
            e->dirty = true;
            goto out;
        }
    }
    if (s->n >= s->n_at_sweep + s->n_at_sweep / 4 + MIN_BUCKETS || s->n >= MAX_SESSIONS) {
        sweep(s, now_ms);
        b = bucket_of(s, id);
    }
    if (s->n >= MAX_SESSIONS) {
        rc = mf_error_set(err, MF_TooManyLogicalSessions,
                          "Unable to add session into the cache because the number of active "
                          "sessions is too high");
        goto out;
    }
    entry *e = malloc(sizeof *e);
    if (!e) {
        rc = mf_error_oom(err);
        goto out;
    }
    memcpy(e->id, id, 16);
    memcpy(e->uid, uid, 32);
    e->last_use_ms = now_ms;
    e->dirty = true;
    e->next = s->buckets[b];
    s->buckets[b] = e;
    s->n++;
    maybe_grow(s);
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

typedef struct {
    const uint8_t *id, *uid;
} pair_arg;

static bool not_pair(const entry *e, const void *arg)
{
    const pair_arg *p = arg;
    return memcmp(e->id, p->id, 16) != 0 || memcmp(e->uid, p->uid, 32) != 0;
}

void mfi_sessions_end(mf_instance *inst, const uint8_t id[16], const uint8_t uid[32])
{
    mfi_sessions *s = inst->sessions;
    pair_arg p = {id, uid};
    pthread_mutex_lock(&s->mu);
    entry **pp = &s->buckets[bucket_of(s, id)];
    while (*pp) {
        entry *e = *pp;
        if (!not_pair(e, &p)) {
            *pp = e->next;
            free(e);
            s->n--;
            break;
        }
        pp = &e->next;
    }
    /* its record goes at the next refresh (a full list only loses that) */
    if (s->nended == s->capended) {
        size_t cap = s->capended ? 2 * s->capended : 16;
        mfi_session_key *v = realloc(s->ended, cap * sizeof *v);
        if (v) {
            s->ended = v;
            s->capended = cap;
        }
    }
    if (s->nended < s->capended) {
        memcpy(s->ended[s->nended].key, id, 16);
        memcpy(s->ended[s->nended].key + 16, uid, 32);
        s->nended++;
    }
    pthread_mutex_unlock(&s->mu);
}

int mfi_sessions_take_changes(mf_instance *inst, mfi_session_key **active, size_t *nactive,
                              mfi_session_key **ended, size_t *nended, mf_error *err)
{
    mfi_sessions *s = inst->sessions;
    pthread_mutex_lock(&s->mu);
    sweep(s, mf_clock_wall_ms());
    size_t n = 0;
    *active = s->n ? malloc(s->n * sizeof **active) : NULL;
    if (s->n && !*active) {
        pthread_mutex_unlock(&s->mu);
        return mf_error_oom(err);
    }
    for (size_t b = 0; b < s->nbuckets; b++)
        for (entry *e = s->buckets[b]; e; e = e->next)
            if (e->dirty) {
                memcpy((*active)[n].key, e->id, 16);
                memcpy((*active)[n].key + 16, e->uid, 32);
                n++;
                e->dirty = false;
            }
    *nactive = n;
    *ended = s->ended;
    *nended = s->nended;
    s->ended = NULL;
    s->nended = s->capended = 0;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

typedef struct {
    const uint8_t (*uids)[32];
    size_t nuids;
} uid_set;

static bool uid_in(const uid_set *u, const uint8_t uid[32])
{
    for (size_t i = 0; i < u->nuids; i++)
        if (memcmp(u->uids[i], uid, 32) == 0)
            return true;
    return false;
}

static bool not_owned(const entry *e, const void *arg)
{
    return !uid_in(arg, e->uid);
}

static bool keep_none(const entry *e, const void *arg)
{
    (void)e, (void)arg;
    return false;
}

void mfi_sessions_kill(mf_instance *inst, const uint8_t (*uids)[32], size_t nuids, bool all)
{
    mfi_sessions *s = inst->sessions;
    uid_set u = {uids, nuids};
    pthread_mutex_lock(&s->mu);
    if (all)
        remove_where(s, keep_none, NULL);
    else
        remove_where(s, not_owned, &u);
    pthread_mutex_unlock(&s->mu);
}

size_t mfi_sessions_count(mf_instance *inst, int64_t now_ms)
{
    mfi_sessions *s = inst->sessions;
    pthread_mutex_lock(&s->mu);
    sweep(s, now_ms);
    size_t n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* One $listLocalSessions document: mongod's LogicalSessionRecord
 * {_id: {id, uid}, lastUse} (no `user`: no one is authenticated). */
static void append_record(bson_t *arr, uint32_t i, const entry *e)
{
    char key[16];
    const char *k;
    bson_t doc, id;
    mf_uint32_to_key(i, &k, key, sizeof key);
    bson_append_document_begin(arr, k, -1, &doc);
    BSON_APPEND_DOCUMENT_BEGIN(&doc, "_id", &id);
    BSON_APPEND_BINARY(&id, "id", BSON_SUBTYPE_UUID, e->id, 16);
    BSON_APPEND_BINARY(&id, "uid", BSON_SUBTYPE_BINARY, e->uid, 32);
    bson_append_document_end(&doc, &id);
    BSON_APPEND_DATE_TIME(&doc, "lastUse", e->last_use_ms);
    bson_append_document_end(arr, &doc);
}

/* The environment's list_sessions (pipeline.h): the sessions of the users
 * asked for, most recently used first. */
static int cmp_last_use(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    return x->last_use_ms < y->last_use_ms ? 1 : x->last_use_ms > y->last_use_ms ? -1 : 0;
}

/* The digest of the user running the command on this thread
 * (mfi_session_use sets it for every client command), for what
 * $listLocalSessions shows of "the caller's" sessions. */
static _Thread_local uint8_t running_uid[32];

int mfi_sessions_list(void *arg, const mf_agg_sessions_query *q, bson_t *out, mf_error *err)
{
    mf_instance *inst = arg;
    mfi_sessions *s = inst->sessions;
    size_t nu = q->all_users ? 0 : q->nusers ? q->nusers : 1;
    uint8_t (*uids)[32] = nu ? calloc(nu, 32) : NULL;
    if (nu && !uids)
        return mf_error_oom(err);
    if (!q->all_users && q->nusers == 0)
        memcpy(uids[0], running_uid, 32); /* the caller's */
    for (size_t i = 0; i < q->nusers && !q->all_users; i++)
        mfi_session_user_digest(q->users[i], q->dbs[i], uids[i]);
    uid_set u = {(const uint8_t (*)[32])uids, nu};

    int rc = 0;
    pthread_mutex_lock(&s->mu);
    sweep(s, mf_clock_wall_ms());
    entry **v = s->n ? malloc(s->n * sizeof *v) : NULL;
    size_t n = 0;
    if (s->n && !v) {
        rc = mf_error_oom(err);
    } else {
        for (size_t b = 0; b < s->nbuckets; b++)
            for (entry *e = s->buckets[b]; e; e = e->next)
                if (q->all_users || uid_in(&u, e->uid))
                    v[n++] = e;
        qsort(v, n, sizeof *v, cmp_last_use);
        for (size_t i = 0; i < n; i++)
            append_record(out, (uint32_t)i, v[i]);
    }
    pthread_mutex_unlock(&s->mu);
    free(v);
    free(uids);
    return rc;
}

/* ------------------------------------------------------- parsing sessions */

static const char *bindata_type_name(bson_subtype_t t)
{
    switch ((int)t) {
    case 0: return "general";
    case 1: return "function";
    case 2: return "byte(deprecated)";
    case 3: return "UUID(deprecated)";
    case 4: return "UUID";
    case 5: return "MD5";
    case 6: return "encrypt";
    case 7: return "column";
    case 8: return "sensitive";
    case 9: return "vector";
    default: return "user";
    }
}

/* One binData field of subtype `want`, as IDL checks it. */
static int bindata_field(const bson_iter_t *f, const char *path, bson_subtype_t want,
                         const char *want_name, bson_subtype_t *sub, uint32_t *len,
                         const uint8_t **data, mf_error *err)
{
    if (!BSON_ITER_HOLDS_BINARY(f))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '%s' is the wrong type '%s', expected type 'binData'", path,
                            mf_bsonx_type_alias(bson_iter_type(f)));
    bson_iter_binary(f, sub, len, data);
    if (*sub != want)
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '%s' is the wrong binData type '%s', expected type '%s'",
                            path, bindata_type_name(*sub), want_name);
    return 0;
}

/* The digest of the user the connection is authenticated as (mongod's
 * getLogicalSessionUserDigestForLoggedInUser). */
static void caller_digest(mf_cmd_ctx *ctx, uint8_t out[32])
{
    const char *user, *db;
    if (mfi_auth_user(ctx, &user, &db))
        mfi_session_user_digest(user, db, out);
    else
        mfi_session_user_digest("", "", out);
}

int mfi_session_from_client(mf_cmd_ctx *ctx, const bson_iter_t *it, const char *path,
                            uint8_t id[16], uint8_t uid[32], mf_error *err)
{
    bson_iter_t f;
    bool has_id = false, has_uid = false;
    char field[160];
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '%s' is the wrong type '%s', expected type 'object'", path,
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        bson_subtype_t sub;
        uint32_t len;
        const uint8_t *data;
        int rc;
        snprintf(field, sizeof field, "%s.%s", path, k);
        bool is_id = strcmp(k, "id") == 0, is_uid = strcmp(k, "uid") == 0;
        if ((is_id && has_id) || (is_uid && has_uid))
            return mf_error_set(err, 40413, "BSON field '%s' is a duplicate field", field);
        if (is_id) {
            if ((rc = bindata_field(&f, field, BSON_SUBTYPE_UUID, "UUID", &sub, &len, &data,
                                    err)) != 0)
                return rc;
            if (len != 16)
                return mf_error_set(err, MF_InvalidUUID,
                                    "uuid must be a 16-byte binary field with UUID (4) subtype");
            memcpy(id, data, 16);
            has_id = true;
        } else if (is_uid) {
            if ((rc = bindata_field(&f, field, BSON_SUBTYPE_BINARY, "general", &sub, &len, &data,
                                    err)) != 0)
                return rc;
            if (len != 32)
                return mf_error_set(err, MF_UnsupportedFormat,
                                    "Unsupported SHA256Block hash length: %u", len);
            memcpy(uid, data, 32);
            has_uid = true;
        } else if (strcmp(k, "txnNumber") == 0 || strcmp(k, "txnUUID") == 0) {
            /* internal sessions, which only other mongod nodes create */
            return mf_error_set(err, MF_NotImplemented,
                                "internal sessions (lsid.%s) are not supported", k);
        } else {
            return mf_error_set(err, 40415, "BSON field '%s' is an unknown field.", field);
        }
    }
    if (!has_id)
        return mf_error_set(err, 40414, "BSON field '%s.id' is missing but a required field",
                            path);
    uint8_t mine[32];
    caller_digest(ctx, mine);
    if (!has_uid)
        memcpy(uid, mine, 32);
    else if (memcmp(uid, mine, 32) != 0 &&
             !mfi_authz_may_action(ctx, MFA_impersonate, NULL, NULL))
        return mf_error_set(err, MF_Unauthorized,
                            "Unauthorized to set user digest in LogicalSessionId");
    return 0;
}

/* One field of OperationSessionInfo as its IDL parses it: of type `want`
 * (strict, as IDL's bool, long and int are), and not given twice. */
static int osi_field(const bson_iter_t *it, bool *seen, bson_type_t want, const char *want_name,
                     mf_error *err)
{
    const char *k = bson_iter_key(it);
    if (*seen)
        return mf_error_set(err, 40413, "BSON field 'OperationSessionInfo.%s' is a duplicate field",
                            k);
    *seen = true;
    if (bson_iter_type(it) != want)
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field 'OperationSessionInfo.%s' is the wrong type '%s', "
                            "expected type '%s'",
                            k, mf_bsonx_type_alias(bson_iter_type(it)), want_name);
    return 0;
}

int mfi_session_use(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd, mf_error *err)
{
    bson_iter_t it;
    uint8_t id[16], uid[32];
    bool has_lsid = false, has_txn = false, has_auto = false, has_start = false,
         has_retry = false, autocommit = false, start = false;
    int64_t txn_number = 0;
    int rc;

    caller_digest(ctx, running_uid);
    /* The IDL parse: each field's type, in the command's order. */
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "lsid") == 0) {
            if (has_lsid)
                return mf_error_set(err, 40413,
                                    "BSON field 'OperationSessionInfo.lsid' is a duplicate field");
            has_lsid = true;
            rc = mfi_session_from_client(ctx, &it, "OperationSessionInfo.lsid", id, uid, err);
        } else if (strcmp(k, "txnNumber") == 0) {
            rc = osi_field(&it, &has_txn, BSON_TYPE_INT64, "long", err);
            if (rc == 0)
                txn_number = bson_iter_int64(&it);
        } else if (strcmp(k, "autocommit") == 0) {
            rc = osi_field(&it, &has_auto, BSON_TYPE_BOOL, "bool", err);
            if (rc == 0)
                autocommit = bson_iter_bool(&it);
        } else if (strcmp(k, "startTransaction") == 0) {
            rc = osi_field(&it, &has_start, BSON_TYPE_BOOL, "bool", err);
            if (rc == 0)
                start = bson_iter_bool(&it);
        } else if (strcmp(k, "txnRetryCounter") == 0) {
            rc = osi_field(&it, &has_retry, BSON_TYPE_INT32, "int", err);
        } else {
            continue;
        }
        if (rc)
            return rc;
    }

    /* A command that needs no authentication (hello, ping, ...) takes no
     * transaction. */
    if (def->flags & MF_CMD_NO_AUTH) {
        if (has_auto)
            return mf_error_set(err, MF_OperationNotSupportedInTransaction,
                                "This command is not supported in transactions");
        if (has_txn)
            return mf_error_set(err, 50889,
                                "It is illegal to provide a txnNumber for this command");
    }
    /* hello and isMaster use no session. */
    if (has_lsid && !(def->flags & MF_CMD_HELLO) &&
        (rc = mfi_sessions_touch(ctx->inst, id, uid, mf_clock_wall_ms(), err)) != 0)
        return rc;
    if (has_txn) {
        if (!has_lsid)
            return mf_error_set(err, MF_InvalidOptions,
                                "Transaction number requires a session ID to also be specified");
        /* A standalone has no transactions and no retryable writes: the
         * command is refused before it does anything, so a write meant
         * for a transaction is never applied outside one. */
        if (!ctx->inst->repl)
            return mf_error_set(err, MF_IllegalOperation,
                                "Transaction numbers are only allowed on a replica set member "
                                "or mongos");
        if (txn_number < 0)
            return mf_error_set(err, MF_BadValue, "TxnNumber cannot be negative");
        /* A replica set runs transactions (txn.c) and retryable writes
         * (retry.c). */
        if (has_auto)
            return mfi_txn_begin(ctx, def, cmd, id, uid, txn_number, autocommit, has_start, start,
                                 err);
        if (has_start)
            return mf_error_set(err, MF_InvalidOptions,
                                "'startTransaction' field requires 'autocommit' field to also "
                                "be specified");
        return mfi_retry_begin(ctx, def, cmd, id, uid, txn_number, &ctx->retry_buf, err);
    }
    if (has_auto)
        return mf_error_set(err, MF_InvalidOptions,
                            "'autocommit' field requires a transaction number to also be "
                            "specified");
    if (has_start)
        return mf_error_set(err, MF_InvalidOptions,
                            "'startTransaction' field requires 'autocommit' field to also be "
                            "specified");
    return 0;
}

/* ------------------------------------------------------------- commands */

/* startSession: a new session of the caller, {id: {id}, timeoutMinutes}. */
int mfi_cmd_start_session(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd;
    uint8_t id[16], uid[32];
    bson_oid_t a, b;
    /* a version 4 UUID from the OID generator's randomness is not good
     * enough (its counter is sequential): take it from the kernel */
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(id, 1, sizeof id, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof id) {
        bson_oid_init(&a, NULL);
        bson_oid_init(&b, NULL);
        memcpy(id, a.bytes, 12);
        memcpy(id + 12, b.bytes + 8, 4);
    }
    id[6] = (uint8_t)((id[6] & 0x0f) | 0x40);
    id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
    caller_digest(ctx, uid);
    int rc = mfi_sessions_touch(ctx->inst, id, uid, mf_clock_wall_ms(), err);
    if (rc)
        return rc;
    bson_t d;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "id", &d);
    BSON_APPEND_BINARY(&d, "id", BSON_SUBTYPE_UUID, id, 16);
    bson_append_document_end(reply, &d);
    BSON_APPEND_INT32(reply, "timeoutMinutes", MF_SESSION_TIMEOUT_MINUTES);
    return 0;
}

/* The array of LogicalSessionFromClient that endSessions and
 * refreshSessions take; `fn` is applied to each after all are checked. */
static int each_session_arg(mf_cmd_ctx *ctx, const bson_t *cmd, const char *name,
                            int (*fn)(mf_instance *, const uint8_t *, const uint8_t *, int64_t,
                                      mf_error *),
                            mf_error *err)
{
    bson_iter_t it, el;
    char path[96];
    uint8_t id[16], uid[32];
    int rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mfi_type_error(err, name, name, &it, "array");
    snprintf(path, sizeof path, "%s.%sFromClient", name, name);
    bson_iter_recurse(&it, &el);
    while (bson_iter_next(&el)) {
        if ((rc = mfi_session_from_client(ctx, &el, path, id, uid, err)) != 0)
            return rc;
    }
    int64_t now = mf_clock_wall_ms();
    bson_iter_recurse(&it, &el);
    while (bson_iter_next(&el)) {
        mfi_session_from_client(ctx, &el, path, id, uid, err);
        if ((rc = fn(ctx->inst, id, uid, now, err)) != 0)
            return rc;
    }
    return 0;
}

static int end_one(mf_instance *inst, const uint8_t *id, const uint8_t *uid, int64_t now,
                   mf_error *err)
{
    (void)now, (void)err;
    mfi_sessions_end(inst, id, uid);
    mfi_txn_session_ended(inst, id, uid);
    return 0;
}

static int refresh_one(mf_instance *inst, const uint8_t *id, const uint8_t *uid, int64_t now,
                       mf_error *err)
{
    return mfi_sessions_touch(inst, id, uid, now, err);
}

int mfi_end_sessions(mf_cmd_ctx *ctx, const bson_t *cmd, mf_error *err)
{
    return each_session_arg(ctx, cmd, "endSessions", end_one, err);
}

int mfi_cmd_refresh_sessions(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    return each_session_arg(ctx, cmd, "refreshSessions", refresh_one, err);
}
