/*
 * stage_sessions.c -- $listLocalSessions: the sessions of this server's
 * registry, one document {_id: {id, uid}, lastUse} each.
 *
 * The spec is mongod's ListSessionsSpec: {} (the caller's own sessions),
 * {allUsers: true}, or {users: [{user, db}, ...]}.  The stage begins a
 * database pipeline ({aggregate: 1}); the sessions come from the
 * environment (pipeline.h: list_sessions), read on the first pull.
 */
#include "pipeline_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE "$listLocalSessions"

typedef struct {
    mfi_stage base;
    bool all_users;
    size_t nusers;
    char **users, **dbs; /* owned */
    bson_t docs;         /* the array from the environment */
    bson_iter_t it;
    bool loaded;
} sessions_stage;

static int sessions_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    sessions_stage *x = (sessions_stage *)s;
    mfi_agg *a = s->agg;
    *eof = true;
    if (!x->loaded) {
        x->loaded = true;
        mf_agg_sessions_query q = {x->all_users, x->nusers, (const char *const *)x->users,
                                   (const char *const *)x->dbs};
        int rc = a->env->list_sessions(a->env->arg, &q, &x->docs, err);
        if (rc)
            return rc;
        bson_iter_init(&x->it, &x->docs);
    }
    mfi_next_array_doc(&x->it, out, eof);
    return 0;
}

static void sessions_free(mfi_stage *s)
{
    sessions_stage *x = (sessions_stage *)s;
    for (size_t i = 0; i < x->nusers; i++) {
        free(x->users[i]);
        free(x->dbs[i]);
    }
    free(x->users);
    free(x->dbs);
    bson_destroy(&x->docs);
}

static const mfi_stage_ops sessions_ops = {STAGE, sessions_next, NULL, sessions_free};

static int wrong_type(mf_error *err, const char *path, const bson_iter_t *f, const char *want)
{
    return mf_error_set(err, MF_TypeMismatch,
                        "BSON field '%s' is the wrong type '%s', expected type '%s'", path,
                        mf_bsonx_type_alias(bson_iter_type(f)), want);
}

/* Check one ListSessionsUser {user, db} (strict); with `x`, copy it into
 * users[i], dbs[i]. */
static int parse_user(const bson_iter_t *el, sessions_stage *x, size_t i, mf_error *err)
{
    static const char *const path = STAGE ".users";
    const char *v[2] = {NULL, NULL}; /* user, db */
    bson_iter_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(el)) {
        char p[64];
        snprintf(p, sizeof p, "%s.%s", path, bson_iter_key(el));
        return wrong_type(err, p, el, "object");
    }
    bson_iter_recurse(el, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        int slot = strcmp(k, "user") == 0 ? 0 : strcmp(k, "db") == 0 ? 1 : -1;
        char p[160];
        snprintf(p, sizeof p, "%s.%s", path, k);
        if (slot < 0)
            return mf_error_set(err, 40415, "BSON field '%s' is an unknown field.", p);
        if (v[slot])
            return mf_error_set(err, 40413, "BSON field '%s' is a duplicate field", p);
        if (!BSON_ITER_HOLDS_UTF8(&f))
            return wrong_type(err, p, &f, "string");
        v[slot] = bson_iter_utf8(&f, NULL);
    }
    if (!v[0] || !v[1])
        return mf_error_set(err, 40414, "BSON field '%s.%s' is missing but a required field",
                            path, v[0] ? "db" : "user");
    if (x && (!(x->users[i] = bson_strdup(v[0])) || !(x->dbs[i] = bson_strdup(v[1]))))
        return mf_error_oom(err);
    return 0;
}

int mfi_parse_list_local_sessions(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                                  mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            STAGE " options must be specified in an object, but found: %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    /* mongod checks the spec as the command is parsed, before the stage
     * is built, so its errors come first. */
    bson_iter_t f, users;
    bool has_all = false, has_users = false, all_users = false;
    size_t nusers = 0;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        char p[128];
        snprintf(p, sizeof p, STAGE ".%s", k);
        if (strcmp(k, "allUsers") == 0) {
            if (has_all)
                return mf_error_set(err, 40413, "BSON field '%s' is a duplicate field", p);
            if (!BSON_ITER_HOLDS_BOOL(&f))
                return wrong_type(err, p, &f, "bool");
            all_users = bson_iter_bool(&f);
            has_all = true;
        } else if (strcmp(k, "users") == 0) {
            if (has_users)
                return mf_error_set(err, 40413, "BSON field '%s' is a duplicate field", p);
            if (!BSON_ITER_HOLDS_ARRAY(&f))
                return wrong_type(err, p, &f, "array");
            users = f;
            has_users = true;
            bson_iter_t el;
            bson_iter_recurse(&f, &el);
            for (; bson_iter_next(&el); nusers++) {
                int rc = parse_user(&el, NULL, nusers, err);
                if (rc)
                    return rc;
            }
        } else {
            /* $_internalPredicate is for mongos's $listSessions; not kept */
            return mf_error_set(err, 40415, "BSON field '%s' is an unknown field.", p);
        }
    }
    if (all_users && nusers > 0)
        return mf_error_set(err, MF_UnsupportedFormat,
                            STAGE " may not specify {allUsers:true} and {users:[...]} at the "
                            "same time");
    if (agg->coll)
        return mf_error_set(err, MF_InvalidNamespace,
                            STAGE " must be run against the database with {aggregate: 1}, not a "
                            "collection");
    if (!agg->env || !agg->env->list_sessions)
        return mf_error_set(err, 31111,
                            "The " STAGE " stage is not allowed in this context :: missing a "
                            "LogicalSessionCache");
    sessions_stage *x = mfi_stage_new(out, &sessions_ops, sizeof *x, it, agg, err);
    if (!x)
        return MF_InternalError;
    bson_init(&x->docs);
    x->all_users = all_users;
    if (nusers) {
        x->users = calloc(nusers, sizeof *x->users);
        x->dbs = calloc(nusers, sizeof *x->dbs);
        if (!x->users || !x->dbs)
            return mf_error_oom(err);
        x->nusers = nusers; /* the entries are NULL until copied */
        bson_iter_t el;
        bson_iter_recurse(&users, &el);
        for (size_t i = 0; bson_iter_next(&el); i++) {
            int rc = parse_user(&el, x, i, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}
