/*
 * cmd_roles.c -- user-defined roles: createRole, updateRole, dropRole,
 * dropAllRolesFromDatabase, rolesInfo, grantPrivilegesToRole,
 * revokePrivilegesFromRole, grantRolesToRole, revokeRolesFromRole, as
 * mongod 7.0's user_management_commands.
 *
 * A role is one document of admin.system.roles, as mongod stores it:
 *
 *   {_id: "<db>.<role>", role, db,
 *    privileges: [{resource: {db, collection} | {cluster: true} |
 *                            {anyResource: true},
 *                  actions: [...]}],
 *    roles: [{role, db}, ...]}
 *
 * with mongod's unique index role_1_db_1 {role: 1, db: 1}.  Privileges on
 * the same resource are merged into one, their actions sorted and once
 * each.  A role of a database other than admin may hold privileges on its
 * own database only, and inherit roles of its own database only
 * (InvalidRoleModification 49); a role may not inherit itself, nor a role
 * that inherits it (a cycle).  Dropping a role takes it out of every
 * user's and role's roles.
 *
 * The built-in roles exist without documents (authz.c holds their
 * privileges) and cannot be created, changed or dropped.  What a
 * privilege lets a user do is access control's (authz.c): these commands
 * keep and show the roles.
 */
#include "command_int.h"
#include "authz_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- role documents */

static int role_load(mf_instance *inst, const char *db, const char *role, bson_t *out,
                     bool *found, mf_error *err)
{
    return mfi_authz_load(inst, "system.roles", db, role, out, found, err);
}

int mfi_role_exists(mf_instance *inst, const char *role, const char *db, bool *exists,
                    mf_error *err)
{
    bson_t doc;
    *exists = mfi_role_is_builtin(role, db);
    if (*exists)
        return 0;
    int rc = role_load(inst, db, role, &doc, exists, err);
    bson_destroy(&doc);
    return rc;
}

static int run_admin(mf_cmd_ctx *ctx, bson_t *cmd, bson_t *reply, mf_error *err)
{
    return mfi_authz_run(ctx->inst, "system.roles", cmd, reply, err);
}

static int run_admin_quiet(mf_cmd_ctx *ctx, bson_t *cmd, mf_error *err)
{
    bson_t r = BSON_INITIALIZER;
    int rc = run_admin(ctx, cmd, &r, err);
    bson_destroy(&r);
    return rc;
}

/* The command's name argument (a role), checked. */
static int role_name_arg(const bson_t *cmd, const char *cname, const char **name, mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mfi_type_error(err, cname, cname, &it, "string");
    *name = bson_iter_utf8(&it, NULL);
    return 0;
}

/* ----------------------------------------------------- names and lists */

typedef struct role_name {
    char role[256];
    char db[128];
} role_name;

typedef struct role_list {
    role_name *v;
    size_t n, cap;
} role_list;

static void list_free(role_list *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

static bool list_has(const role_list *l, const char *role, const char *db)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].role, role) == 0 && strcmp(l->v[i].db, db) == 0)
            return true;
    return false;
}

static int list_add(role_list *l, const char *role, const char *db, mf_error *err)
{
    if (list_has(l, role, db))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        role_name *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        l->v = v;
        l->cap = cap;
    }
    if (strlen(role) >= sizeof l->v->role || strlen(db) >= sizeof l->v->db)
        return mf_error_set(err, MF_BadValue, "role name too long: %s@%s", role, db);
    snprintf(l->v[l->n].role, sizeof l->v->role, "%s", role);
    snprintf(l->v[l->n].db, sizeof l->v->db, "%s", db);
    l->n++;
    return 0;
}

/* A roles argument (strings of `db`, or {role, db}) into `out`. */
static int parse_role_names(const bson_iter_t *it, const char *cname, const char *field,
                            const char *db, role_list *out, mf_error *err)
{
    bson_iter_t r;
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mfi_type_error(err, cname, field, it, "array");
    bson_iter_recurse(it, &r);
    while (bson_iter_next(&r)) {
        const char *role = NULL, *rdb = db;
        if (BSON_ITER_HOLDS_UTF8(&r)) {
            role = bson_iter_utf8(&r, NULL);
        } else if (BSON_ITER_HOLDS_DOCUMENT(&r)) {
            bson_t d;
            bson_iter_t f;
            mf_bsonx_doc_view(&r, &d);
            rdb = NULL;
            if (bson_iter_init_find(&f, &d, "role") && BSON_ITER_HOLDS_UTF8(&f))
                role = bson_iter_utf8(&f, NULL);
            if (bson_iter_init_find(&f, &d, "db") && BSON_ITER_HOLDS_UTF8(&f))
                rdb = bson_iter_utf8(&f, NULL);
            if (!role || !rdb)
                return mf_error_set(err, 40414,
                                    "BSON field 'RoleName.%s' is missing but a required field",
                                    role ? "db" : "role");
        } else {
            return mf_error_set(err, MF_BadValue, "Role names must be either strings or objects");
        }
        int rc = list_add(out, role, rdb, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Every role of `l` exists: RoleNotFound "Could not find role(s): ...". */
static int roles_exist(mf_cmd_ctx *ctx, const role_list *l, const char *prefix, mf_error *err)
{
    char missing[1024] = "";
    int n = 0;
    for (size_t i = 0; i < l->n; i++) {
        bool ok;
        int rc = mfi_role_exists(ctx->inst, l->v[i].role, l->v[i].db, &ok, err);
        if (rc)
            return rc;
        if (!ok) {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof missing - used, "%s%s@%s", n ? ", " : "",
                     l->v[i].role, l->v[i].db);
            n++;
        }
    }
    if (n)
        return mf_error_set(err, MF_RoleNotFound, "%sCould not find role%s: %s", prefix,
                            n > 1 ? "s" : "", missing);
    return 0;
}

static void append_names(bson_t *out, const char *key, const role_list *l)
{
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(out, key, &arr);
    for (size_t i = 0; i < l->n; i++) {
        char k[16];
        const char *kk;
        bson_t d;
        bson_uint32_to_string((uint32_t)i, &kk, k, sizeof k);
        bson_append_document_begin(&arr, kk, -1, &d);
        BSON_APPEND_UTF8(&d, "role", l->v[i].role);
        BSON_APPEND_UTF8(&d, "db", l->v[i].db);
        bson_append_document_end(&arr, &d);
    }
    bson_append_array_end(out, &arr);
}

/* The roles a role document inherits directly. */
static void direct_roles(const bson_t *doc, role_list *out)
{
    bson_iter_t it, r;
    mf_error e;
    if (!bson_iter_init_find(&it, doc, "roles") || !bson_iter_recurse(&it, &r))
        return;
    while (bson_iter_next(&r)) {
        bson_t d;
        bson_iter_t role, db;
        if (mf_bsonx_doc_view(&r, &d) && bson_iter_init_find(&role, &d, "role") &&
            bson_iter_init_find(&db, &d, "db") && BSON_ITER_HOLDS_UTF8(&role) &&
            BSON_ITER_HOLDS_UTF8(&db))
            list_add(out, bson_iter_utf8(&role, NULL), bson_iter_utf8(&db, NULL), &e);
    }
}

/* Every role `start` leads to, transitively (not `start` themselves unless
 * reached again), into `out`. */
static int inherited(mf_cmd_ctx *ctx, const role_list *start, role_list *out, mf_error *err)
{
    role_list todo = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < start->n; i++)
        rc = list_add(&todo, start->v[i].role, start->v[i].db, err);
    for (size_t i = 0; rc == 0 && i < todo.n; i++) {
        role_name r = todo.v[i];
        rc = list_add(out, r.role, r.db, err);
        if (rc || mfi_role_is_builtin(r.role, r.db))
            continue;
        bson_t doc;
        bool found;
        if ((rc = role_load(ctx->inst, r.db, r.role, &doc, &found, err)) == 0 && found) {
            role_list next = {0};
            direct_roles(&doc, &next);
            for (size_t j = 0; rc == 0 && j < next.n; j++)
                rc = list_add(&todo, next.v[j].role, next.v[j].db, err);
            list_free(&next);
        }
        bson_destroy(&doc);
    }
    list_free(&todo);
    return rc;
}

/* checkOkayToGrantRolesToRole. */
static int may_inherit(mf_cmd_ctx *ctx, const char *role, const char *db, const role_list *add,
                       mf_error *err)
{
    for (size_t i = 0; i < add->n; i++) {
        if (strcmp(add->v[i].role, role) == 0 && strcmp(add->v[i].db, db) == 0)
            return mf_error_set(err, 49, "Cannot grant role %s@%s to itself.", role, db);
        if (strcmp(db, "admin") != 0 && strcmp(add->v[i].db, db) != 0)
            return mf_error_set(err, 49,
                                "Roles on the '%s' database cannot be granted roles from other "
                                "databases",
                                db);
    }
    char prefix[400];
    snprintf(prefix, sizeof prefix, "Cannot grant roles to '%s@%s': ", role, db);
    int rc = roles_exist(ctx, add, prefix, err);
    role_list all = {0};
    if (rc == 0)
        rc = inherited(ctx, add, &all, err);
    if (rc == 0 && list_has(&all, role, db))
        rc = mf_error_set(err, 49, "Granting roles to %s@%s would introduce a cycle in the role "
                                   "graph",
                          role, db);
    list_free(&all);
    return rc;
}

/* ---------------------------------------------------------- privileges */

/* One resource, checked, into `out` as it is stored. */
static int parse_resource(const bson_iter_t *it, bson_t *out, char *db_out, size_t cap,
                          int *kind, mf_error *err)
{
    bson_t d;
    bson_iter_t f;
    const char *db = NULL, *coll = NULL;
    bool cluster = false, any = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !mf_bsonx_doc_view(it, &d))
        return mfi_type_error(err, "Privilege", "resource", it, "object");
    bson_iter_init(&f, &d);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "db") == 0 || strcmp(k, "collection") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return mfi_type_error(err, "ResourcePattern", k, &f, "string");
            if (k[0] == 'd')
                db = bson_iter_utf8(&f, NULL);
            else
                coll = bson_iter_utf8(&f, NULL);
        } else if (strcmp(k, "cluster") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&f) || !bson_iter_bool(&f))
                return mf_error_set(err, MF_BadValue, "resource: {cluster: true} is the only "
                                                      "form of a cluster resource");
            cluster = true;
        } else if (strcmp(k, "anyResource") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&f) || !bson_iter_bool(&f))
                return mf_error_set(err, MF_BadValue, "resource: {anyResource: true} is the "
                                                      "only form of that resource");
            any = true;
        } else {
            return mf_error_set(err, 40415, "BSON field 'ResourcePattern.%s' is an unknown field.",
                                k);
        }
    }
    int forms = (cluster ? 1 : 0) + (any ? 1 : 0) + (db || coll ? 1 : 0);
    if (forms != 1 || (!cluster && !any && (!db || !coll)))
        return mf_error_set(err, MF_BadValue,
                            "resource pattern must contain 'db' and 'collection' fields, or "
                            "'cluster', or 'anyResource'");
    bson_init(out);
    db_out[0] = '\0';
    if (cluster) {
        BSON_APPEND_BOOL(out, "cluster", true);
        *kind = 1;
    } else if (any) {
        BSON_APPEND_BOOL(out, "anyResource", true);
        *kind = 2;
    } else {
        BSON_APPEND_UTF8(out, "db", db);
        BSON_APPEND_UTF8(out, "collection", coll);
        snprintf(db_out, cap, "%s", db);
        *kind = 0;
    }
    return 0;
}

typedef struct priv {
    bson_t resource;
    char db[128];
    int kind;            /* 0: {db, collection}; 1: cluster; 2: anyResource;
                            3: system_buckets (a built-in role's) */
    int acts[MFA__COUNT]; /* action numbers, ascending: mongod's order */
    size_t nacts;
} priv;

typedef struct priv_list {
    priv *v;
    size_t n, cap;
} priv_list;

static void privs_free(priv_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        bson_destroy(&l->v[i].resource);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Action `a` added to `p` once, kept in order. */
static void priv_add_action(priv *p, int a)
{
    size_t at = 0;
    while (at < p->nacts && p->acts[at] < a)
        at++;
    if (at < p->nacts && p->acts[at] == a)
        return;
    memmove(&p->acts[at + 1], &p->acts[at], (p->nacts - at) * sizeof *p->acts);
    p->acts[at] = a;
    p->nacts++;
}

/* The privilege with resource `r` in `l` (added empty when missing). */
static priv *privs_find(priv_list *l, const bson_t *r, const char *db, int kind, bool add,
                        mf_error *err)
{
    for (size_t i = 0; i < l->n; i++)
        if (bson_equal(&l->v[i].resource, r))
            return &l->v[i];
    if (!add)
        return NULL;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        priv *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            mf_error_oom(err);
            return NULL;
        }
        l->v = v;
        l->cap = cap;
    }
    priv *p = &l->v[l->n++];
    memset(p, 0, sizeof *p);
    bson_copy_to(r, &p->resource);
    snprintf(p->db, sizeof p->db, "%s", db);
    p->kind = kind;
    return p;
}

/* A privileges argument (or a stored privileges array), merged by resource
 * into `out`.  Unknown actions: BadValue "Unknown action type(s) in
 * privilege set: 'a', 'b'". */
static int parse_privileges(const bson_iter_t *it, const char *cname, priv_list *out,
                            mf_error *err)
{
    bson_iter_t p;
    char unknown[512] = "";
    int nunknown = 0;
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mfi_type_error(err, cname, "privileges", it, "array");
    bson_iter_recurse(it, &p);
    while (bson_iter_next(&p)) {
        bson_t d, res = BSON_INITIALIZER;
        bson_iter_t f, acts;
        bool has_res = false, has_acts = false;
        char db[128];
        int kind = 0, rc = 0;
        if (!BSON_ITER_HOLDS_DOCUMENT(&p) || !mf_bsonx_doc_view(&p, &d))
            return mfi_type_error(err, cname, "privileges", &p, "object");
        bson_iter_init(&f, &d);
        while (rc == 0 && bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (strcmp(k, "resource") == 0) {
                bson_destroy(&res);
                rc = parse_resource(&f, &res, db, sizeof db, &kind, err);
                if (rc)
                    bson_init(&res);
                has_res = rc == 0;
            } else if (strcmp(k, "actions") == 0) {
                if (!BSON_ITER_HOLDS_ARRAY(&f))
                    rc = mfi_type_error(err, "Privilege", k, &f, "array");
                acts = f;
                has_acts = true;
            } else {
                rc = mf_error_set(err, 40415, "BSON field 'Privilege.%s' is an unknown field.", k);
            }
        }
        if (rc == 0 && (!has_res || !has_acts))
            rc = mf_error_set(err, 40414, "BSON field 'Privilege.%s' is missing but a required field",
                              has_res ? "actions" : "resource");
        priv *pv = rc == 0 ? privs_find(out, &res, db, kind, true, err) : NULL;
        if (rc == 0 && !pv)
            rc = MF_InternalError;
        bson_iter_t a;
        if (rc == 0 && bson_iter_recurse(&acts, &a))
            while (bson_iter_next(&a)) {
                const char *name = BSON_ITER_HOLDS_UTF8(&a) ? bson_iter_utf8(&a, NULL) : NULL;
                int canon = name ? mfi_action_find(name) : -1;
                if (!name) {
                    rc = mfi_type_error(err, "Privilege", "actions", &a, "string");
                    break;
                }
                if (canon < 0) {
                    size_t used = strlen(unknown);
                    if (!strstr(unknown, name))
                        snprintf(unknown + used, sizeof unknown - used, " '%s',", name), nunknown++;
                    continue;
                }
                priv_add_action(pv, canon);
            }
        bson_destroy(&res);
        if (rc)
            return rc;
    }
    if (nunknown) {
        unknown[strlen(unknown) - 1] = '\0'; /* the last comma */
        return mf_error_set(err, MF_BadValue, "Unknown action type%s in privilege set:%s",
                            nunknown > 1 ? "s" : "", unknown);
    }
    return 0;
}

/* checkOkayToGrantPrivilegesToRole. */
static int may_hold(const char *role, const char *db, const priv_list *l, mf_error *err)
{
    if (strcmp(db, "admin") == 0)
        return 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind != 0 || strcmp(l->v[i].db, db) != 0)
            return mf_error_set(err, 49,
                                "Roles on the '%s' database cannot be granted privileges that "
                                "target other databases or the cluster",
                                db);
    (void)role;
    return 0;
}

static void append_privs(bson_t *out, const char *key, const priv_list *l)
{
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(out, key, &arr);
    uint32_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].nacts == 0)
            continue;
        char k[16];
        const char *kk;
        bson_t d, a;
        bson_uint32_to_string(n++, &kk, k, sizeof k);
        bson_append_document_begin(&arr, kk, -1, &d);
        BSON_APPEND_DOCUMENT(&d, "resource", &l->v[i].resource);
        BSON_APPEND_ARRAY_BEGIN(&d, "actions", &a);
        for (size_t j = 0; j < l->v[i].nacts; j++) {
            bson_uint32_to_string((uint32_t)j, &kk, k, sizeof k);
            bson_append_utf8(&a, kk, -1, mfi_action_name(l->v[i].acts[j]), -1);
        }
        bson_append_array_end(&d, &a);
        bson_append_document_end(&arr, &d);
    }
    bson_append_array_end(out, &arr);
}

/* The privileges a role document holds, into `out`. */
static int stored_privs(const bson_t *doc, priv_list *out, mf_error *err)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "privileges"))
        return 0;
    return parse_privileges(&it, "role", out, err);
}

/* ------------------------------------------------------------ createRole */

static int ensure_roles_index(mf_cmd_ctx *ctx, mf_error *err)
{
    return run_admin_quiet(ctx,
                           BCON_NEW("createIndexes", "system.roles", "indexes", "[", "{", "key",
                                    "{", "role", BCON_INT32(1), "db", BCON_INT32(1), "}", "name",
                                    BCON_UTF8("role_1_db_1"), "unique", BCON_BOOL(true), "}",
                                    "]"),
                           err);
}

/* The arguments of createRole and updateRole. */
typedef struct role_args {
    const char *name;
    bool has_privs, has_roles;
    priv_list privs;
    role_list roles;
} role_args;

static void role_args_free(role_args *a)
{
    privs_free(&a->privs);
    list_free(&a->roles);
}

static int parse_role_args(mf_cmd_ctx *ctx, const bson_t *cmd, const char *cname, role_args *a,
                           mf_error *err)
{
    bson_iter_t it;
    int rc;
    memset(a, 0, sizeof *a);
    if ((rc = role_name_arg(cmd, cname, &a->name, err)) != 0)
        return rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "privileges") == 0) {
            privs_free(&a->privs);
            a->has_privs = true;
            if ((rc = parse_privileges(&it, cname, &a->privs, err)) != 0)
                return rc;
        } else if (strcmp(k, "roles") == 0) {
            list_free(&a->roles);
            a->has_roles = true;
            if ((rc = parse_role_names(&it, cname, k, ctx->db, &a->roles, err)) != 0)
                return rc;
        } else if (strcmp(k, "authenticationRestrictions") == 0) {
            return mf_error_set(err, MF_NotImplemented,
                                "authenticationRestrictions are not supported by this server");
        } else if (!mfi_is_generic_arg(k)) {
            return mf_error_set(err, 40415, "BSON field '%s.%s' is an unknown field.", cname, k);
        }
    }
    return 0;
}

static void role_doc(const char *db, const char *name, const priv_list *privs,
                     const role_list *roles, bson_t *out)
{
    char id[512];
    snprintf(id, sizeof id, "%s.%s", db, name);
    bson_init(out);
    BSON_APPEND_UTF8(out, "_id", id);
    BSON_APPEND_UTF8(out, "role", name);
    BSON_APPEND_UTF8(out, "db", db);
    append_privs(out, "privileges", privs);
    append_names(out, "roles", roles);
}

int mfi_cmd_create_role(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    role_args a;
    int rc = parse_role_args(ctx, cmd, "createRole", &a, err);
    if (rc == 0 && !a.has_privs)
        rc = mf_error_set(err, 40414,
                          "BSON field 'createRole.privileges' is missing but a required field");
    if (rc == 0 && !a.has_roles)
        rc = mf_error_set(err, 40414,
                          "BSON field 'createRole.roles' is missing but a required field");
    if (rc == 0 && a.name[0] == '\0')
        rc = mf_error_set(err, MF_BadValue, "Role name must be non-empty");
    if (rc == 0 && strcmp(ctx->db, "local") == 0)
        rc = mf_error_set(err, MF_BadValue, "Cannot create roles in the local database");
    if (rc == 0 && strcmp(ctx->db, "$external") == 0)
        rc = mf_error_set(err, MF_BadValue, "Cannot create roles in the $external database");
    if (rc == 0 && mfi_role_is_builtin(a.name, ctx->db))
        rc = mf_error_set(err, MF_BadValue,
                          "Cannot create roles with the same name as a built-in role");
    if (rc == 0)
        rc = may_inherit(ctx, a.name, ctx->db, &a.roles, err);
    if (rc == 0)
        rc = may_hold(a.name, ctx->db, &a.privs, err);
    if (rc == 0)
        rc = ensure_roles_index(ctx, err);
    if (rc == 0) {
        bson_t doc, r = BSON_INITIALIZER;
        role_doc(ctx->db, a.name, &a.privs, &a.roles, &doc);
        rc = run_admin(ctx, BCON_NEW("insert", "system.roles", "documents", "[",
                                     BCON_DOCUMENT(&doc), "]"),
                       &r, err);
        if (rc == MF_OperationFailed)
            rc = mf_error_set(err, 51002, "Role \"%s@%s\" already exists", a.name, ctx->db);
        bson_destroy(&r);
        bson_destroy(&doc);
    }
    role_args_free(&a);
    return rc;
}

/* Replace role name@db's document fields `set` ($set); RoleNotFound. */
static int set_role(mf_cmd_ctx *ctx, const char *name, const bson_t *set, mf_error *err)
{
    char id[512];
    snprintf(id, sizeof id, "%s.%s", ctx->db, name);
    bson_t r = BSON_INITIALIZER;
    int rc = run_admin(ctx, BCON_NEW("update", "system.roles", "updates", "[", "{", "q", "{", "_id",
                                     BCON_UTF8(id), "}", "u", "{", "$set", BCON_DOCUMENT(set),
                                     "}", "}", "]"),
                       &r, err);
    bson_iter_t it;
    if (rc == 0 && bson_iter_init_find(&it, &r, "n") && bson_iter_as_int64(&it) == 0)
        rc = mf_error_set(err, MF_RoleNotFound, "Role %s@%s not found", name, ctx->db);
    bson_destroy(&r);
    return rc;
}

/* The stored role name@db (not built in), or RoleNotFound / BadValue. */
static int load_own_role(mf_cmd_ctx *ctx, const char *name, bson_t *doc, mf_error *err)
{
    bool found;
    if (mfi_role_is_builtin(name, ctx->db)) {
        bson_init(doc);
        return mf_error_set(err, MF_BadValue, "%s@%s is a built-in role and cannot be modified",
                            name, ctx->db);
    }
    int rc = role_load(ctx->inst, ctx->db, name, doc, &found, err);
    if (rc == 0 && !found)
        rc = mf_error_set(err, MF_RoleNotFound, "Could not find role: %s@%s", name, ctx->db);
    return rc;
}

int mfi_cmd_update_role(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    role_args a;
    bson_t doc = BSON_INITIALIZER, set = BSON_INITIALIZER;
    int rc = parse_role_args(ctx, cmd, "updateRole", &a, err);
    if (rc == 0 && !a.has_privs && !a.has_roles)
        rc = mf_error_set(err, MF_BadValue,
                          "Must specify at least one field to update in updateRole");
    if (rc == 0) {
        bson_destroy(&doc);
        rc = load_own_role(ctx, a.name, &doc, err);
    }
    if (rc == 0 && a.has_roles)
        rc = may_inherit(ctx, a.name, ctx->db, &a.roles, err);
    if (rc == 0 && a.has_privs)
        rc = may_hold(a.name, ctx->db, &a.privs, err);
    if (rc == 0) {
        if (a.has_privs)
            append_privs(&set, "privileges", &a.privs);
        if (a.has_roles)
            append_names(&set, "roles", &a.roles);
        rc = set_role(ctx, a.name, &set, err);
    }
    bson_destroy(&doc);
    bson_destroy(&set);
    role_args_free(&a);
    return rc;
}

/* grantPrivilegesToRole (grant) or revokePrivilegesFromRole. */
static int change_privs(mf_cmd_ctx *ctx, const bson_t *cmd, const char *cname, bool grant,
                        mf_error *err)
{
    const char *name;
    bson_iter_t it;
    priv_list given = {0}, have = {0};
    bool has = false;
    bson_t doc = BSON_INITIALIZER, set = BSON_INITIALIZER;
    int rc = role_name_arg(cmd, cname, &name, err);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "privileges") == 0) {
            privs_free(&given);
            has = true;
            rc = parse_privileges(&it, cname, &given, err);
        } else if (!mfi_is_generic_arg(k)) {
            rc = mf_error_set(err, 40415, "BSON field '%s.%s' is an unknown field.", cname, k);
        }
    }
    if (rc == 0 && !has)
        rc = mf_error_set(err, 40414, "BSON field '%s.privileges' is missing but a required field",
                          cname);
    if (rc == 0 && given.n == 0)
        rc = mf_error_set(err, MF_BadValue, "%s command requires a non-empty \"privileges\" array",
                          cname);
    if (rc == 0) {
        bson_destroy(&doc);
        rc = load_own_role(ctx, name, &doc, err);
    }
    if (rc == 0 && grant)
        rc = may_hold(name, ctx->db, &given, err);
    if (rc == 0)
        rc = stored_privs(&doc, &have, err);
    for (size_t i = 0; rc == 0 && i < given.n; i++) {
        priv *p = privs_find(&have, &given.v[i].resource, given.v[i].db, given.v[i].kind, grant,
                             err);
        if (!p) {
            if (grant)
                rc = MF_InternalError;
            continue;
        }
        for (size_t j = 0; j < given.v[i].nacts; j++) {
            if (grant) {
                priv_add_action(p, given.v[i].acts[j]);
            } else {
                for (size_t x = 0; x < p->nacts; x++)
                    if (p->acts[x] == given.v[i].acts[j]) {
                        memmove(&p->acts[x], &p->acts[x + 1], (p->nacts - x - 1) * sizeof *p->acts);
                        p->nacts--;
                        break;
                    }
            }
        }
    }
    if (rc == 0) {
        append_privs(&set, "privileges", &have);
        rc = set_role(ctx, name, &set, err);
    }
    privs_free(&given);
    privs_free(&have);
    bson_destroy(&doc);
    bson_destroy(&set);
    return rc;
}

int mfi_cmd_grant_privileges_to_role(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                     mf_error *err)
{
    (void)reply;
    return change_privs(ctx, cmd, "grantPrivilegesToRole", true, err);
}

int mfi_cmd_revoke_privileges_from_role(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                        mf_error *err)
{
    (void)reply;
    return change_privs(ctx, cmd, "revokePrivilegesFromRole", false, err);
}

/* grantRolesToRole (grant) or revokeRolesFromRole. */
static int change_inherited(mf_cmd_ctx *ctx, const bson_t *cmd, const char *cname, bool grant,
                            mf_error *err)
{
    const char *name;
    bson_iter_t it;
    role_list given = {0}, have = {0}, now = {0};
    bool has = false;
    bson_t doc = BSON_INITIALIZER, set = BSON_INITIALIZER;
    int rc = role_name_arg(cmd, cname, &name, err);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "roles") == 0) {
            list_free(&given);
            has = true;
            rc = parse_role_names(&it, cname, k, ctx->db, &given, err);
        } else if (!mfi_is_generic_arg(k)) {
            rc = mf_error_set(err, 40415, "BSON field '%s.%s' is an unknown field.", cname, k);
        }
    }
    if (rc == 0 && !has)
        rc = mf_error_set(err, 40414, "BSON field '%s.roles' is missing but a required field",
                          cname);
    if (rc == 0 && given.n == 0)
        rc = mf_error_set(err, MF_BadValue, "%s command requires a non-empty \"roles\" array",
                          cname);
    if (rc == 0) {
        bson_destroy(&doc);
        rc = load_own_role(ctx, name, &doc, err);
    }
    if (rc == 0)
        rc = grant ? may_inherit(ctx, name, ctx->db, &given, err)
                   : roles_exist(ctx, &given, "", err);
    if (rc == 0) {
        direct_roles(&doc, &have);
        for (size_t i = 0; rc == 0 && i < have.n; i++)
            if (grant || !list_has(&given, have.v[i].role, have.v[i].db))
                rc = list_add(&now, have.v[i].role, have.v[i].db, err);
        for (size_t i = 0; rc == 0 && grant && i < given.n; i++)
            rc = list_add(&now, given.v[i].role, given.v[i].db, err);
    }
    if (rc == 0) {
        append_names(&set, "roles", &now);
        rc = set_role(ctx, name, &set, err);
    }
    list_free(&given);
    list_free(&have);
    list_free(&now);
    bson_destroy(&doc);
    bson_destroy(&set);
    return rc;
}

int mfi_cmd_grant_roles_to_role(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    return change_inherited(ctx, cmd, "grantRolesToRole", true, err);
}

int mfi_cmd_revoke_roles_from_role(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                   mf_error *err)
{
    (void)reply;
    return change_inherited(ctx, cmd, "revokeRolesFromRole", false, err);
}

/* ------------------------------------------------------------- dropping */

/* Take role@db out of every user's and role's roles. */
static int forget_role(mf_cmd_ctx *ctx, const char *role, const char *db, mf_error *err)
{
    int rc = 0;
    static const char *const colls[] = {"system.users", "system.roles"};
    for (size_t i = 0; rc == 0 && i < 2; i++)
        rc = run_admin_quiet(ctx,
                             BCON_NEW("update", BCON_UTF8(colls[i]), "updates", "[", "{", "q",
                                      "{", "roles", "{", "$elemMatch", "{", "role",
                                      BCON_UTF8(role), "db", BCON_UTF8(db), "}", "}", "}", "u",
                                      "{", "$pull", "{", "roles", "{", "role", BCON_UTF8(role),
                                      "db", BCON_UTF8(db), "}", "}", "}", "multi",
                                      BCON_BOOL(true), "}", "]"),
                             err);
    return rc;
}

int mfi_cmd_drop_role(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    const char *name;
    bson_iter_t it;
    int rc = role_name_arg(cmd, "dropRole", &name, err);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (rc == 0 && bson_iter_next(&it))
        if (!mfi_is_generic_arg(bson_iter_key(&it)))
            rc = mf_error_set(err, 40415, "BSON field 'dropRole.%s' is an unknown field.",
                              bson_iter_key(&it));
    if (rc == 0 && mfi_role_is_builtin(name, ctx->db))
        rc = mf_error_set(err, 49, "%s@%s is a built-in role and cannot be modified", name,
                          ctx->db);
    bson_t doc = BSON_INITIALIZER;
    bool found = false;
    if (rc == 0) {
        bson_destroy(&doc);
        rc = role_load(ctx->inst, ctx->db, name, &doc, &found, err);
    }
    if (rc == 0 && !found)
        rc = mf_error_set(err, MF_RoleNotFound, "Role %s@%s not found", name, ctx->db);
    if (rc == 0)
        rc = forget_role(ctx, name, ctx->db, err);
    if (rc == 0) {
        char id[512];
        snprintf(id, sizeof id, "%s.%s", ctx->db, name);
        rc = run_admin_quiet(ctx,
                             BCON_NEW("delete", "system.roles", "deletes", "[", "{", "q", "{",
                                      "_id", BCON_UTF8(id), "}", "limit", BCON_INT32(1), "}",
                                      "]"),
                             err);
    }
    bson_destroy(&doc);
    return rc;
}

int mfi_cmd_drop_all_roles_from_database(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                         mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it))
        if (!mfi_is_generic_arg(bson_iter_key(&it)))
            return mf_error_set(err, 40415,
                                "BSON field 'dropAllRolesFromDatabase.%s' is an unknown field.",
                                bson_iter_key(&it));
    bson_t r = BSON_INITIALIZER;
    int rc = run_admin(ctx, BCON_NEW("find", "system.roles", "filter", "{", "db",
                                     BCON_UTF8(ctx->db), "}", "batchSize", BCON_INT32(1000000)),
                       &r, err);
    int64_t n = 0;
    bson_iter_t b;
    if (rc == 0 && bson_iter_init(&b, &r) && bson_iter_find_descendant(&b, "cursor.firstBatch", &b) &&
        bson_iter_recurse(&b, &b))
        while (rc == 0 && bson_iter_next(&b)) {
            bson_t d;
            bson_iter_t role;
            if (mf_bsonx_doc_view(&b, &d) && bson_iter_init_find(&role, &d, "role") &&
                BSON_ITER_HOLDS_UTF8(&role))
                rc = forget_role(ctx, bson_iter_utf8(&role, NULL), ctx->db, err);
        }
    bson_destroy(&r);
    if (rc == 0) {
        bson_t dr = BSON_INITIALIZER;
        rc = run_admin(ctx, BCON_NEW("delete", "system.roles", "deletes", "[", "{", "q", "{", "db",
                                     BCON_UTF8(ctx->db), "}", "limit", BCON_INT32(0), "}", "]"),
                       &dr, err);
        bson_iter_t nn;
        if (rc == 0 && bson_iter_init_find(&nn, &dr, "n"))
            n = bson_iter_as_int64(&nn);
        bson_destroy(&dr);
    }
    if (rc == 0)
        BSON_APPEND_INT32(reply, "n", (int32_t)n);
    return rc;
}

/* ------------------------------------------------------------- rolesInfo */

/* A built-in role's privileges (authz.c) into `l`, as priv entries. */
static int builtin_privs(const char *role, const char *db, priv_list *l, mf_error *err)
{
    mfi_privs b = {0};
    int rc = mfi_builtin_privs(role, db, &b, err);
    for (size_t i = 0; rc == 0 && i < b.n; i++) {
        bson_t r = BSON_INITIALIZER;
        int kind = 0;
        if (b.v[i].kind == MFR_CLUSTER) {
            BSON_APPEND_BOOL(&r, "cluster", true);
            kind = 1;
        } else if (b.v[i].kind == MFR_ANY) {
            BSON_APPEND_BOOL(&r, "anyResource", true);
            kind = 2;
        } else if (b.v[i].kind == MFR_ANY_BUCKETS) {
            BSON_APPEND_UTF8(&r, "system_buckets", "");
            kind = 3;
        } else {
            BSON_APPEND_UTF8(&r, "db", b.v[i].db);
            BSON_APPEND_UTF8(&r, "collection", b.v[i].coll);
        }
        priv *p = privs_find(l, &r, b.v[i].db, kind, true, err);
        if (!p)
            rc = MF_InternalError;
        /* anyAction stands for every action and is shown alone */
        bool any = mfi_actset_has(&b.v[i].acts, MFA_anyAction);
        for (int x = 0; p && x < MFA__COUNT; x++)
            if (any ? x == MFA_anyAction : mfi_actset_has(&b.v[i].acts, x))
                priv_add_action(p, x);
        bson_destroy(&r);
    }
    mfi_privs_free(&b);
    return rc;
}

/* One role's rolesInfo entry.  A built-in role shows no roles (its
 * privileges are its own, flattened, as mongod shows them), in the field
 * order of mongod's lookup by name, or of its listing of a database's
 * roles (`listing`). */
static int role_info(mf_cmd_ctx *ctx, const char *role, const char *db, bool show_privs,
                     bool listing, bson_t *arr, uint32_t *n, mf_error *err)
{
    bson_t doc = BSON_INITIALIZER, one;
    bool builtin = mfi_role_is_builtin(role, db), found = builtin;
    int rc = 0;
    if (!builtin) {
        bson_destroy(&doc);
        rc = role_load(ctx->inst, db, role, &doc, &found, err);
    }
    if (rc || !found) {
        bson_destroy(&doc);
        return rc;
    }
    role_list direct = {0}, all = {0};
    priv_list privs = {0}, inh = {0};
    if (builtin) {
        if (show_privs && (rc = builtin_privs(role, db, &privs, err)) == 0)
            rc = builtin_privs(role, db, &inh, err);
    } else {
        direct_roles(&doc, &direct);
        rc = inherited(ctx, &direct, &all, err);
    }
    if (rc == 0 && show_privs && !builtin) {
        rc = stored_privs(&doc, &privs, err);
        /* the role's own privileges and those of the roles it inherits */
        if (rc == 0)
            rc = stored_privs(&doc, &inh, err);
        for (size_t i = 0; rc == 0 && i < all.n; i++) {
            if (mfi_role_is_builtin(all.v[i].role, all.v[i].db)) {
                rc = builtin_privs(all.v[i].role, all.v[i].db, &inh, err);
                continue;
            }
            bson_t d;
            bool f;
            if ((rc = role_load(ctx->inst, all.v[i].db, all.v[i].role, &d, &f, err)) == 0 && f) {
                priv_list more = {0};
                rc = stored_privs(&d, &more, err);
                for (size_t j = 0; rc == 0 && j < more.n; j++) {
                    priv *p = privs_find(&inh, &more.v[j].resource, more.v[j].db, more.v[j].kind,
                                         true, err);
                    if (!p) {
                        rc = MF_InternalError;
                        break;
                    }
                    for (size_t x = 0; x < more.v[j].nacts; x++)
                        priv_add_action(p, more.v[j].acts[x]);
                }
                privs_free(&more);
            }
            bson_destroy(&d);
        }
    }
    if (rc == 0) {
        char k[16], id[512];
        const char *kk;
        bson_uint32_to_string((*n)++, &kk, k, sizeof k);
        bson_append_document_begin(arr, kk, -1, &one);
        if (builtin && listing) {
            BSON_APPEND_UTF8(&one, "role", role);
            BSON_APPEND_UTF8(&one, "db", db);
            BSON_APPEND_BOOL(&one, "isBuiltin", true);
            append_names(&one, "roles", &direct);
            append_names(&one, "inheritedRoles", &all);
            if (show_privs) {
                append_privs(&one, "privileges", &privs);
                append_privs(&one, "inheritedPrivileges", &inh);
            }
        } else if (builtin) {
            BSON_APPEND_UTF8(&one, "db", db);
            BSON_APPEND_UTF8(&one, "role", role);
            append_names(&one, "roles", &direct);
            if (show_privs)
                append_privs(&one, "privileges", &privs);
            append_names(&one, "inheritedRoles", &all);
            if (show_privs)
                append_privs(&one, "inheritedPrivileges", &inh);
            BSON_APPEND_BOOL(&one, "isBuiltin", true);
        } else {
            snprintf(id, sizeof id, "%s.%s", db, role);
            BSON_APPEND_UTF8(&one, "_id", id);
            BSON_APPEND_UTF8(&one, "role", role);
            BSON_APPEND_UTF8(&one, "db", db);
            if (show_privs)
                append_privs(&one, "privileges", &privs);
            append_names(&one, "roles", &direct);
            BSON_APPEND_BOOL(&one, "isBuiltin", false);
            append_names(&one, "inheritedRoles", &all);
            if (show_privs)
                append_privs(&one, "inheritedPrivileges", &inh);
        }
        bson_append_document_end(arr, &one);
    }
    list_free(&direct);
    list_free(&all);
    privs_free(&privs);
    privs_free(&inh);
    bson_destroy(&doc);
    return rc;
}

/* showPrivileges: "asUserFragment": what a user holding the roles would
 * hold, as a user's document shows it (mongod's getRolesAsUserFragment). */
static int user_fragment(mf_cmd_ctx *ctx, const role_list *names, bson_t *reply, mf_error *err)
{
    bson_t user = BSON_INITIALIZER, arr, one, frag;
    int rc = 0;
    BSON_APPEND_ARRAY_BEGIN(&user, "roles", &arr);
    for (size_t i = 0; rc == 0 && i < names->n; i++) {
        bool exists;
        char k[16];
        const char *kk;
        rc = mfi_role_exists(ctx->inst, names->v[i].role, names->v[i].db, &exists, err);
        if (rc == 0 && !exists)
            rc = mf_error_set(err, MF_RoleNotFound, "Could not find role: %s@%s",
                              names->v[i].role, names->v[i].db);
        bson_uint32_to_string((uint32_t)i, &kk, k, sizeof k);
        bson_append_document_begin(&arr, kk, -1, &one);
        BSON_APPEND_UTF8(&one, "role", names->v[i].role);
        BSON_APPEND_UTF8(&one, "db", names->v[i].db);
        bson_append_document_end(&arr, &one);
    }
    bson_append_array_end(&user, &arr);
    mfi_grants g;
    if (rc == 0 && (rc = mfi_grants_resolve(ctx->inst, &user, &g, err)) == 0) {
        bson_iter_t r;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "userFragment", &frag);
        if (bson_iter_init_find(&r, &user, "roles"))
            mf_bsonx_append_iter(&frag, "roles", -1, &r);
        BSON_APPEND_ARRAY(&frag, "inheritedRoles", &g.roles);
        mfi_privs_append(&frag, "inheritedPrivileges", &g.privs);
        BSON_APPEND_ARRAY_BEGIN(&frag, "inheritedAuthenticationRestrictions", &arr);
        bson_append_array_end(&frag, &arr);
        bson_append_document_end(reply, &frag);
        mfi_grants_free(&g);
    }
    bson_destroy(&user);
    return rc;
}

/* The names of the built-in roles of a database, for rolesInfo: 1. */
typedef struct builtin_names {
    role_list *l;
    const char *db;
    int rc;
    mf_error *err;
} builtin_names;

static void add_builtin_name(const char *role, void *arg)
{
    builtin_names *b = arg;
    if (b->rc == 0)
        b->rc = list_add(b->l, role, b->db, b->err);
}

int mfi_cmd_roles_info(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_iter_t it, arg;
    bool show_privs = false, show_builtin = false;
    bool fragment = false;
    int rc = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    arg = it;
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "showPrivileges") == 0) {
            fragment = BSON_ITER_HOLDS_UTF8(&it) &&
                       strcmp(bson_iter_utf8(&it, NULL), "asUserFragment") == 0;
            show_privs = bson_iter_as_bool(&it);
        } else if (strcmp(k, "showBuiltinRoles") == 0) {
            show_builtin = bson_iter_as_bool(&it);
        } else if (strcmp(k, "showAuthenticationRestrictions") == 0) {
            if (bson_iter_as_bool(&it))
                rc = mf_error_set(err, MF_NotImplemented,
                                  "rolesInfo's showAuthenticationRestrictions is not supported by "
                                  "this server yet");
        } else if (!mfi_is_generic_arg(k)) {
            rc = mf_error_set(err, 40415, "BSON field 'rolesInfo.%s' is an unknown field.", k);
        }
    }
    if (rc)
        return rc;
    role_list names = {0};
    bool listing = BSON_ITER_HOLDS_NUMBER(&arg) && bson_iter_as_int64(&arg) == 1;
    if (listing) {
        /* every role of the database, built-in ones first when asked */
        if (show_builtin) {
            builtin_names b = {&names, ctx->db, 0, err};
            mfi_builtin_each(ctx->db, add_builtin_name, &b);
            rc = b.rc;
        }
        bson_t r = BSON_INITIALIZER;
        if (rc == 0)
            rc = run_admin(ctx, BCON_NEW("find", "system.roles", "filter", "{", "db",
                                         BCON_UTF8(ctx->db), "}", "sort", "{", "role",
                                         BCON_INT32(1), "}", "batchSize", BCON_INT32(1000000)),
                           &r, err);
        bson_iter_t b;
        if (rc == 0 && bson_iter_init(&b, &r) &&
            bson_iter_find_descendant(&b, "cursor.firstBatch", &b) && bson_iter_recurse(&b, &b))
            while (rc == 0 && bson_iter_next(&b)) {
                bson_t d;
                bson_iter_t role;
                if (mf_bsonx_doc_view(&b, &d) && bson_iter_init_find(&role, &d, "role") &&
                    BSON_ITER_HOLDS_UTF8(&role))
                    rc = list_add(&names, bson_iter_utf8(&role, NULL), ctx->db, err);
            }
        bson_destroy(&r);
    } else if (BSON_ITER_HOLDS_ARRAY(&arg) || BSON_ITER_HOLDS_UTF8(&arg) ||
               BSON_ITER_HOLDS_DOCUMENT(&arg)) {
        bson_t holder = BSON_INITIALIZER, arr;
        bson_iter_t h;
        if (BSON_ITER_HOLDS_ARRAY(&arg)) {
            rc = parse_role_names(&arg, "rolesInfo", "rolesInfo", ctx->db, &names, err);
        } else {
            BSON_APPEND_ARRAY_BEGIN(&holder, "r", &arr);
            mf_bsonx_append_iter(&arr, "0", 1, &arg);
            bson_append_array_end(&holder, &arr);
            bson_iter_init_find(&h, &holder, "r");
            rc = parse_role_names(&h, "rolesInfo", "rolesInfo", ctx->db, &names, err);
        }
        bson_destroy(&holder);
    } else {
        rc = mf_error_set(err, MF_BadValue,
                          "rolesInfo argument should be 1, a role name, a {role, db} document or "
                          "an array of them");
    }
    bson_t roles;
    uint32_t n = 0;
    if (rc == 0 && fragment)
        rc = listing ? mf_error_set(err, MF_IllegalOperation,
                                    "Cannot get user fragment for all roles in a database")
                     : user_fragment(ctx, &names, reply, err);
    else if (rc == 0) {
        BSON_APPEND_ARRAY_BEGIN(reply, "roles", &roles);
        for (size_t i = 0; rc == 0 && i < names.n; i++)
            rc = role_info(ctx, names.v[i].role, names.v[i].db, show_privs, listing, &roles, &n,
                           err);
        bson_append_array_end(reply, &roles);
    }
    list_free(&names);
    return rc;
}
