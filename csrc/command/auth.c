/*
 * auth.c -- who a connection is: SASL authentication (saslStart,
 * saslContinue, hello's speculativeAuthenticate and saslSupportedMechs),
 * logout, and the users a connection has authenticated as
 * (connectionStatus).  The mechanisms are scram.c's SCRAM-SHA-1 and
 * SCRAM-SHA-256; the users are admin.system.users' documents
 * (cmd_users.c writes them).
 *
 * A connection holds one conversation at a time (conversationId 1); a
 * saslStart begins a new one, dropping any other.  Every failed step --
 * a malformed message, an unknown user, a user without credentials for
 * the mechanism, a wrong proof -- is AuthenticationFailed (18)
 * "Authentication failed." to the client, the reason in the log (id
 * 20249), as mongod's sasl_commands answers: a stranger learns nothing
 * about which users exist.  A conversation that failed is over.  What is
 * refused before a step is its own error: a mechanism other than the two
 * (MechanismUnavailable 334), a payload of the wrong type (BadValue), a
 * saslContinue without a conversation or with another id (ProtocolError
 * 17).
 *
 * A connection is authenticated as one user at most (mongod 7.0):
 * authenticating again as the same user is allowed, as another is 5626701
 * (same database) or 5626702.  logout on the user's database forgets it.
 * The roles kept with the user are its document's when it authenticated.
 */
#include "command_int.h"
#include "authz_int.h"
#include "scram.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct auth_user {
    char user[1024]; /* an x.509 subject may be long */
    char db[128];
} auth_user;

struct mfi_auth {
    mfi_scram_conv conv;
    bool active;          /* a conversation is under way */
    bool skip_empty;      /* its client asked for skipEmptyExchange */
    bool b64;             /* its payloads are base64 strings, not BinData */
    char conv_db[128];    /* the database it authenticates against */
    auth_user users[1];
    size_t nusers;        /* 0 or 1 */
    /* The user's roles and privileges, as resolved when the instance's
     * authorization generation was `grants_gen` (authz.c): resolved again
     * when a user or role has changed since. */
    mfi_grants grants;
    bool has_grants;
    uint64_t grants_gen;
};

static void grants_drop(mfi_auth *a)
{
    if (a->has_grants)
        mfi_grants_free(&a->grants);
    a->has_grants = false;
}

/* The connection no longer authenticated as anyone. */
static void forget_user(mfi_auth *a)
{
    a->nusers = 0;
    grants_drop(a);
}

static mfi_auth *auth_of(mf_client *c)
{
    if (!c->auth)
        c->auth = calloc(1, sizeof *c->auth);
    return c->auth;
}

void mf_command_client_end(mf_client *c)
{
    mfi_auth *a = c->auth;
    if (!a)
        return;
    mfi_scram_conv_clear(&a->conv);
    forget_user(a);
    free(a);
    c->auth = NULL;
}

/* ------------------------------------------------------------ the users */

int mfi_authz_load(mf_instance *inst, const char *coll, const char *db, const char *name,
                   bson_t *out, bool *found, mf_error *err)
{
    char id[512];
    *found = false;
    bson_init(out);
    if ((size_t)snprintf(id, sizeof id, "%s.%s", db, name) >= sizeof id)
        return 0;
    bson_t *cmd = BCON_NEW("find", BCON_UTF8(coll), "filter", "{", "_id", BCON_UTF8(id), "}",
                           "limit", BCON_INT32(1));
    bson_t reply = BSON_INITIALIZER;
    int rc = cmd ? mfi_command_direct(inst, "admin", cmd, &reply, err) : mf_error_oom(err);
    bson_iter_t it, doc;
    bson_t d;
    if (rc == 0 && bson_iter_init(&it, &reply) &&
        bson_iter_find_descendant(&it, "cursor.firstBatch.0", &doc) &&
        mf_bsonx_doc_view(&doc, &d) && bson_concat(out, &d))
        *found = true;
    bson_destroy(&reply);
    if (cmd)
        bson_destroy(cmd);
    return rc;
}

int mfi_authz_run(mf_instance *inst, const char *coll, bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_iter_t it;
    int rc = cmd ? mfi_command_direct(inst, "admin", cmd, reply, err) : mf_error_oom(err);
    mfi_authz_changed(inst);
    if (rc == 0 && bson_iter_init_find(&it, reply, "writeErrors"))
        rc = mf_error_set(err, MF_OperationFailed, "writing admin.%s failed", coll);
    if (cmd)
        bson_destroy(cmd);
    return rc;
}

int mfi_user_load(mf_instance *inst, const char *db, const char *user, bson_t *out, bool *found,
                  mf_error *err)
{
    return mfi_authz_load(inst, "system.users", db, user, out, found, err);
}

/* The stored credentials of `m` in the user document `doc`. */
static bool creds_of(const bson_t *doc, mfi_scram_mech m, mfi_scram_creds *out)
{
    bson_iter_t it, f;
    char path[64];
    snprintf(path, sizeof path, "credentials.%s", mfi_scram_mech_name(m));
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &f) ||
        !BSON_ITER_HOLDS_DOCUMENT(&f))
        return false;
    bson_t c;
    if (!mf_bsonx_doc_view(&f, &c))
        return false;
    memset(out, 0, sizeof *out);
    bool have[4] = {false};
    bson_iter_init(&it, &c);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        uint32_t n;
        const char *s;
        if (strcmp(k, "iterationCount") == 0 && BSON_ITER_HOLDS_INT(&it)) {
            out->iterations = (int)bson_iter_as_int64(&it);
            have[0] = out->iterations > 0;
        } else if (BSON_ITER_HOLDS_UTF8(&it) && (s = bson_iter_utf8(&it, &n)) != NULL) {
            char *dst = strcmp(k, "salt") == 0        ? out->salt
                        : strcmp(k, "storedKey") == 0 ? out->stored_key
                        : strcmp(k, "serverKey") == 0 ? out->server_key
                                                      : NULL;
            if (dst && n < sizeof out->salt) {
                memcpy(dst, s, n + 1);
                have[dst == out->salt ? 1 : dst == out->stored_key ? 2 : 3] = true;
            }
        }
    }
    return have[0] && have[1] && have[2] && have[3];
}

/* Whether the connection may authenticate as user@db: once only, as one
 * user (AuthorizationSessionImpl::addAndAuthorizeUser). */
static int may_authenticate(const mfi_auth *a, const char *db, const char *user, mf_error *err)
{
    if (a->nusers == 0 || (strcmp(a->users[0].db, db) == 0 && strcmp(a->users[0].user, user) == 0))
        return 0;
    if (strcmp(a->users[0].db, db) == 0)
        return mf_error_set(err, 5626701,
                            "Each client connection may only be authenticated once. Previously "
                            "authenticated as: %s@%s",
                            a->users[0].user, a->users[0].db);
    return mf_error_set(err, 5626702,
                        "Client has attempted to authenticate on multiple databases.Already "
                        "authenticated as: %s@%s",
                        a->users[0].user, a->users[0].db);
}

static void authenticated(mfi_auth *a, const char *db, const char *user)
{
    auth_user *u = &a->users[0];
    forget_user(a);
    a->nusers = 1;
    snprintf(u->user, sizeof u->user, "%s", user);
    snprintf(u->db, sizeof u->db, "%s", db);
}

/* ------------------------------------------------------- the conversation */

static int auth_failed(mf_cmd_ctx *ctx, const char *mech, const char *user, const char *db,
                       const char *why, mf_error *err)
{
    mf_log(MF_LOG_INFO, "ACCESS", 20249, ctx->client ? ctx->client->remote : "",
           "Authentication failed: mechanism %s, user %s@%s: %s", mech, user, db, why);
    return mf_error_set(err, MF_AuthenticationFailed, "Authentication failed.");
}

/* The payload of sasl command `cname` (mongod's SASLPayload): BinData of
 * subtype 0 as it is, a string as base64 (`*b64`). */
static int payload_of(const bson_t *cmd, const char *cname, const uint8_t **p, size_t *n,
                      bool *b64, mf_buf *scratch, mf_error *err)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "payload"))
        return mf_error_set(err, 40414, "BSON field '%s.payload' is missing but a required field",
                            cname);
    *b64 = false;
    if (BSON_ITER_HOLDS_BINARY(&it)) {
        bson_subtype_t st;
        uint32_t len;
        bson_iter_binary(&it, &st, &len, p);
        if (st != BSON_SUBTYPE_BINARY)
            return mf_error_set(err, MF_BadValue,
                                "Invalid SASLPayload subtype. Expected BinDataGeneral, got: %d",
                                (int)st);
        *n = len;
        return 0;
    }
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        uint32_t len;
        const char *s = bson_iter_utf8(&it, &len);
        scratch->len = 0;
        if (mf_buf_reserve(scratch, len / 4 * 3 + 3) != 0)
            return mf_error_oom(err);
        if (!mfi_base64_decode(s, len, scratch->data, n))
            return mf_error_set(err, MF_BadValue, "Invalid base64 encoding of the SASL payload");
        *p = scratch->data;
        *b64 = true;
        return 0;
    }
    return mf_error_set(err, MF_BadValue,
                        "Invalid SASLPayload type. Expected Base64 or BinData, got: %s",
                        mf_bsonx_type_alias(bson_iter_type(&it)));
}

/* The reply's payload, in the form the request's came in. */
static void append_payload(bson_t *reply, const mf_buf *b, bool b64)
{
    static const uint8_t none[1];
    if (!b64) {
        bson_append_binary(reply, "payload", 7, BSON_SUBTYPE_BINARY, b->len ? b->data : none,
                           (uint32_t)b->len);
        return;
    }
    char *s = malloc(b->len / 3 * 4 + 8);
    if (s) {
        mfi_base64_encode(b->data, b->len, s);
        BSON_APPEND_UTF8(reply, "payload", s);
        free(s);
    }
}

/* saslStart's work for `db`, reply fields into `reply`: also hello's
 * speculativeAuthenticate. */
static int sasl_start(mf_cmd_ctx *ctx, const char *db, const bson_t *cmd, bson_t *reply,
                      mf_error *err)
{
    mfi_auth *a = auth_of(ctx->client);
    if (!a)
        return mf_error_oom(err);
    bson_iter_t it;
    const char *mech_name = NULL;
    mfi_scram_mech mech;
    if (bson_iter_init_find(&it, cmd, "mechanism") && BSON_ITER_HOLDS_UTF8(&it))
        mech_name = bson_iter_utf8(&it, NULL);
    if (!mech_name)
        return mf_error_set(err, 40414,
                            "BSON field 'saslStart.mechanism' is missing but a required field");
    if (!mfi_scram_mech_of(mech_name, &mech))
        return mf_error_set(err, MF_MechanismUnavailable,
                            "Received authentication for mechanism %s which is not enabled",
                            mech_name);
    a->active = false;
    a->skip_empty = false;
    bson_iter_t o;
    if (bson_iter_init_find(&it, cmd, "options") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &o) && bson_iter_find(&o, "skipEmptyExchange")) {
        if (!BSON_ITER_HOLDS_BOOL(&o))
            return mf_error_set(err, MF_BadValue, "skipEmptyExchange must be boolean");
        a->skip_empty = bson_iter_bool(&o);
    }
    const uint8_t *p;
    size_t n;
    mf_buf scratch = {0};
    int rc = payload_of(cmd, "saslStart", &p, &n, &a->b64, &scratch, err);
    if (rc == 0 && (rc = mfi_scram_client_first(&a->conv, mech, p, n, err)) != 0)
        rc = auth_failed(ctx, mech_name, "", db, err->msg, err);
    mf_buf_free(&scratch);
    if (rc)
        return rc;
    bson_t doc;
    bool found;
    if ((rc = mfi_user_load(ctx->inst, db, a->conv.user, &doc, &found, err)) != 0) {
        bson_destroy(&doc);
        return rc;
    }
    mfi_scram_creds creds;
    if (!found || !creds_of(&doc, mech, &creds)) {
        char why[1400];
        if (!found)
            snprintf(why, sizeof why, "Could not find user \"%s\" for db \"%s\"", a->conv.user,
                     db);
        else
            snprintf(why, sizeof why,
                     "Unable to use %s based authentication for user without any %s "
                     "credentials registered",
                     mech_name, mech_name);
        bson_destroy(&doc);
        return auth_failed(ctx, mech_name, a->conv.user, db, why, err);
    }
    bson_destroy(&doc);
    mf_buf out = {0};
    if ((rc = mfi_scram_server_first(&a->conv, &creds, &out, err)) == 0) {
        snprintf(a->conv_db, sizeof a->conv_db, "%s", db);
        a->active = true;
        BSON_APPEND_INT32(reply, "conversationId", 1);
        BSON_APPEND_BOOL(reply, "done", false);
        append_payload(reply, &out, a->b64);
    }
    mf_buf_free(&out);
    return rc;
}

/* ------------------------------------------------------------ MONGODB-X509 */

/* authenticate on `db` (mongod's authentication_commands.cpp): the
 * client certificate's subject, verified by the TLS handshake, is the
 * user of $external with that name.  Every refusal but a missing user
 * (UserNotFound 11) and the wrong database (ProtocolError 17) is
 * AuthenticationFailed 18 "Authentication failed.", as mongod remaps
 * them; the reason goes to the log. */
static int x509_authenticate(mf_cmd_ctx *ctx, const char *db, const bson_t *cmd, bson_t *reply,
                             mf_error *err)
{
    bson_iter_t it;
    const char *mech = NULL, *user = NULL;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "mechanism") == 0 || strcmp(k, "user") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mfi_type_error(err, "authenticate", k, &it, "string");
            *(k[0] == 'm' ? &mech : &user) = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "db") != 0 && !mfi_is_generic_arg(k)) {
            return mf_error_set(err, 40415, "BSON field 'authenticate.%s' is an unknown field.", k);
        }
    }
    if (!mech)
        return mf_error_set(err, 40414,
                            "BSON field 'authenticate.mechanism' is missing but a required field");
    const mf_client *c = ctx->client;
    const char *subject = c && c->tls ? c->tls_subject : "";
    const char *why = !*mech                              ? "Auth mechanism not specified"
                      : strcmp(mech, "MONGODB-X509") != 0 ? "Unsupported mechanism"
                      : !*subject ? "No verified subject name available from client"
                      : user && strcmp(user, subject) != 0
                          ? "There is no x.509 client certificate matching the user."
                          : NULL;
    if (why)
        return auth_failed(ctx, mech, user ? user : subject, db, why, err);
    if (strcmp(db, "$external") != 0)
        return mf_error_set(err, MF_ProtocolError,
                            "X.509 authentication must always use the $external database.");
    bson_t doc;
    bool found;
    int rc = mfi_user_load(ctx->inst, "$external", subject, &doc, &found, err);
    bson_destroy(&doc);
    if (rc)
        return rc;
    if (!found)
        return mf_error_set(err, MF_UserNotFound, "Could not find user \"%s\" for db \"$external\"",
                            subject);
    mfi_auth *a = auth_of(ctx->client);
    if (!a)
        return mf_error_oom(err);
    mf_error why_not;
    if (may_authenticate(a, "$external", subject, &why_not) != 0)
        return auth_failed(ctx, mech, subject, db, why_not.msg, err);
    authenticated(a, "$external", subject);
    mf_log(MF_LOG_INFO, "ACCESS", 20250, ctx->client->remote,
           "Authentication succeeded: mechanism MONGODB-X509, user %s@$external", subject);
    BSON_APPEND_UTF8(reply, "dbname", "$external");
    BSON_APPEND_UTF8(reply, "user", subject);
    return 0;
}

int mfi_cmd_authenticate(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    return x509_authenticate(ctx, ctx->db, cmd, reply, err);
}

int mfi_cmd_sasl_start(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    return sasl_start(ctx, ctx->db, cmd, reply, err);
}

int mfi_cmd_sasl_continue(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mfi_auth *a = auth_of(ctx->client);
    if (!a)
        return mf_error_oom(err);
    bson_iter_t it;
    if (!a->active)
        return mf_error_set(err, MF_ProtocolError, "No SASL session state found");
    if (!bson_iter_init_find(&it, cmd, "conversationId") || !BSON_ITER_HOLDS_NUMBER(&it) ||
        bson_iter_as_int64(&it) != 1) {
        a->active = false;
        return mf_error_set(err, MF_ProtocolError, "sasl: Mismatched conversation id");
    }
    const uint8_t *p;
    size_t n;
    bool b64;
    mf_buf scratch = {0}, out = {0};
    int rc = payload_of(cmd, "saslContinue", &p, &n, &b64, &scratch, err);
    if (rc) {
        mf_buf_free(&scratch);
        return rc;
    }
    const char *mech = mfi_scram_mech_name(a->conv.mech);
    if (strcmp(ctx->db, a->conv_db) != 0) {
        rc = auth_failed(ctx, mech, a->conv.user, a->conv_db,
                         "Attempt to switch database target during SASL authentication", err);
    } else if (a->conv.step == 1) {
        if ((rc = mfi_scram_client_final(&a->conv, p, n, &out, err)) != 0)
            rc = auth_failed(ctx, mech, a->conv.user, a->conv_db, err->msg, err);
    } else if (a->conv.step == 2) {
        a->conv.step = 3; /* the empty exchange: its payload is not read */
    }
    if (rc)
        a->active = false;
    bool done = rc == 0 && (a->conv.step == 3 || (a->conv.step == 2 && a->skip_empty));
    if (done) {
        /* the user still exists */
        bson_t doc;
        bool found;
        rc = mfi_user_load(ctx->inst, a->conv_db, a->conv.user, &doc, &found, err);
        if (rc == 0 && !found)
            rc = auth_failed(ctx, mech, a->conv.user, a->conv_db, "the user was dropped", err);
        if (rc == 0)
            rc = may_authenticate(a, a->conv_db, a->conv.user, err);
        if (rc == 0) {
            authenticated(a, a->conv_db, a->conv.user);
            mf_log(MF_LOG_INFO, "ACCESS", 20250, ctx->client->remote,
                   "Authentication succeeded: mechanism %s, user %s@%s", mech, a->conv.user,
                   a->conv_db);
        }
        bson_destroy(&doc);
        a->active = false;
    }
    if (rc == 0) {
        BSON_APPEND_INT32(reply, "conversationId", 1);
        BSON_APPEND_BOOL(reply, "done", done);
        append_payload(reply, &out, b64);
    }
    mf_buf_free(&scratch);
    mf_buf_free(&out);
    return rc;
}

int mfi_cmd_logout(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd, (void)reply, (void)err;
    mfi_auth *a = ctx->client->auth;
    static bool warned;
    if (!warned) {
        warned = true;
        mf_log(MF_LOG_WARNING, "ACCESS", 5626600, ctx->client->remote,
               "The logout command has been deprecated, clients should end their session "
               "instead");
    }
    if (a && a->nusers && strcmp(a->users[0].db, ctx->db) == 0) {
        forget_user(a);
        ctx->authz_ready = false; /* its grants are gone */
    }
    return 0;
}

/* ------------------------------------------------------------------ hello */

/* The user named by hello's saslSupportedMechs: "db.user" (split at the
 * first dot) or {user, db}.  BadValue as mongod's UserName parser. */
static int user_name_of(const bson_iter_t *it, char *db, size_t dbcap, const char **user,
                        mf_error *err)
{
    const char *d = NULL;
    size_t dn = 0;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *v = bson_iter_utf8(it, NULL), *dot = strchr(v, '.');
        if (!dot)
            return mf_error_set(err, MF_BadValue,
                                "UserName must contain a '.' separated database.user pair");
        d = v;
        dn = (size_t)(dot - v);
        *user = dot + 1;
    } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_t doc;
        bson_iter_t f;
        mf_bsonx_doc_view(it, &doc);
        if (bson_iter_init_find(&f, &doc, "db") && BSON_ITER_HOLDS_UTF8(&f))
            d = bson_iter_utf8(&f, NULL), dn = strlen(d);
        if (bson_iter_init_find(&f, &doc, "user") && BSON_ITER_HOLDS_UTF8(&f))
            *user = bson_iter_utf8(&f, NULL);
        else
            d = NULL;
        if (!d)
            return mf_error_set(err, MF_BadValue, "UserName must contain a user and a db field");
    } else {
        return mf_error_set(err, MF_BadValue, "UserName must be either a string or an object");
    }
    if (dn >= dbcap)
        return mf_error_set(err, MF_BadValue, "UserName's database name is too long");
    memcpy(db, d, dn);
    db[dn] = '\0';
    return 0;
}

int mfi_auth_hello(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_iter_t it;
    int rc;
    if (bson_iter_init_find(&it, cmd, "speculativeAuthenticate")) {
        bson_t spec;
        bson_iter_t first;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !mf_bsonx_doc_view(&it, &spec) ||
            !bson_iter_init(&first, &spec) || !bson_iter_next(&first))
            return mf_error_set(err, MF_BadValue,
                                "hello.speculativeAuthenticate must be a non-empty Object");
        const char *name = bson_iter_key(&first);
        if (strcmp(name, "saslStart") != 0 && strcmp(name, "authenticate") != 0)
            return mf_error_set(err, 51769, "hello.speculativeAuthenticate unknown command: %s",
                                name);
    }
    if (bson_iter_init_find(&it, cmd, "saslSupportedMechs")) {
        /* the mechanisms of the user's credentials; nothing for a user
         * that does not exist */
        char db[128];
        const char *user = NULL;
        if ((rc = user_name_of(&it, db, sizeof db, &user, err)) != 0)
            return rc;
        bson_t doc, arr;
        bool found = false;
        mf_error e;
        if (mfi_user_load(ctx->inst, db, user, &doc, &found, &e) != 0)
            found = false;
        if (found) {
            mfi_scram_creds c;
            uint32_t i = 0;
            BSON_APPEND_ARRAY_BEGIN(reply, "saslSupportedMechs", &arr);
            for (int m = MFI_SCRAM_SHA1; m <= MFI_SCRAM_SHA256; m++)
                if (creds_of(&doc, (mfi_scram_mech)m, &c)) {
                    char k[16];
                    const char *key;
                    bson_uint32_to_string(i++, &key, k, sizeof k);
                    bson_append_utf8(&arr, key, -1, mfi_scram_mech_name((mfi_scram_mech)m), -1);
                }
            bson_append_array_end(reply, &arr);
        } else {
            mf_log(MF_LOG_INFO, "ACCESS", 20251, ctx->client->remote,
                   "Supported SASL mechanisms requested for unknown user: %s@%s", user, db);
        }
        bson_destroy(&doc);
    }
    if (bson_iter_init_find(&it, cmd, "speculativeAuthenticate")) {
        bson_t spec, out = BSON_INITIALIZER;
        bson_iter_t d;
        mf_error e;
        /* a saslStart with its database, or an authenticate (on $external
         * unless it names another); any failure is no reply field (the
         * client then authenticates the long way) */
        if (mf_bsonx_doc_view(&it, &spec) && bson_iter_init_find(&d, &spec, "saslStart") &&
            bson_iter_init_find(&d, &spec, "db") && BSON_ITER_HOLDS_UTF8(&d) &&
            sasl_start(ctx, bson_iter_utf8(&d, NULL), &spec, &out, &e) == 0)
            BSON_APPEND_DOCUMENT(reply, "speculativeAuthenticate", &out);
        else if (bson_iter_init_find(&d, &spec, "authenticate") &&
                 x509_authenticate(ctx,
                                   bson_iter_init_find(&d, &spec, "db") && BSON_ITER_HOLDS_UTF8(&d)
                                       ? bson_iter_utf8(&d, NULL)
                                       : "$external",
                                   &spec, &out, &e) == 0)
            BSON_APPEND_DOCUMENT(reply, "speculativeAuthenticate", &out);
        bson_destroy(&out);
    }
    return 0;
}

/* ------------------------------------------------ who runs the command */

int mfi_auth_grants(mf_cmd_ctx *ctx, const mfi_grants **out, mf_error *err)
{
    mfi_auth *a = ctx->client ? ctx->client->auth : NULL;
    *out = NULL;
    if (!a || !a->nusers)
        return 0;
    uint64_t gen = mfi_authz_generation(ctx->inst);
    if (a->has_grants && a->grants_gen == gen) {
        *out = &a->grants;
        return 0;
    }
    grants_drop(a);
    bson_t doc;
    bool found;
    int rc = mfi_user_load(ctx->inst, a->users[0].db, a->users[0].user, &doc, &found, err);
    if (rc == 0 && !found) {
        /* dropped since it authenticated: the connection is nobody now */
        mf_log(MF_LOG_INFO, "ACCESS", 20245, ctx->client->remote,
               "Removed deleted user from session cache of user information: %s@%s",
               a->users[0].user, a->users[0].db);
        a->nusers = 0;
    } else if (rc == 0 && (rc = mfi_grants_resolve(ctx->inst, &doc, &a->grants, err)) == 0) {
        a->has_grants = true;
        a->grants_gen = gen;
        *out = &a->grants;
    }
    bson_destroy(&doc);
    return rc;
}

/* ----------------------------------------------------- connectionStatus */

int mfi_auth_status(mf_cmd_ctx *ctx, bool privileges, bson_t *info, mf_error *err)
{
    const mfi_grants *g;
    int rc = mfi_auth_grants(ctx, &g, err);
    if (rc)
        return rc;
    mfi_auth *a = ctx->client ? ctx->client->auth : NULL;
    bson_t users, u;
    BSON_APPEND_ARRAY_BEGIN(info, "authenticatedUsers", &users);
    if (g) {
        bson_append_document_begin(&users, "0", 1, &u);
        BSON_APPEND_UTF8(&u, "user", a->users[0].user);
        BSON_APPEND_UTF8(&u, "db", a->users[0].db);
        bson_append_document_end(&users, &u);
    }
    bson_append_array_end(info, &users);
    if (g) {
        BSON_APPEND_ARRAY(info, "authenticatedUserRoles", &g->roles);
    } else {
        BSON_APPEND_ARRAY_BEGIN(info, "authenticatedUserRoles", &users);
        bson_append_array_end(info, &users);
    }
    if (privileges) {
        mfi_privs none = {0};
        mfi_privs_append(info, "authenticatedUserPrivileges", g ? &g->privs : &none);
    }
    return 0;
}

bool mfi_auth_user(mf_cmd_ctx *ctx, const char **user, const char **db)
{
    mfi_auth *a = ctx->client ? ctx->client->auth : NULL;
    if (!a || !a->nusers)
        return false;
    *user = a->users[0].user;
    *db = a->users[0].db;
    return true;
}
