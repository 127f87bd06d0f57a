/*
 * authz_int.h -- privileges, as mongod 7.0's authorization keeps them
 * (authz.c): action sets, resource patterns, privilege lists, the built-in
 * roles' privileges and a user's privileges resolved from its roles.
 * Private to csrc/command.
 */
#ifndef MF_AUTHZ_INT_H
#define MF_AUTHZ_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "command_int.h"

/* The action numbers, in mongod's enum order (actions.def). */
enum {
#define MF_ACTION(name) MFA_##name,
#include "actions.def"
#undef MF_ACTION
    MFA__COUNT,
    MFA__END = 255 /* ends a list of actions */
};

/* A set of actions. */
typedef struct mfi_actset {
    uint64_t w[(MFA__COUNT + 63) / 64];
} mfi_actset;

static inline void mfi_actset_add(mfi_actset *s, int a)
{
    s->w[a / 64] |= (uint64_t)1 << (a % 64);
}

static inline bool mfi_actset_has(const mfi_actset *s, int a)
{
    return (s->w[a / 64] >> (a % 64)) & 1;
}

/* The name of action `a`; the number of `name`, or -1. */
const char *mfi_action_name(int a);
int mfi_action_find(const char *name);

/* A resource pattern (mongod's ResourcePattern), as a privilege names it
 * or a check targets it. */
typedef enum mfi_rkind {
    MFR_ANY = 1,     /* {anyResource: true}: everything */
    MFR_CLUSTER,     /* {cluster: true} */
    MFR_ANY_NORMAL,  /* {db: "", collection: ""}: any database, any normal collection */
    MFR_DB,          /* {db: d, collection: ""}: d and its normal collections */
    MFR_COLL,        /* {db: "", collection: c}: c in any database */
    MFR_EXACT,       /* {db: d, collection: c} */
    MFR_ANY_BUCKETS, /* {system_buckets: ""}: any system.buckets.* */
} mfi_rkind;

typedef struct mfi_resource {
    mfi_rkind kind;
    const char *db;   /* MFR_DB, MFR_EXACT */
    const char *coll; /* MFR_COLL, MFR_EXACT */
} mfi_resource;

/* Privileges: resource patterns, each once, with their actions, in the
 * order they were first added (mongod's PrivilegeVector). */
typedef struct mfi_priv {
    mfi_rkind kind;
    char *db, *coll; /* owned; "" when the kind has none */
    mfi_actset acts;
} mfi_priv;

typedef struct mfi_privs {
    mfi_priv *v;
    size_t n, cap;
} mfi_privs;

void mfi_privs_free(mfi_privs *l);
/* Add `acts` on `r` (merged with an entry of the same pattern). */
int mfi_privs_add(mfi_privs *l, const mfi_resource *r, const mfi_actset *acts, mf_error *err);
/* Whether `l` allows every action of `need` on target `t` (mongod's
 * resource search list: a pattern that covers the target lends its
 * actions). */
bool mfi_privs_allow(const mfi_privs *l, const mfi_resource *t, const mfi_actset *need);
/* The privileges as mongod shows them: [{resource, actions}]. */
void mfi_privs_append(bson_t *out, const char *key, const mfi_privs *l);
/* A privilege's resource document parsed ({db, collection}, {cluster:
 * true}, {anyResource: true}); false when it is none of them. */
bool mfi_resource_parse(const bson_t *doc, mfi_resource *out);

/* Whether `role` is a built-in role of database `db`. */
bool mfi_role_is_builtin(const char *role, const char *db);
/* The built-in role's privileges added to `l` (none if it is not one). */
int mfi_builtin_privs(const char *role, const char *db, mfi_privs *l, mf_error *err);
/* Call `fn` with each built-in role's name on `db`, in name order. */
void mfi_builtin_each(const char *db, void (*fn)(const char *role, void *arg), void *arg);

/* A user's roles and privileges, resolved from its document: its roles,
 * the roles they inherit (user-defined roles' "roles"), and every
 * privilege they hold (mongod's User). */
typedef struct mfi_grants {
    mfi_privs privs;
    bson_t roles; /* [{role, db}]: the user's and those inherited */
} mfi_grants;

int mfi_grants_resolve(mf_instance *inst, const bson_t *user_doc, mfi_grants *out,
                       mf_error *err);
void mfi_grants_free(mfi_grants *g);

/* The connection's user's grants, resolved again if a user or role has
 * changed since they were (auth.c); `*out` NULL when nobody is
 * authenticated -- or no longer: a user dropped since is forgotten. */
int mfi_auth_grants(mf_cmd_ctx *ctx, const mfi_grants **out, mf_error *err);

/* The authorization generation (mfi_authz_changed bumps it). */
uint64_t mfi_authz_generation(mf_instance *inst);

#endif
