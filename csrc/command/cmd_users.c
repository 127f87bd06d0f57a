/*
 * cmd_users.c -- user management: createUser, updateUser, dropUser,
 * dropAllUsersFromDatabase, usersInfo, grantRolesToUser,
 * revokeRolesFromUser, as mongod 7.0's user_management_commands.
 *
 * A user is one document of admin.system.users, as mongod stores it:
 *
 *   {_id: "<db>.<user>", userId: UUID, user, db,
 *    credentials: {"SCRAM-SHA-1":   {iterationCount, salt, storedKey, serverKey},
 *                  "SCRAM-SHA-256": {iterationCount, salt, storedKey, serverKey}},
 *    customData: {...} (when given), roles: [{role, db}, ...]}
 *
 * with mongod's unique index user_1_db_1 {user: 1, db: 1}.  No password
 * is kept, only the salted SCRAM keys (scram.h).  The commands work with
 * or without access control, as on mongod; they write through the
 * command table as the server itself (mfi_command_direct), so each is
 * durable before it answers.
 *
 * Roles: a role is named by a string (a role of the command's database)
 * or {role, db}.  The built-in roles (authz.c) exist on every database
 * (read, readWrite, dbAdmin, dbOwner, userAdmin, enableSharding) or on
 * admin only (the cluster and AnyDatabase roles, backup, restore, root,
 * __system); the others are admin.system.roles' (cmd_roles.c); any other
 * name is RoleNotFound.
 */
#include "command_int.h"
#include "authz_int.h"
#include "scram.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ---------------------------------------------------------------- roles */

/* The roles argument `it` of command `cmd` as [{role, db}] into `out`
 * (initialised here), each checked to exist. */
static int parse_roles(mf_instance *inst, const bson_iter_t *it, const char *cmd,
                       const char *field, const char *db, bson_t *out, mf_error *err)
{
    bson_iter_t r;
    bson_init(out);
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mfi_type_error(err, cmd, field, it, "array");
    bson_iter_recurse(it, &r);
    uint32_t i = 0;
    char missing[512] = "";
    int nmissing = 0;
    while (bson_iter_next(&r)) {
        const char *role = NULL, *rdb = db;
        if (BSON_ITER_HOLDS_UTF8(&r)) {
            role = bson_iter_utf8(&r, NULL);
        } else if (BSON_ITER_HOLDS_DOCUMENT(&r)) {
            bson_t d;
            bson_iter_t f;
            mf_bsonx_doc_view(&r, &d);
            bson_iter_init(&f, &d);
            rdb = NULL;
            while (bson_iter_next(&f)) {
                const char *k = bson_iter_key(&f);
                if (strcmp(k, "role") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                    role = bson_iter_utf8(&f, NULL);
                else if (strcmp(k, "db") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                    rdb = bson_iter_utf8(&f, NULL);
                else if (strcmp(k, "role") == 0 || strcmp(k, "db") == 0)
                    return mfi_type_error(err, "RoleName", k, &f, "string");
                else
                    return mf_error_set(err, 40415, "BSON field 'RoleName.%s' is an unknown field.",
                                        k);
            }
            if (!role)
                return mf_error_set(err, 40414,
                                    "BSON field 'RoleName.role' is missing but a required field");
            if (!rdb)
                return mf_error_set(err, 40414,
                                    "BSON field 'RoleName.db' is missing but a required field");
        } else {
            return mf_error_set(err, MF_BadValue,
                                "Role names must be either strings or objects");
        }
        bool exists;
        int rc = mfi_role_exists(inst, role, rdb, &exists, err);
        if (rc)
            return rc;
        if (!exists) {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof missing - used, "%s%s@%s", nmissing ? ", " : "", role,
                     rdb);
            nmissing++;
            continue;
        }
        char key[16];
        const char *k;
        bson_t d;
        bson_uint32_to_string(i++, &k, key, sizeof key);
        bson_append_document_begin(out, k, -1, &d);
        BSON_APPEND_UTF8(&d, "role", role);
        BSON_APPEND_UTF8(&d, "db", rdb);
        bson_append_document_end(out, &d);
    }
    if (nmissing)
        return mf_error_set(err, MF_RoleNotFound, "Could not find role%s: %s",
                            nmissing > 1 ? "s" : "", missing);
    return 0;
}

/* A user's _id, "<db>.<user>", into `out`; BadValue when too long. */
static int user_id(const char *db, const char *user, char *out, size_t cap, mf_error *err)
{
    if ((size_t)snprintf(out, cap, "%s.%s", db, user) >= cap)
        return mf_error_set(err, MF_BadValue, "User name too long: %s@%s", user, db);
    return 0;
}

/* The command's user-name argument `it` (a string without NUL). */
static int user_name_arg(const bson_iter_t *it, const char *cname, const char **name,
                         mf_error *err)
{
    uint32_t n;
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mfi_type_error(err, cname, cname, it, "string");
    *name = bson_iter_utf8(it, &n);
    if (strlen(*name) != n)
        return mf_error_set(err, MF_BadValue, "Username cannot contain NULL characters");
    return 0;
}

/* ------------------------------------------------------------- arguments */

typedef struct user_args {
    const char *name;       /* the command's value: the user */
    const char *pwd;
    bool has_roles, has_custom, has_mechs, digest;
    bson_t roles;           /* [{role, db}] */
    bson_t custom;          /* customData */
    bool mechs[2];          /* SCRAM-SHA-1, SCRAM-SHA-256 */
} user_args;

static void user_args_free(user_args *a)
{
    if (a->has_roles)
        bson_destroy(&a->roles);
}

/* createUser's and updateUser's arguments. */
static int parse_user_args(mf_cmd_ctx *ctx, const bson_t *cmd, const char *cname, user_args *a,
                           mf_error *err)
{
    bson_iter_t it;
    int rc;
    memset(a, 0, sizeof *a);
    a->digest = true;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if ((rc = user_name_arg(&it, cname, &a->name, err)) != 0)
        return rc;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "pwd") == 0) {
            uint32_t n;
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mfi_type_error(err, cname, k, &it, "string");
            a->pwd = bson_iter_utf8(&it, &n);
            if (strlen(a->pwd) != n) /* (the SCRAM functions take C strings) */
                return mf_error_set(err, MF_BadValue, "Password cannot contain NULL characters");
        } else if (strcmp(k, "roles") == 0) {
            if (a->has_roles)
                bson_destroy(&a->roles);
            a->has_roles = true;
            if ((rc = parse_roles(ctx->inst, &it, cname, k, ctx->db, &a->roles, err)) != 0)
                return rc;
        } else if (strcmp(k, "customData") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mfi_type_error(err, cname, k, &it, "object");
            mf_bsonx_doc_view(&it, &a->custom);
            a->has_custom = true;
        } else if (strcmp(k, "mechanisms") == 0) {
            bson_iter_t m;
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mfi_type_error(err, cname, k, &it, "array");
            a->has_mechs = true;
            bson_iter_recurse(&it, &m);
            while (bson_iter_next(&m)) {
                mfi_scram_mech mech;
                if (!BSON_ITER_HOLDS_UTF8(&m))
                    return mfi_type_error(err, cname, k, &m, "string");
                if (!mfi_scram_mech_of(bson_iter_utf8(&m, NULL), &mech))
                    return mf_error_set(err, MF_BadValue, "Unknown auth mechanism '%s'",
                                        bson_iter_utf8(&m, NULL));
                a->mechs[mech] = true;
            }
            if (!a->mechs[0] && !a->mechs[1])
                return mf_error_set(err, MF_BadValue,
                                    "mechanisms field must not be empty");
        } else if (strcmp(k, "digestPassword") == 0) {
            a->digest = bson_iter_as_bool(&it);
        } else if (strcmp(k, "authenticationRestrictions") == 0) {
            return mf_error_set(err, MF_NotImplemented,
                                "authenticationRestrictions are not supported by this server");
        } else if (!mfi_is_generic_arg(k)) {
            return mf_error_set(err, 40415, "BSON field '%s.%s' is an unknown field.", cname, k);
        }
    }
    if (a->name[0] == '\0')
        return mf_error_set(err, MF_BadValue, "User document needs 'user' field to be non-empty");
    if (!a->has_mechs)
        a->mechs[0] = a->mechs[1] = true;
    return 0;
}

/* The credentials document for `a` (pwd given) into `out`. */
static int make_credentials(const char *user, const user_args *a, bson_t *out, mf_error *err)
{
    bson_init(out);
    if (a->pwd[0] == '\0')
        return mf_error_set(err, MF_BadValue, "Password cannot be empty");
    if (!a->digest && a->mechs[MFI_SCRAM_SHA256])
        return mf_error_set(err, MF_BadValue,
                            "Use of SCRAM-SHA-256 requires undigested passwords");
    for (int m = MFI_SCRAM_SHA1; m <= MFI_SCRAM_SHA256; m++) {
        if (!a->mechs[m])
            continue;
        mfi_scram_creds c;
        int rc = mfi_scram_creds_make((mfi_scram_mech)m, user, a->pwd, a->digest,
                                      m == MFI_SCRAM_SHA1 ? MFI_SCRAM_SHA1_ITERATIONS
                                                          : MFI_SCRAM_SHA256_ITERATIONS,
                                      &c, err);
        if (rc)
            return rc;
        bson_t d;
        BSON_APPEND_DOCUMENT_BEGIN(out, mfi_scram_mech_name((mfi_scram_mech)m), &d);
        BSON_APPEND_INT32(&d, "iterationCount", c.iterations);
        BSON_APPEND_UTF8(&d, "salt", c.salt);
        BSON_APPEND_UTF8(&d, "storedKey", c.stored_key);
        BSON_APPEND_UTF8(&d, "serverKey", c.server_key);
        bson_append_document_end(out, &d);
    }
    return 0;
}

static int run_admin(mf_cmd_ctx *ctx, bson_t *cmd, bson_t *reply, mf_error *err)
{
    return mfi_authz_run(ctx->inst, "system.users", cmd, reply, err);
}

static int ensure_users_index(mf_cmd_ctx *ctx, mf_error *err)
{
    bson_t reply = BSON_INITIALIZER;
    bson_t *cmd = BCON_NEW("createIndexes", "system.users", "indexes", "[", "{", "key", "{",
                           "user", BCON_INT32(1), "db", BCON_INT32(1), "}", "name",
                           BCON_UTF8("user_1_db_1"), "unique", BCON_BOOL(true), "}", "]");
    int rc = run_admin(ctx, cmd, &reply, err);
    bson_destroy(&reply);
    return rc;
}

/* ------------------------------------------------------------ createUser */

int mfi_cmd_create_user(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    user_args a;
    int rc = parse_user_args(ctx, cmd, "createUser", &a, err);
    bson_t creds = BSON_INITIALIZER, doc = BSON_INITIALIZER, existing;
    bool found = false;
    if (rc == 0 && !a.has_roles)
        rc = mf_error_set(err, 40414,
                          "BSON field 'createUser.roles' is missing but a required field");
    if (rc == 0 && strcmp(ctx->db, "$external") == 0 && a.pwd)
        rc = mf_error_set(err, MF_BadValue, "Cannot set the password for users defined on the "
                                            "'$external' database");
    if (rc == 0 && strcmp(ctx->db, "$external") != 0 && !a.pwd)
        rc = mf_error_set(err, MF_BadValue,
                          "Must provide a 'pwd' field for all user documents, except those with "
                          "'$external' as the user's source db");
    if (rc == 0 && strcmp(ctx->db, "local") == 0)
        rc = mf_error_set(err, MF_BadValue, "Cannot create users in the local database");
    char idcheck[512];
    if (rc == 0)
        rc = user_id(ctx->db, a.name, idcheck, sizeof idcheck, err);
    if (rc == 0)
        rc = mfi_user_load(ctx->inst, ctx->db, a.name, &existing, &found, err);
    else
        bson_init(&existing);
    bson_destroy(&existing);
    if (rc == 0 && found)
        rc = mf_error_set(err, 51003, "User \"%s@%s\" already exists", a.name, ctx->db);
    bson_destroy(&creds);
    if (rc == 0 && a.pwd)
        rc = make_credentials(a.name, &a, &creds, err);
    else
        bson_init(&creds);
    if (rc == 0) {
        char id[512];
        uint8_t uuid[16];
        if (getrandom(uuid, sizeof uuid, 0) != (ssize_t)sizeof uuid)
            rc = mf_error_set(err, MF_InternalError, "no random bytes for a userId");
        uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40);
        uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
        if (rc == 0)
            rc = user_id(ctx->db, a.name, id, sizeof id, err);
        BSON_APPEND_UTF8(&doc, "_id", rc == 0 ? id : "");
        bson_append_binary(&doc, "userId", 6, BSON_SUBTYPE_UUID, uuid, 16);
        BSON_APPEND_UTF8(&doc, "user", a.name);
        BSON_APPEND_UTF8(&doc, "db", ctx->db);
        if (a.pwd)
            BSON_APPEND_DOCUMENT(&doc, "credentials", &creds);
        else {
            bson_t ext;
            BSON_APPEND_DOCUMENT_BEGIN(&doc, "credentials", &ext);
            BSON_APPEND_BOOL(&ext, "external", true);
            bson_append_document_end(&doc, &ext);
        }
        if (a.has_custom)
            BSON_APPEND_DOCUMENT(&doc, "customData", &a.custom);
        BSON_APPEND_ARRAY(&doc, "roles", &a.roles);
    }
    if (rc == 0)
        rc = ensure_users_index(ctx, err);
    if (rc == 0) {
        bson_t r = BSON_INITIALIZER;
        bson_t *ins = BCON_NEW("insert", "system.users", "documents", "[", BCON_DOCUMENT(&doc),
                               "]");
        rc = run_admin(ctx, ins, &r, err);
        bson_iter_t it;
        if (rc == MF_OperationFailed && bson_iter_init_find(&it, &r, "writeErrors"))
            rc = mf_error_set(err, 51003, "User \"%s@%s\" already exists", a.name, ctx->db);
        bson_destroy(&r);
    }
    bson_destroy(&creds);
    bson_destroy(&doc);
    user_args_free(&a);
    return rc;
}

/* ------------------------------------------------------------ updateUser */

int mfi_cmd_update_user(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    user_args a;
    int rc = parse_user_args(ctx, cmd, "updateUser", &a, err);
    bson_t existing, creds = BSON_INITIALIZER, set = BSON_INITIALIZER;
    bool found = false;
    if (rc == 0 && !a.pwd && !a.has_roles && !a.has_custom && !a.has_mechs)
        rc = mf_error_set(err, MF_BadValue, "Must specify at least one field to update in "
                                            "updateUser");
    bson_t unset = BSON_INITIALIZER;
    if (rc == 0)
        rc = mfi_user_load(ctx->inst, ctx->db, a.name, &existing, &found, err);
    else
        bson_init(&existing);
    if (rc == 0 && !found)
        rc = mf_error_set(err, MF_UserNotFound, "User %s@%s not found", a.name, ctx->db);
    if (rc == 0 && a.has_mechs && !a.pwd) {
        /* without a password, the credentials are trimmed to `mechanisms` */
        for (int m = MFI_SCRAM_SHA1; rc == 0 && m <= MFI_SCRAM_SHA256; m++) {
            char path[64];
            bson_iter_t c;
            snprintf(path, sizeof path, "credentials.%s", mfi_scram_mech_name((mfi_scram_mech)m));
            bool has = bson_iter_init(&c, &existing) && bson_iter_find_descendant(&c, path, &c);
            if (a.mechs[m] && !has)
                rc = mf_error_set(err, MF_BadValue,
                                  "mechanisms field must be a subset of previously set mechanisms");
            else if (!a.mechs[m] && has)
                BSON_APPEND_UTF8(&unset, path, "");
        }
    }
    bson_destroy(&existing);
    if (rc == 0 && a.pwd) {
        bson_destroy(&creds);
        if ((rc = make_credentials(a.name, &a, &creds, err)) == 0)
            BSON_APPEND_DOCUMENT(&set, "credentials", &creds);
    }
    if (rc == 0 && a.has_custom)
        BSON_APPEND_DOCUMENT(&set, "customData", &a.custom);
    if (rc == 0 && a.has_roles)
        BSON_APPEND_ARRAY(&set, "roles", &a.roles);
    if (rc == 0) {
        char id[512];
        rc = user_id(ctx->db, a.name, id, sizeof id, err);
        bson_t r = BSON_INITIALIZER;
        bson_t u = BSON_INITIALIZER;
        if (!bson_empty(&set))
            BSON_APPEND_DOCUMENT(&u, "$set", &set);
        if (!bson_empty(&unset))
            BSON_APPEND_DOCUMENT(&u, "$unset", &unset);
        bson_t *up = BCON_NEW("update", "system.users", "updates", "[", "{", "q", "{", "_id",
                              BCON_UTF8(id), "}", "u", BCON_DOCUMENT(&u), "}", "]");
        if (rc == 0)
            rc = run_admin(ctx, up, &r, err);
        else
            bson_destroy(up);
        bson_destroy(&r);
        bson_destroy(&u);
    }
    bson_destroy(&creds);
    bson_destroy(&set);
    bson_destroy(&unset);
    user_args_free(&a);
    return rc;
}

/* ------------------------------------------------------ dropping users */

/* Delete the users matching `q` from admin.system.users; how many. */
static int delete_users(mf_cmd_ctx *ctx, const bson_t *q, int64_t *n, mf_error *err)
{
    bson_t r = BSON_INITIALIZER;
    bson_t *del = BCON_NEW("delete", "system.users", "deletes", "[", "{", "q", BCON_DOCUMENT(q),
                           "limit", BCON_INT32(0), "}", "]");
    int rc = run_admin(ctx, del, &r, err);
    bson_iter_t it;
    *n = rc == 0 && bson_iter_init_find(&it, &r, "n") ? bson_iter_as_int64(&it) : 0;
    bson_destroy(&r);
    return rc;
}

int mfi_cmd_drop_user(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    bson_iter_t it;
    const char *name;
    int rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if ((rc = user_name_arg(&it, "dropUser", &name, err)) != 0)
        return rc;
    while (bson_iter_next(&it))
        if (!mfi_is_generic_arg(bson_iter_key(&it)))
            return mf_error_set(err, 40415, "BSON field 'dropUser.%s' is an unknown field.",
                                bson_iter_key(&it));
    char id[512];
    if ((rc = user_id(ctx->db, name, id, sizeof id, err)) != 0)
        return rc;
    bson_t q = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&q, "_id", id);
    int64_t n = 0;
    rc = delete_users(ctx, &q, &n, err);
    bson_destroy(&q);
    if (rc == 0 && n == 0)
        rc = mf_error_set(err, MF_UserNotFound, "User '%s@%s' not found", name, ctx->db);
    return rc;
}

int mfi_cmd_drop_all_users_from_database(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                         mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it))
        if (!mfi_is_generic_arg(bson_iter_key(&it)))
            return mf_error_set(err, 40415,
                                "BSON field 'dropAllUsersFromDatabase.%s' is an unknown field.",
                                bson_iter_key(&it));
    bson_t q = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&q, "db", ctx->db);
    int64_t n = 0;
    int rc = delete_users(ctx, &q, &n, err);
    bson_destroy(&q);
    if (rc == 0)
        BSON_APPEND_INT32(reply, "n", (int32_t)n);
    return rc;
}

/* ------------------------------------------------- granting and revoking */

/* grantRolesToUser (grant) or revokeRolesFromUser: the user's roles with
 * `roles` added or taken away. */
static int change_roles(mf_cmd_ctx *ctx, const bson_t *cmd, const char *cname, bool grant,
                        mf_error *err)
{
    bson_iter_t it;
    const char *name = NULL;
    bson_t roles, have, now = BSON_INITIALIZER;
    bool has_roles = false, found = false;
    int rc = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if ((rc = user_name_arg(&it, cname, &name, err)) != 0)
        return rc;
    bson_init(&roles);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "roles") == 0) {
            bson_destroy(&roles);
            rc = parse_roles(ctx->inst, &it, cname, k, ctx->db, &roles, err);
            has_roles = true;
        } else if (!mfi_is_generic_arg(k)) {
            rc = mf_error_set(err, 40415, "BSON field '%s.%s' is an unknown field.", cname, k);
        }
    }
    if (rc == 0 && !has_roles)
        rc = mf_error_set(err, 40414, "BSON field '%s.roles' is missing but a required field",
                          cname);
    if (rc == 0 && bson_empty(&roles))
        rc = mf_error_set(err, MF_BadValue, "%s command requires a non-empty \"roles\" array",
                          cname);
    if (rc == 0)
        rc = mfi_user_load(ctx->inst, ctx->db, name, &have, &found, err);
    else
        bson_init(&have);
    if (rc == 0 && !found)
        rc = mf_error_set(err, MF_UserNotFound, "Could not find user \"%s\" for db \"%s\"", name,
                          ctx->db);
    if (rc == 0) {
        /* the user's roles, less those revoked, then those granted that
         * it lacks */
        bson_iter_t h, r;
        uint32_t i = 0;
        bson_t arr = BSON_INITIALIZER; /* built whole, then appended: it is read as it grows */
        for (int pass = 0; pass < 2; pass++) {
            const bson_t *src = pass == 0 ? &have : &roles;
            bson_iter_t list;
            if (pass == 0) {
                if (!bson_iter_init_find(&h, &have, "roles") || !BSON_ITER_HOLDS_ARRAY(&h) ||
                    !bson_iter_recurse(&h, &list))
                    continue;
            } else if (!grant || !bson_iter_init(&list, src)) {
                continue;
            }
            while (bson_iter_next(&list)) {
                bson_t one;
                bson_iter_t role, rdb;
                if (!mf_bsonx_doc_view(&list, &one) || !bson_iter_init_find(&role, &one, "role") ||
                    !bson_iter_init_find(&rdb, &one, "db") || !BSON_ITER_HOLDS_UTF8(&role) ||
                    !BSON_ITER_HOLDS_UTF8(&rdb))
                    continue; /* (a malformed entry a client wrote: dropped) */
                bool listed = false; /* in `roles` (pass 0), or already kept (pass 1) */
                const bson_t *among = pass == 0 ? &roles : &arr;
                if (bson_iter_init(&r, among))
                    while (bson_iter_next(&r) && !listed) {
                        bson_t o;
                        bson_iter_t orole, odb;
                        listed = mf_bsonx_doc_view(&r, &o) &&
                                 bson_iter_init_find(&orole, &o, "role") &&
                                 bson_iter_init_find(&odb, &o, "db") &&
                                 BSON_ITER_HOLDS_UTF8(&orole) && BSON_ITER_HOLDS_UTF8(&odb) &&
                                 strcmp(bson_iter_utf8(&orole, NULL),
                                        bson_iter_utf8(&role, NULL)) == 0 &&
                                 strcmp(bson_iter_utf8(&odb, NULL), bson_iter_utf8(&rdb, NULL)) ==
                                     0;
                    }
                bool keep = pass == 0 ? !(listed && !grant) : !listed;
                if (keep) {
                    char key[16];
                    const char *kk;
                    bson_uint32_to_string(i++, &kk, key, sizeof key);
                    BSON_APPEND_DOCUMENT(&arr, kk, &one);
                }
            }
        }
        BSON_APPEND_ARRAY(&now, "roles", &arr);
        bson_destroy(&arr);
        char id[512];
        rc = user_id(ctx->db, name, id, sizeof id, err);
        bson_t rep = BSON_INITIALIZER;
        bson_t *up = BCON_NEW("update", "system.users", "updates", "[", "{", "q", "{", "_id",
                              BCON_UTF8(id), "}", "u", "{", "$set", BCON_DOCUMENT(&now), "}", "}",
                              "]");
        if (rc == 0)
            rc = run_admin(ctx, up, &rep, err);
        else
            bson_destroy(up);
        bson_destroy(&rep);
    }
    bson_destroy(&roles);
    bson_destroy(&have);
    bson_destroy(&now);
    return rc;
}

int mfi_cmd_grant_roles_to_user(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    return change_roles(ctx, cmd, "grantRolesToUser", true, err);
}

int mfi_cmd_revoke_roles_from_user(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                   mf_error *err)
{
    (void)reply;
    return change_roles(ctx, cmd, "revokeRolesFromUser", false, err);
}

/* ------------------------------------------------------------- usersInfo */

/* A user document as usersInfo shows it: without credentials (unless
 * asked), with the mechanisms its credentials hold. */
static void user_info(const bson_t *doc, bool credentials, bool custom, bson_t *out)
{
    bson_iter_t it;
    bson_t mechs;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "credentials") == 0 && !credentials)
            continue;
        if (strcmp(k, "customData") == 0 && !custom)
            continue;
        mf_bsonx_append_iter(out, k, -1, &it);
    }
    BSON_APPEND_ARRAY_BEGIN(out, "mechanisms", &mechs);
    uint32_t n = 0;
    for (int m = MFI_SCRAM_SHA1; m <= MFI_SCRAM_SHA256; m++) {
        char path[64];
        bson_iter_t c;
        snprintf(path, sizeof path, "credentials.%s", mfi_scram_mech_name((mfi_scram_mech)m));
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &c)) {
            char key[16];
            const char *kk;
            bson_uint32_to_string(n++, &kk, key, sizeof key);
            bson_append_utf8(&mechs, kk, -1, mfi_scram_mech_name((mfi_scram_mech)m), -1);
        }
    }
    bson_append_array_end(out, &mechs);
}

/* One name of usersInfo's argument into `or` (an $or clause array). */
static int name_clause(mf_cmd_ctx *ctx, const bson_iter_t *v, bson_t *or, uint32_t *i,
                       mf_error *err)
{
    const char *user = NULL, *db = ctx->db;
    if (BSON_ITER_HOLDS_UTF8(v)) {
        user = bson_iter_utf8(v, NULL);
    } else if (BSON_ITER_HOLDS_DOCUMENT(v)) {
        bson_t d;
        bson_iter_t f;
        mf_bsonx_doc_view(v, &d);
        db = NULL;
        if (bson_iter_init_find(&f, &d, "user") && BSON_ITER_HOLDS_UTF8(&f))
            user = bson_iter_utf8(&f, NULL);
        if (bson_iter_init_find(&f, &d, "db") && BSON_ITER_HOLDS_UTF8(&f))
            db = bson_iter_utf8(&f, NULL);
        if (!user || !db)
            return mf_error_set(err, MF_BadValue,
                                "User name must contain a user and a db field");
    } else {
        return mf_error_set(err, MF_BadValue,
                            "User name must be either a string or an object");
    }
    char key[16];
    const char *kk;
    bson_t c;
    bson_uint32_to_string((*i)++, &kk, key, sizeof key);
    bson_append_document_begin(or, kk, -1, &c);
    BSON_APPEND_UTF8(&c, "user", user);
    BSON_APPEND_UTF8(&c, "db", db);
    bson_append_document_end(or, &c);
    return 0;
}

/* showPrivileges and showAuthenticationRestrictions: what the user
 * inherits through its roles (authz.c resolves it), after its own fields,
 * as mongod's resolveUserRoles adds them.  No user or role holds
 * authentication restrictions here (they are refused when given), so
 * their lists are the stored ones, if a document carries any. */
static int user_privileges(mf_cmd_ctx *ctx, const bson_t *doc, bool privs, bool restrictions,
                           bson_t *out, mf_error *err)
{
    mfi_grants g;
    bson_iter_t it;
    bson_t arr;
    int rc = mfi_grants_resolve(ctx->inst, doc, &g, err);
    if (rc)
        return rc;
    BSON_APPEND_ARRAY(out, "inheritedRoles", &g.roles);
    if (privs)
        mfi_privs_append(out, "inheritedPrivileges", &g.privs);
    BSON_APPEND_ARRAY_BEGIN(out, "inheritedAuthenticationRestrictions", &arr);
    bson_append_array_end(out, &arr);
    if (restrictions) {
        if (bson_iter_init_find(&it, doc, "authenticationRestrictions") &&
            BSON_ITER_HOLDS_ARRAY(&it)) {
            mf_bsonx_append_iter(out, "authenticationRestrictions", -1, &it);
        } else {
            BSON_APPEND_ARRAY_BEGIN(out, "authenticationRestrictions", &arr);
            bson_append_array_end(out, &arr);
        }
    }
    mfi_grants_free(&g);
    return 0;
}

int mfi_cmd_users_info(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_iter_t it, arg;
    bool creds = false, custom = true, privs = false, restrictions = false;
    mf_matcher *match = NULL;
    int rc = 0;
    bson_t filter = BSON_INITIALIZER;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    arg = it;
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "showCredentials") == 0)
            creds = bson_iter_as_bool(&it);
        else if (strcmp(k, "showCustomData") == 0)
            custom = bson_iter_as_bool(&it);
        else if (strcmp(k, "showPrivileges") == 0)
            privs = bson_iter_as_bool(&it);
        else if (strcmp(k, "showAuthenticationRestrictions") == 0)
            restrictions = bson_iter_as_bool(&it);
        else if (strcmp(k, "filter") == 0) {
            /* a $match on the documents as they are shown */
            bson_t f;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !mf_bsonx_doc_view(&it, &f))
                rc = mfi_type_error(err, "usersInfo", k, &it, "object");
            else if (!match)
                rc = mf_matcher_parse(&f, &match, err);
        } else if (!mfi_is_generic_arg(k)) {
            rc = mf_error_set(err, 40415, "BSON field 'usersInfo.%s' is an unknown field.", k);
        }
    }
    /* privileges need named users, and no filter (mongod's rule) */
    bool exact = !(BSON_ITER_HOLDS_NUMBER(&arg) && bson_iter_as_int64(&arg) == 1) &&
                 !BSON_ITER_HOLDS_DOCUMENT(&arg);
    if (BSON_ITER_HOLDS_DOCUMENT(&arg) && bson_iter_recurse(&arg, &it) &&
        !bson_iter_find(&it, "forAllDBs"))
        exact = true; /* {user, db} */
    if (rc == 0 && (privs || restrictions) && (!exact || match))
        rc = mf_error_set(err, MF_IllegalOperation,
                          "Privilege or restriction details require exact-match usersInfo "
                          "queries");
    /* the argument: 1 (the database's users), {forAllDBs: true}, a name,
     * {user, db}, or an array of names */
    if (rc == 0) {
        bson_t or;
        uint32_t i = 0;
        if (BSON_ITER_HOLDS_NUMBER(&arg) && bson_iter_as_int64(&arg) == 1) {
            BSON_APPEND_UTF8(&filter, "db", ctx->db);
        } else if (BSON_ITER_HOLDS_DOCUMENT(&arg) && bson_iter_recurse(&arg, &it) &&
                   bson_iter_find(&it, "forAllDBs")) {
            if (!bson_iter_as_bool(&it))
                rc = mf_error_set(err, MF_BadValue, "forAllDBs must be true");
        } else if (BSON_ITER_HOLDS_ARRAY(&arg)) {
            bson_iter_t el;
            bson_init(&or);
            bson_iter_recurse(&arg, &el);
            while (rc == 0 && bson_iter_next(&el))
                rc = name_clause(ctx, &el, &or, &i, err);
            if (i == 0) { /* no names: no users */
                bson_t in, none;
                BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &in);
                BSON_APPEND_ARRAY_BEGIN(&in, "$in", &none);
                bson_append_array_end(&in, &none);
                bson_append_document_end(&filter, &in);
            } else {
                BSON_APPEND_ARRAY(&filter, "$or", &or);
            }
            bson_destroy(&or);
        } else {
            BSON_APPEND_ARRAY_BEGIN(&filter, "$or", &or);
            rc = name_clause(ctx, &arg, &or, &i, err);
            bson_append_array_end(&filter, &or);
        }
    }
    bson_t r = BSON_INITIALIZER, users;
    if (rc == 0) {
        bson_t *find = BCON_NEW("find", "system.users", "filter", BCON_DOCUMENT(&filter), "sort",
                                "{", "user", BCON_INT32(1), "db", BCON_INT32(1), "}", "batchSize",
                                BCON_INT32(1000000));
        rc = find ? mfi_command_direct(ctx->inst, "admin", find, &r, err) : mf_error_oom(err);
        if (find)
            bson_destroy(find);
    }
    if (rc == 0) {
        bson_iter_t b;
        uint32_t n = 0;
        BSON_APPEND_ARRAY_BEGIN(reply, "users", &users);
        if (bson_iter_init(&b, &r) && bson_iter_find_descendant(&b, "cursor.firstBatch", &b) &&
            bson_iter_recurse(&b, &b))
            while (bson_iter_next(&b)) {
                bson_t d, one = BSON_INITIALIZER;
                char key[16];
                const char *kk;
                if (rc || !mf_bsonx_doc_view(&b, &d)) {
                    bson_destroy(&one);
                    continue;
                }
                user_info(&d, creds, custom, &one);
                if (privs || restrictions)
                    rc = user_privileges(ctx, &d, privs, restrictions, &one, err);
                if (rc == 0 && (!match || mf_matcher_match(match, &one))) {
                    bson_uint32_to_string(n++, &kk, key, sizeof key);
                    bson_append_document(&users, kk, -1, &one);
                }
                bson_destroy(&one);
            }
        bson_append_array_end(reply, &users);
    }
    bson_destroy(&r);
    bson_destroy(&filter);
    mf_matcher_free(match);
    return rc;
}
