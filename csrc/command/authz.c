/*
 * authz.c -- privileges as mongod 7.0's authorization keeps them: action
 * sets, resource patterns and privilege lists; the built-in roles'
 * privileges; the resource search list a check walks.
 *
 * A privilege is a resource pattern and a set of actions.  A check asks
 * whether a list of privileges allows some actions on a target (a
 * collection, a database, the cluster): every pattern that covers the
 * target lends its actions (mongod's buildResourceSearchList), so
 * {db: "test", collection: ""} allows on test.c what it allows on the
 * database, but not on test.system.users.
 *
 * The built-in roles are data, as mongod 7.0's builtin_roles.yml: a role's
 * own privileges (NULL database: the role's own) and the roles it takes
 * in first.  A role granted on a database gets that database substituted,
 * and the lists are merged by pattern in mongod's order, so rolesInfo
 * shows them as mongod does.
 */
#include "command_int.h"
#include "authz_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- actions */

static const char *const action_names[] = {
#define MF_ACTION(name) #name,
#include "actions.def"
#undef MF_ACTION
};

const char *mfi_action_name(int a)
{
    return a >= 0 && a < MFA__COUNT ? action_names[a] : "?";
}

int mfi_action_find(const char *name)
{
    for (int a = 0; a < MFA__COUNT; a++)
        if (strcmp(action_names[a], name) == 0)
            return a;
    return -1;
}

/* Whether `have` holds every action of `need` (anyAction holds all). */
static bool actset_covers(const mfi_actset *have, const mfi_actset *need)
{
    if (mfi_actset_has(have, MFA_anyAction))
        return true;
    for (size_t i = 0; i < sizeof need->w / sizeof *need->w; i++)
        if (need->w[i] & ~have->w[i])
            return false;
    return true;
}

/* ------------------------------------------------------------- privileges */

void mfi_privs_free(mfi_privs *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].db);
        free(l->v[i].coll);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static bool same_pattern(const mfi_priv *p, const mfi_resource *r)
{
    return p->kind == r->kind && strcmp(p->db, r->db ? r->db : "") == 0 &&
           strcmp(p->coll, r->coll ? r->coll : "") == 0;
}

int mfi_privs_add(mfi_privs *l, const mfi_resource *r, const mfi_actset *acts, mf_error *err)
{
    for (size_t i = 0; i < l->n; i++)
        if (same_pattern(&l->v[i], r)) {
            for (size_t w = 0; w < sizeof acts->w / sizeof *acts->w; w++)
                l->v[i].acts.w[w] |= acts->w[w];
            return 0;
        }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        mfi_priv *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        l->v = v;
        l->cap = cap;
    }
    mfi_priv *p = &l->v[l->n];
    p->kind = r->kind;
    p->db = strdup(r->db ? r->db : "");
    p->coll = strdup(r->coll ? r->coll : "");
    p->acts = *acts;
    if (!p->db || !p->coll) {
        free(p->db);
        free(p->coll);
        return mf_error_oom(err);
    }
    l->n++;
    return 0;
}

/* mongod's NamespaceString::isNormalCollection: not system.*, and not
 * local's replset.*. */
static bool normal_collection(const char *db, const char *coll)
{
    if (strncmp(coll, "system.", 7) == 0)
        return false;
    return !(strcmp(db, "local") == 0 && strncmp(coll, "replset.", 8) == 0);
}

static bool special_db(const char *db)
{
    return strcmp(db, "local") == 0 || strcmp(db, "config") == 0;
}

/* The patterns whose privileges apply to target `t`, as mongod's
 * buildResourceSearchList: anyResource; for a collection, the database
 * and {db: "", collection: ""} when it is a normal one (the latter never
 * in local or config), any system.buckets.* for a bucket collection, and
 * its name in any database; for a database, {db: "", collection: ""}
 * (not for local or config); then the target itself.  Returns the count. */
static size_t search_list(const mfi_resource *t, mfi_resource out[6])
{
    size_t n = 0;
    out[n++] = (mfi_resource){.kind = MFR_ANY};
    if (t->kind == MFR_EXACT) {
        if (normal_collection(t->db, t->coll)) {
            if (!special_db(t->db))
                out[n++] = (mfi_resource){.kind = MFR_ANY_NORMAL};
            out[n++] = (mfi_resource){.kind = MFR_DB, .db = t->db};
        } else if (strncmp(t->coll, "system.buckets.", 15) == 0 && t->coll[15]) {
            out[n++] = (mfi_resource){.kind = MFR_ANY_BUCKETS};
        }
        out[n++] = (mfi_resource){.kind = MFR_COLL, .coll = t->coll};
    } else if (t->kind == MFR_DB && !special_db(t->db)) {
        out[n++] = (mfi_resource){.kind = MFR_ANY_NORMAL};
    }
    out[n++] = *t;
    return n;
}

bool mfi_privs_allow(const mfi_privs *l, const mfi_resource *t, const mfi_actset *need)
{
    mfi_resource cands[6];
    size_t nc = search_list(t, cands);
    mfi_actset unmet = *need;
    for (size_t c = 0; c < nc; c++)
        for (size_t i = 0; i < l->n; i++) {
            if (!same_pattern(&l->v[i], &cands[c]))
                continue;
            if (actset_covers(&l->v[i].acts, &unmet))
                return true;
            for (size_t w = 0; w < sizeof unmet.w / sizeof *unmet.w; w++)
                unmet.w[w] &= ~l->v[i].acts.w[w];
        }
    for (size_t w = 0; w < sizeof unmet.w / sizeof *unmet.w; w++)
        if (unmet.w[w])
            return false;
    return true;
}

static void append_resource(bson_t *out, const mfi_priv *p)
{
    bson_t r;
    BSON_APPEND_DOCUMENT_BEGIN(out, "resource", &r);
    switch (p->kind) {
    case MFR_ANY:
        BSON_APPEND_BOOL(&r, "anyResource", true);
        break;
    case MFR_CLUSTER:
        BSON_APPEND_BOOL(&r, "cluster", true);
        break;
    case MFR_ANY_BUCKETS:
        BSON_APPEND_UTF8(&r, "system_buckets", "");
        break;
    default:
        BSON_APPEND_UTF8(&r, "db", p->db);
        BSON_APPEND_UTF8(&r, "collection", p->coll);
        break;
    }
    bson_append_document_end(out, &r);
}

void mfi_privs_append(bson_t *out, const char *key, const mfi_privs *l)
{
    bson_t arr;
    char k[16];
    const char *kk;
    uint32_t n = 0;
    BSON_APPEND_ARRAY_BEGIN(out, key, &arr);
    for (size_t i = 0; i < l->n; i++) {
        bson_t d, a;
        uint32_t m = 0;
        bson_uint32_to_string(n++, &kk, k, sizeof k);
        bson_append_document_begin(&arr, kk, -1, &d);
        append_resource(&d, &l->v[i]);
        BSON_APPEND_ARRAY_BEGIN(&d, "actions", &a);
        /* anyAction stands for all of them, and is shown alone */
        bool any = mfi_actset_has(&l->v[i].acts, MFA_anyAction);
        for (int x = 0; x < MFA__COUNT; x++)
            if (any ? x == MFA_anyAction : mfi_actset_has(&l->v[i].acts, x)) {
                bson_uint32_to_string(m++, &kk, k, sizeof k);
                bson_append_utf8(&a, kk, -1, action_names[x], -1);
            }
        bson_append_array_end(&d, &a);
        bson_append_document_end(&arr, &d);
    }
    bson_append_array_end(out, &arr);
}

bool mfi_resource_parse(const bson_t *doc, mfi_resource *out)
{
    bson_iter_t it;
    const char *db = NULL, *coll = NULL;
    bool cluster = false, any = false;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "db") == 0 && BSON_ITER_HOLDS_UTF8(&it))
            db = bson_iter_utf8(&it, NULL);
        else if (strcmp(k, "collection") == 0 && BSON_ITER_HOLDS_UTF8(&it))
            coll = bson_iter_utf8(&it, NULL);
        else if (strcmp(k, "cluster") == 0)
            cluster = bson_iter_as_bool(&it);
        else if (strcmp(k, "anyResource") == 0)
            any = bson_iter_as_bool(&it);
        else
            return false;
    }
    memset(out, 0, sizeof *out);
    if (cluster || any) {
        if (db || coll || (cluster && any))
            return false;
        out->kind = cluster ? MFR_CLUSTER : MFR_ANY;
        return true;
    }
    if (!db || !coll)
        return false;
    out->db = db;
    out->coll = coll;
    out->kind = !*db && !*coll ? MFR_ANY_NORMAL : !*coll ? MFR_DB : !*db ? MFR_COLL : MFR_EXACT;
    return true;
}

/* --------------------------------------------------------- built-in roles */

/* A privilege of a built-in role: `db` NULL is the role's own database. */
typedef struct bi_priv {
    mfi_rkind kind;
    const char *db, *coll;
    const uint8_t *acts; /* ended by MFA__END */
} bi_priv;

typedef struct bi_role {
    const char *name;
    bool admin_only;          /* a role of admin only */
    const char *const *subs;  /* the roles it takes in first: "role" (same
                                 database) or "role@db"; NULL-ended */
    const bi_priv *privs;
    size_t nprivs;
} bi_role;

#define A(x) MFA_##x

/* mongod 7.0's builtin_roles.yml, action lists named for where they are
 * first used.  __system is all actions on anyResource (below). */
static const uint8_t read_database[] = {
    A(changeStream), A(collStats), A(dbHash), A(dbStats), A(find), A(killCursors),
    A(listCollections), A(listIndexes), A(listSearchIndexes), A(planCacheRead), MFA__END
};
static const uint8_t readWrite_database[] = {
    A(changeStream), A(collStats), A(compactStructuredEncryptionData), A(convertToCapped),
    A(createCollection), A(createIndex), A(createSearchIndexes), A(dbHash), A(dbStats),
    A(dropCollection), A(dropIndex), A(dropSearchIndex), A(find), A(insert), A(killCursors),
    A(listCollections), A(listIndexes), A(listSearchIndexes), A(updateSearchIndex),
    A(planCacheRead), A(remove), A(renameCollectionSameDB), A(update), MFA__END
};
static const uint8_t userAdmin_database[] = {
    A(changeCustomData), A(changePassword), A(createRole), A(createUser), A(dropRole),
    A(dropUser), A(grantRole), A(revokeRole), A(setAuthenticationRestriction), A(viewRole),
    A(viewUser), MFA__END
};
static const uint8_t dbAdmin_database[] = {
    A(analyze), A(bypassDocumentValidation), A(collMod), A(collStats), A(compact),
    A(configureQueryAnalyzer), A(convertToCapped), A(createCollection), A(createIndex),
    A(createSearchIndexes), A(dbStats), A(dropCollection), A(dropDatabase), A(dropIndex),
    A(dropSearchIndex), A(enableProfiler), A(listCollections), A(listIndexes),
    A(listSearchIndexes), A(updateSearchIndex), A(planCacheIndexFilter), A(planCacheRead),
    A(planCacheWrite), A(reIndex), A(renameCollectionSameDB), A(storageDetails), A(validate),
    MFA__END
};
static const uint8_t dbAdmin_system_profile[] = {
    A(changeStream), A(collStats), A(convertToCapped), A(createCollection), A(dbHash),
    A(dbStats), A(dropCollection), A(find), A(killCursors), A(listCollections), A(listIndexes),
    A(listSearchIndexes), A(planCacheRead), MFA__END
};
static const uint8_t enableSharding_any_normal[] = {
    A(analyzeShardKey), A(enableSharding), A(refineCollectionShardKey), A(reshardCollection),
    MFA__END
};
static const uint8_t readAnyDatabase_cluster[] = {
    A(listDatabases), MFA__END
};
static const uint8_t userAdminAnyDatabase_any_normal[] = {
    A(changeCustomData), A(changePassword), A(createRole), A(createUser), A(dropRole),
    A(dropUser), A(grantRole), A(listCachedAndActiveUsers), A(revokeRole),
    A(setAuthenticationRestriction), A(viewRole), A(viewUser), MFA__END
};
static const uint8_t userAdminAnyDatabase_cluster[] = {
    A(authSchemaUpgrade), A(invalidateUserCache), A(listDatabases), A(viewUser), MFA__END
};
static const uint8_t userAdminAnyDatabase_system_users[] = {
    A(changeStream), A(collStats), A(createIndex), A(createSearchIndexes), A(dbHash),
    A(dbStats), A(dropIndex), A(dropSearchIndex), A(find), A(killCursors), A(listCollections),
    A(listIndexes), A(listSearchIndexes), A(planCacheRead), MFA__END
};
static const uint8_t dbAdminAnyDatabase_cluster[] = {
    A(listDatabases), A(applyOps), MFA__END
};
static const uint8_t clusterMonitor_cluster[] = {
    A(allCollectionStats), A(connPoolStats), A(getDefaultRWConcern), A(getCmdLineOpts),
    A(getLog), A(getParameter), A(getShardMap), A(hostInfo), A(inprog), A(listDatabases),
    A(listSampledQueries), A(listSessions), A(listShards), A(netstat), A(operationMetrics),
    A(queryStatsRead), A(queryStatsReadTransformed), A(replSetGetConfig), A(replSetGetStatus),
    A(serverStatus), A(shardedDataDistribution), A(shardingState), A(top), A(useUUID), MFA__END
};
static const uint8_t clusterMonitor_any_normal[] = {
    A(collStats), A(dbStats), A(getDatabaseVersion), A(getShardVersion), A(indexStats), MFA__END
};
static const uint8_t clusterMonitor_system_replset[] = {
    A(find), MFA__END
};
static const uint8_t hostManager_cluster[] = {
    A(applicationMessage), A(auditConfigure), A(connPoolSync), A(dropConnections),
    A(flushRouterConfig), A(fsync), A(invalidateUserCache), A(killAnyCursor), A(killAnySession),
    A(killop), A(logRotate), A(oidcListKeys), A(oidcRefreshKeys), A(oidReset),
    A(replSetResizeOplog), A(resync), A(rotateCertificates), A(setParameter), A(shutdown),
    A(touch), A(trafficRecord), A(unlock), MFA__END
};
static const uint8_t hostManager_any_normal[] = {
    A(killCursors), MFA__END
};
static const uint8_t clusterManager_cluster[] = {
    A(addShard), A(appendOplogNote), A(applicationMessage), A(checkMetadataConsistency),
    A(cleanupOrphaned), A(flushRouterConfig), A(getClusterParameter), A(getDefaultRWConcern),
    A(listSessions), A(listShards), A(removeShard), A(replSetConfigure), A(replSetGetConfig),
    A(replSetGetStatus), A(replSetStateChange), A(resync), A(runTenantMigration),
    A(setClusterParameter), A(setDefaultRWConcern), A(setFeatureCompatibilityVersion),
    A(transitionFromDedicatedConfigServer), A(transitionToDedicatedConfigServer),
    A(setChangeStreamState), A(getChangeStreamState), MFA__END
};
static const uint8_t clusterManager_any_normal[] = {
    A(analyzeShardKey), A(clearJumboFlag), A(configureQueryAnalyzer), A(enableSharding),
    A(moveChunk), A(refineCollectionShardKey), A(reshardCollection), A(splitChunk),
    A(splitVector), MFA__END
};
static const uint8_t clusterManager_any[] = {
    A(dbCheck), MFA__END
};
static const uint8_t clusterManager_config[] = {
    A(insert), A(remove), A(update), MFA__END
};
static const uint8_t clusterAdmin_any_normal[] = {
    A(dropDatabase), MFA__END
};
static const uint8_t clusterAdmin_any[] = {
    A(exportCollection), A(importCollection), MFA__END
};
static const uint8_t queryableBackup_any[] = {
    A(collStats), A(listCollections), A(listIndexes), A(listSearchIndexes), MFA__END
};
static const uint8_t queryableBackup_cluster[] = {
    A(getParameter), A(listDatabases), A(useUUID), MFA__END
};
static const uint8_t backup_cluster[] = {
    A(appendOplogNote), A(serverStatus), A(setUserWriteBlockMode), MFA__END
};
static const uint8_t backup_settings[] = {
    A(insert), A(update), MFA__END
};
static const uint8_t restore_cluster[] = {
    A(bypassWriteBlockingMode), A(forceUUID), A(getParameter), A(setUserWriteBlockMode),
    A(useUUID), A(applyOps), MFA__END
};
static const uint8_t restore_local[] = {
    A(bypassDocumentValidation), A(collMod), A(convertToCapped), A(createCollection),
    A(createIndex), A(createSearchIndexes), A(dropCollection), A(insert), A(updateSearchIndex),
    MFA__END
};
static const uint8_t restore_any[] = {
    A(listCollections), MFA__END
};
static const uint8_t restore_any_normal[] = {
    A(bypassDocumentValidation), A(changeCustomData), A(changePassword), A(collMod),
    A(convertToCapped), A(createCollection), A(createIndex), A(createRole),
    A(createSearchIndexes), A(createUser), A(dropCollection), A(dropRole), A(dropUser),
    A(grantRole), A(insert), A(updateSearchIndex), A(revokeRole),
    A(setAuthenticationRestriction), A(viewRole), A(viewUser), MFA__END
};
static const uint8_t restore_system_version[] = {
    A(bypassDocumentValidation), A(collMod), A(convertToCapped), A(createCollection),
    A(createIndex), A(createSearchIndexes), A(dropCollection), A(find), A(insert),
    A(updateSearchIndex), MFA__END
};
static const uint8_t restore_system_users[] = {
    A(bypassDocumentValidation), A(collMod), A(convertToCapped), A(createCollection),
    A(createIndex), A(createSearchIndexes), A(dropCollection), A(find), A(insert),
    A(updateSearchIndex), A(remove), A(update), MFA__END
};
static const uint8_t restore_system_roles[] = {
    A(createIndex), MFA__END
};
static const uint8_t root_any[] = {
    A(validate), MFA__END
};
static const uint8_t root_cluster[] = {
    A(useTenant), MFA__END
};
static const uint8_t root_system_preimages[] = {
    A(find), A(remove), MFA__END
};
static const uint8_t root_system_change_collection[] = {
    A(find), A(insert), A(remove), A(update), MFA__END
};
static const uint8_t directShardOperations_cluster[] = {
    A(issueDirectShardOperations), MFA__END
};

static const bi_priv read_privs[] = {
    {MFR_DB, NULL, NULL, read_database},
    {MFR_EXACT, NULL, "system.js", read_database},
};
static const bi_priv readWrite_privs[] = {
    {MFR_DB, NULL, NULL, readWrite_database},
    {MFR_EXACT, NULL, "system.js", readWrite_database},
};
static const bi_priv userAdmin_privs[] = {
    {MFR_DB, NULL, NULL, userAdmin_database},
};
static const bi_priv dbAdmin_privs[] = {
    {MFR_DB, NULL, NULL, dbAdmin_database},
    {MFR_EXACT, NULL, "system.profile", dbAdmin_system_profile},
};
static const char *const dbOwner_subs[] = {"readWrite", "dbAdmin", "userAdmin", NULL};
static const bi_priv enableSharding_privs[] = {
    {MFR_ANY_NORMAL, NULL, NULL, enableSharding_any_normal},
};
static const bi_priv readAnyDatabase_privs[] = {
    {MFR_ANY_NORMAL, NULL, NULL, read_database},
    {MFR_CLUSTER, NULL, NULL, readAnyDatabase_cluster},
    {MFR_COLL, NULL, "system.js", read_database},
    {MFR_ANY_BUCKETS, NULL, NULL, read_database},
};
static const bi_priv readWriteAnyDatabase_privs[] = {
    {MFR_ANY_NORMAL, NULL, NULL, readWrite_database},
    {MFR_COLL, NULL, "system.js", readWrite_database},
    {MFR_ANY_BUCKETS, NULL, NULL, readWrite_database},
};
static const char *const readWriteAnyDatabase_subs[] = {"readAnyDatabase", NULL};
static const bi_priv userAdminAnyDatabase_privs[] = {
    {MFR_ANY_NORMAL, NULL, NULL, userAdminAnyDatabase_any_normal},
    {MFR_DB, "local", NULL, userAdmin_database},
    {MFR_DB, "config", NULL, userAdmin_database},
    {MFR_CLUSTER, NULL, NULL, userAdminAnyDatabase_cluster},
    {MFR_EXACT, "admin", "system.users", userAdminAnyDatabase_system_users},
    {MFR_EXACT, "admin", "system.roles", userAdminAnyDatabase_system_users},
    {MFR_COLL, NULL, "system.users", read_database},
    {MFR_EXACT, "admin", "system.version", read_database},
    {MFR_EXACT, "admin", "system.backup_users", read_database},
};
static const bi_priv dbAdminAnyDatabase_privs[] = {
    {MFR_CLUSTER, NULL, NULL, dbAdminAnyDatabase_cluster},
    {MFR_ANY_NORMAL, NULL, NULL, dbAdmin_database},
    {MFR_COLL, NULL, "system.profile", dbAdmin_system_profile},
    {MFR_ANY_BUCKETS, NULL, NULL, dbAdmin_database},
};
static const bi_priv clusterMonitor_privs[] = {
    {MFR_CLUSTER, NULL, NULL, clusterMonitor_cluster},
    {MFR_ANY_NORMAL, NULL, NULL, clusterMonitor_any_normal},
    {MFR_DB, "config", NULL, clusterMonitor_any_normal},
    {MFR_EXACT, "config", "system.sessions", clusterMonitor_any_normal},
    {MFR_DB, "local", NULL, clusterMonitor_any_normal},
    {MFR_EXACT, "local", "system.replset", clusterMonitor_system_replset},
    {MFR_EXACT, "local", "replset.election", clusterMonitor_system_replset},
    {MFR_EXACT, "local", "replset.minvalid", clusterMonitor_system_replset},
    {MFR_COLL, NULL, "system.profile", clusterMonitor_system_replset},
};
static const char *const clusterMonitor_subs[] = {"read@config", "read@local", NULL};
static const bi_priv hostManager_privs[] = {
    {MFR_CLUSTER, NULL, NULL, hostManager_cluster},
    {MFR_ANY_NORMAL, NULL, NULL, hostManager_any_normal},
};
static const bi_priv clusterManager_privs[] = {
    {MFR_CLUSTER, NULL, NULL, clusterManager_cluster},
    {MFR_ANY_NORMAL, NULL, NULL, clusterManager_any_normal},
    {MFR_ANY_BUCKETS, NULL, NULL, clusterManager_any_normal},
    {MFR_DB, "config", NULL, clusterManager_any_normal},
    {MFR_DB, "local", NULL, clusterManager_any_normal},
    {MFR_EXACT, "local", "system.replset", read_database},
    {MFR_ANY, NULL, NULL, clusterManager_any},
    {MFR_EXACT, "local", "system.healthlog", read_database},
    {MFR_DB, "config", NULL, clusterManager_config},
    {MFR_DB, "local", NULL, clusterManager_config},
    {MFR_EXACT, "local", "replset.election", clusterManager_config},
    {MFR_EXACT, "local", "replset.minvalid", clusterManager_config},
};
static const char *const clusterManager_subs[] = {"read@config", NULL};
static const bi_priv clusterAdmin_privs[] = {
    {MFR_ANY_NORMAL, NULL, NULL, clusterAdmin_any_normal},
    {MFR_ANY, NULL, NULL, clusterAdmin_any},
};
static const char *const clusterAdmin_subs[] = {
    "clusterMonitor", "hostManager", "clusterManager", NULL
};
static const bi_priv queryableBackup_privs[] = {
    {MFR_ANY, NULL, NULL, queryableBackup_any},
    {MFR_ANY_NORMAL, NULL, NULL, clusterMonitor_system_replset},
    {MFR_ANY_BUCKETS, NULL, NULL, clusterMonitor_system_replset},
    {MFR_CLUSTER, NULL, NULL, queryableBackup_cluster},
    {MFR_DB, "config", NULL, clusterMonitor_system_replset},
    {MFR_DB, "local", NULL, clusterMonitor_system_replset},
    {MFR_EXACT, "local", "replset.election", clusterMonitor_system_replset},
    {MFR_EXACT, "local", "replset.minvalid", clusterMonitor_system_replset},
    {MFR_COLL, NULL, "system.js", clusterMonitor_system_replset},
    {MFR_COLL, NULL, "system.users", clusterMonitor_system_replset},
    {MFR_COLL, NULL, "system.profile", clusterMonitor_system_replset},
    {MFR_EXACT, "admin", "system.backup_users", clusterMonitor_system_replset},
    {MFR_EXACT, "admin", "system.roles", clusterMonitor_system_replset},
    {MFR_EXACT, "admin", "system.version", clusterMonitor_system_replset},
    {MFR_EXACT, "config", "settings", clusterMonitor_system_replset},
};
static const bi_priv backup_privs[] = {
    {MFR_CLUSTER, NULL, NULL, backup_cluster},
    {MFR_EXACT, "config", "settings", backup_settings},
};
static const char *const backup_subs[] = {"__queryableBackup", NULL};
static const bi_priv restore_privs[] = {
    {MFR_CLUSTER, NULL, NULL, restore_cluster},
    {MFR_DB, "local", NULL, restore_local},
    {MFR_DB, "config", NULL, restore_local},
    {MFR_ANY_BUCKETS, NULL, NULL, restore_local},
    {MFR_EXACT, "local", "system.replset", restore_local},
    {MFR_EXACT, "local", "replset.election", restore_local},
    {MFR_EXACT, "local", "replset.minvalid", restore_local},
    {MFR_ANY, NULL, NULL, restore_any},
    {MFR_ANY_NORMAL, NULL, NULL, restore_any_normal},
    {MFR_COLL, NULL, "system.js", restore_local},
    {MFR_EXACT, "admin", "tempusers", clusterMonitor_system_replset},
    {MFR_EXACT, "admin", "temproles", clusterMonitor_system_replset},
    {MFR_EXACT, "admin", "system.backup_users", restore_local},
    {MFR_EXACT, "admin", "system.version", restore_system_version},
    {MFR_COLL, NULL, "system.users", restore_system_users},
    {MFR_EXACT, "admin", "system.roles", restore_system_roles},
};
static const bi_priv root_privs[] = {
    {MFR_ANY, NULL, NULL, root_any},
    {MFR_CLUSTER, NULL, NULL, root_cluster},
    {MFR_EXACT, "config", "system.preimages", root_system_preimages},
    {MFR_EXACT, "config", "system.change_collection", root_system_change_collection},
};
static const char *const root_subs[] = {
    "clusterAdmin", "userAdminAnyDatabase", "dbAdminAnyDatabase", "readWriteAnyDatabase",
    "backup", "restore", "directShardOperations", NULL
};
static const bi_priv directShardOperations_privs[] = {
    {MFR_CLUSTER, NULL, NULL, directShardOperations_cluster},
};

#define ROLE(name, admin, subs, privs) {name, admin, subs, privs, sizeof privs / sizeof *privs}

/* sorted by name with strcmp */
static const bi_role builtin_roles[] = {
    ROLE("__queryableBackup", true, NULL, queryableBackup_privs),
    {"__system", true, NULL, NULL, 0},
    ROLE("backup", true, backup_subs, backup_privs),
    ROLE("clusterAdmin", true, clusterAdmin_subs, clusterAdmin_privs),
    ROLE("clusterManager", true, clusterManager_subs, clusterManager_privs),
    ROLE("clusterMonitor", true, clusterMonitor_subs, clusterMonitor_privs),
    ROLE("dbAdmin", false, NULL, dbAdmin_privs),
    ROLE("dbAdminAnyDatabase", true, NULL, dbAdminAnyDatabase_privs),
    {"dbOwner", false, dbOwner_subs, NULL, 0},
    ROLE("directShardOperations", true, NULL, directShardOperations_privs),
    ROLE("enableSharding", false, NULL, enableSharding_privs),
    ROLE("hostManager", true, NULL, hostManager_privs),
    ROLE("read", false, NULL, read_privs),
    ROLE("readAnyDatabase", true, NULL, readAnyDatabase_privs),
    ROLE("readWrite", false, NULL, readWrite_privs),
    ROLE("readWriteAnyDatabase", true, readWriteAnyDatabase_subs, readWriteAnyDatabase_privs),
    ROLE("restore", true, NULL, restore_privs),
    ROLE("root", true, root_subs, root_privs),
    ROLE("userAdmin", false, NULL, userAdmin_privs),
    ROLE("userAdminAnyDatabase", true, NULL, userAdminAnyDatabase_privs),
};

static const bi_role *builtin_find(const char *role, const char *db)
{
    /* $external has no built-in roles (mongod's isValidDB) */
    if (strcmp(db, "$external") == 0)
        return NULL;
    size_t lo = 0, hi = sizeof builtin_roles / sizeof *builtin_roles;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        int c = strcmp(role, builtin_roles[m].name);
        if (c == 0)
            return !builtin_roles[m].admin_only || strcmp(db, "admin") == 0 ? &builtin_roles[m]
                                                                             : NULL;
        if (c < 0)
            hi = m;
        else
            lo = m + 1;
    }
    return NULL;
}

bool mfi_role_is_builtin(const char *role, const char *db)
{
    return builtin_find(role, db) != NULL;
}

void mfi_builtin_each(const char *db, void (*fn)(const char *role, void *arg), void *arg)
{
    for (size_t i = 0; i < sizeof builtin_roles / sizeof *builtin_roles; i++)
        if (builtin_find(builtin_roles[i].name, db))
            fn(builtin_roles[i].name, arg);
}

static int builtin_add(const bi_role *r, const char *db, mfi_privs *l, mf_error *err)
{
    int rc = 0;
    if (strcmp(r->name, "__system") == 0) {
        mfi_actset all;
        memset(&all, 0, sizeof all);
        mfi_actset_add(&all, MFA_anyAction);
        return mfi_privs_add(l, &(mfi_resource){.kind = MFR_ANY}, &all, err);
    }
    /* the roles it takes in first, then its own privileges */
    for (const char *const *s = r->subs; rc == 0 && s && *s; s++) {
        char name[64];
        const char *at = strchr(*s, '@');
        size_t n = at ? (size_t)(at - *s) : strlen(*s);
        snprintf(name, sizeof name, "%.*s", (int)n, *s);
        const bi_role *sub = builtin_find(name, at ? at + 1 : db);
        if (sub)
            rc = builtin_add(sub, at ? at + 1 : db, l, err);
    }
    for (size_t i = 0; rc == 0 && i < r->nprivs; i++) {
        const bi_priv *p = &r->privs[i];
        mfi_actset acts;
        memset(&acts, 0, sizeof acts);
        for (const uint8_t *a = p->acts; *a != MFA__END; a++)
            mfi_actset_add(&acts, *a);
        mfi_resource res = {.kind = p->kind, .db = p->db ? p->db : db, .coll = p->coll};
        if (p->kind != MFR_DB && p->kind != MFR_EXACT)
            res.db = NULL;
        rc = mfi_privs_add(l, &res, &acts, err);
    }
    return rc;
}

int mfi_builtin_privs(const char *role, const char *db, mfi_privs *l, mf_error *err)
{
    const bi_role *r = builtin_find(role, db);
    return r ? builtin_add(r, db, l, err) : 0;
}

/* ---------------------------------------------------- a user's privileges */

void mfi_grants_free(mfi_grants *g)
{
    mfi_privs_free(&g->privs);
    bson_destroy(&g->roles);
}

/* The roles met while resolving a user, each once, in the order met;
 * `next` is the first not yet looked at. */
typedef struct role_queue {
    char (*v)[2][128];
    size_t n, cap, next;
} role_queue;

static int queue_add(role_queue *q, const char *role, const char *db, mf_error *err)
{
    for (size_t i = 0; i < q->n; i++)
        if (strcmp(q->v[i][0], role) == 0 && strcmp(q->v[i][1], db) == 0)
            return 0;
    if (strlen(role) >= 128 || strlen(db) >= 128)
        return 0; /* no such role can exist */
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 8;
        void *v = realloc(q->v, cap * sizeof *q->v);
        if (!v)
            return mf_error_oom(err);
        q->v = v;
        q->cap = cap;
    }
    snprintf(q->v[q->n][0], 128, "%s", role);
    snprintf(q->v[q->n][1], 128, "%s", db);
    q->n++;
    return 0;
}

/* The {role, db} entries of `doc`'s roles, added to the queue. */
static int queue_roles_of(role_queue *q, const bson_t *doc, mf_error *err)
{
    bson_iter_t it, r;
    int rc = 0;
    if (!bson_iter_init_find(&it, doc, "roles") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &r))
        return 0;
    while (rc == 0 && bson_iter_next(&r)) {
        bson_t d;
        bson_iter_t f;
        const char *role = NULL, *db = NULL;
        if (!BSON_ITER_HOLDS_DOCUMENT(&r) || !mf_bsonx_doc_view(&r, &d))
            continue;
        if (bson_iter_init_find(&f, &d, "role") && BSON_ITER_HOLDS_UTF8(&f))
            role = bson_iter_utf8(&f, NULL);
        if (bson_iter_init_find(&f, &d, "db") && BSON_ITER_HOLDS_UTF8(&f))
            db = bson_iter_utf8(&f, NULL);
        if (role && db)
            rc = queue_add(q, role, db, err);
    }
    return rc;
}

/* A role document's privileges added to `l`; a resource or an action
 * this server does not know is left out (the role's other privileges
 * still count), as mongod skips what it cannot parse with a warning. */
static int stored_privs_add(const bson_t *doc, mfi_privs *l, mf_error *err)
{
    bson_iter_t it, p;
    int rc = 0;
    if (!bson_iter_init_find(&it, doc, "privileges") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &p))
        return 0;
    while (rc == 0 && bson_iter_next(&p)) {
        bson_t d, res;
        bson_iter_t f, a;
        mfi_resource r;
        mfi_actset acts;
        memset(&acts, 0, sizeof acts);
        if (!BSON_ITER_HOLDS_DOCUMENT(&p) || !mf_bsonx_doc_view(&p, &d) ||
            !bson_iter_init_find(&f, &d, "resource") || !BSON_ITER_HOLDS_DOCUMENT(&f) ||
            !mf_bsonx_doc_view(&f, &res) || !mfi_resource_parse(&res, &r) ||
            !bson_iter_init_find(&a, &d, "actions") || !BSON_ITER_HOLDS_ARRAY(&a) ||
            !bson_iter_recurse(&a, &a))
            continue;
        while (bson_iter_next(&a)) {
            int x = BSON_ITER_HOLDS_UTF8(&a) ? mfi_action_find(bson_iter_utf8(&a, NULL)) : -1;
            if (x >= 0)
                mfi_actset_add(&acts, x);
        }
        rc = mfi_privs_add(l, &r, &acts, err);
    }
    return rc;
}

int mfi_grants_resolve(mf_instance *inst, const bson_t *user_doc, mfi_grants *out, mf_error *err)
{
    role_queue q = {0};
    memset(out, 0, sizeof *out);
    bson_init(&out->roles);
    int rc = queue_roles_of(&q, user_doc, err);
    /* breadth first over the role graph: a built-in role is a leaf, a
     * user-defined one adds its privileges and the roles it inherits; a
     * role that no longer exists gives nothing */
    while (rc == 0 && q.next < q.n) {
        const char *role = q.v[q.next][0], *db = q.v[q.next][1];
        q.next++;
        if (mfi_role_is_builtin(role, db)) {
            rc = mfi_builtin_privs(role, db, &out->privs, err);
            continue;
        }
        bson_t doc;
        bool found;
        rc = mfi_authz_load(inst, "system.roles", db, role, &doc, &found, err);
        if (rc == 0 && found && (rc = stored_privs_add(&doc, &out->privs, err)) == 0)
            rc = queue_roles_of(&q, &doc, err);
        bson_destroy(&doc);
    }
    for (size_t i = 0; rc == 0 && i < q.n; i++) {
        char k[16];
        const char *kk;
        bson_t d;
        bson_uint32_to_string((uint32_t)i, &kk, k, sizeof k);
        bson_append_document_begin(&out->roles, kk, -1, &d);
        BSON_APPEND_UTF8(&d, "role", q.v[i][0]);
        BSON_APPEND_UTF8(&d, "db", q.v[i][1]);
        bson_append_document_end(&out->roles, &d);
    }
    free(q.v);
    if (rc)
        mfi_grants_free(out);
    return rc;
}

/* ---------------------------------------------------------- access control */

uint64_t mfi_authz_generation(mf_instance *inst)
{
    return atomic_load(&inst->authz_gen);
}

void mfi_authz_changed(mf_instance *inst)
{
    atomic_fetch_add(&inst->authz_gen, 1);
}

bool mfi_client_is_local(const mf_client *c)
{
    return c->is_internal || strncmp(c->remote, "127.", 4) == 0 ||
           strncmp(c->remote, "[::1]", 5) == 0 || strncmp(c->remote, "localhost", 9) == 0 ||
           strncmp(c->remote, "anonymous unix socket", 21) == 0;
}

/* Whether admin.system.users or admin.system.roles holds a document
 * (mongod's hasAnyPrivilegeDocuments); counted again after a change.  A
 * failed read counts as documents, as mongod's. */
static bool has_privilege_docs(mf_instance *inst)
{
    uint64_t gen = mfi_authz_generation(inst);
    if (atomic_load(&inst->authz_docs_gen) == gen + 1)
        return atomic_load(&inst->authz_has_docs);
    bool any = false;
    static const char *const colls[] = {"system.users", "system.roles"};
    for (size_t i = 0; i < 2 && !any; i++) {
        bson_t *cmd = BCON_NEW("find", BCON_UTF8(colls[i]), "limit", BCON_INT32(1));
        bson_t reply = BSON_INITIALIZER;
        bson_iter_t it;
        mf_error err;
        if (!cmd || mfi_command_direct(inst, "admin", cmd, &reply, &err) != 0 ||
            !bson_iter_init(&it, &reply) ||
            bson_iter_find_descendant(&it, "cursor.firstBatch.0", &it))
            any = true;
        bson_destroy(&reply);
        if (cmd)
            bson_destroy(cmd);
    }
    atomic_store(&inst->authz_has_docs, any);
    atomic_store(&inst->authz_docs_gen, gen + 1);
    return any;
}

/* The localhost exception: a connection from this host may, while no user
 * and no role exists, do what mongod's default privileges allow --
 * create the first user on admin (or $external) with roles of admin. */
static bool localhost_bypass(mf_cmd_ctx *ctx)
{
    static atomic_bool noted;
    if (!mfi_client_is_local(ctx->client) || has_privilege_docs(ctx->inst))
        return false;
    if (!atomic_exchange(&noted, true))
        mf_log(MF_LOG_INFO, "ACCESS", 20248, ctx->client->remote,
               "note: no users configured in admin.system.users, allowing localhost access");
    return true;
}

static void default_privs(mfi_privs *l)
{
    mf_error err;
    mfi_actset a;
    memset(&a, 0, sizeof a);
    mfi_actset_add(&a, MFA_createUser);
    mfi_actset_add(&a, MFA_grantRole);
    mfi_privs_add(l, &(mfi_resource){.kind = MFR_DB, .db = "admin"}, &a, &err);
    memset(&a, 0, sizeof a);
    mfi_actset_add(&a, MFA_createUser);
    mfi_privs_add(l, &(mfi_resource){.kind = MFR_DB, .db = "$external"}, &a, &err);
    memset(&a, 0, sizeof a);
    mfi_actset_add(&a, MFA_addShard);
    mfi_actset_add(&a, MFA_replSetConfigure);
    mfi_actset_add(&a, MFA_replSetGetStatus);
    mfi_privs_add(l, &(mfi_resource){.kind = MFR_CLUSTER}, &a, &err);
}

/* Who a check is for: the user's privileges (NULL: nobody), and the
 * localhost exception's when it applies. */
typedef struct who {
    const mfi_grants *g;
    bool bypass;
    mfi_privs dflt;
    mf_cmd_ctx *ctx;
} who;

static bool who_may(who *w, const mfi_resource *t, const mfi_actset *need)
{
    if (w->bypass && mfi_privs_allow(&w->dflt, t, need))
        return true;
    return w->g && mfi_privs_allow(&w->g->privs, t, need);
}

static bool may1(who *w, const mfi_resource *t, int action)
{
    mfi_actset need;
    memset(&need, 0, sizeof need);
    mfi_actset_add(&need, action);
    return who_may(w, t, &need);
}

static mfi_resource on_ns(const char *db, const char *coll)
{
    return (mfi_resource){.kind = MFR_EXACT, .db = db, .coll = coll};
}

static mfi_resource on_db(const char *db)
{
    return (mfi_resource){.kind = MFR_DB, .db = db};
}

static const mfi_resource on_cluster = {.kind = MFR_CLUSTER};
static const mfi_resource on_any_normal = {.kind = MFR_ANY_NORMAL};

/* What a command asks for, as it is checked: `needs` are privileges every
 * one of which must be held (and, for a command that opens a cursor,
 * what its getMores check again); `denied` is set by a rule that decided
 * otherwise on its own (an "either" rule, a cursor of another user). */
typedef struct asks {
    who *w;
    mfi_privs needs;
    bool denied;
    int rc;
    mf_error *err;
} asks;

static void ask(asks *a, const mfi_resource *t, int action)
{
    mfi_actset s;
    memset(&s, 0, sizeof s);
    mfi_actset_add(&s, action);
    if (a->rc == 0)
        a->rc = mfi_privs_add(&a->needs, t, &s, a->err);
}

static void ask_ns(asks *a, const char *db, const char *coll, int action)
{
    mfi_resource r = on_ns(db, coll);
    ask(a, &r, action);
}

/* The collection a command names in its first field: a string; anything
 * else (a UUID) is checked against the whole database, which holds for a
 * collection only what holds for all of them. */
static mfi_resource first_ns(const bson_t *cmd, const char *db)
{
    bson_iter_t it;
    if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
        return on_ns(db, bson_iter_utf8(&it, NULL));
    return on_db(db);
}

static bool flag(const bson_t *cmd, const char *name)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, cmd, name) && bson_iter_as_bool(&it);
}

/* "role" (of `db`) or {role, db} entries of array field `key`: grantRole
 * (or revokeRole) on each role's database. */
static void ask_roles(asks *a, const bson_t *cmd, const char *key, const char *db, int action)
{
    bson_iter_t it, r;
    if (!bson_iter_init_find(&it, cmd, key) || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &r))
        return;
    while (bson_iter_next(&r)) {
        const char *rdb = db;
        bson_iter_t f;
        if (BSON_ITER_HOLDS_DOCUMENT(&r) && bson_iter_recurse(&r, &f) &&
            bson_iter_find(&f, "db") && BSON_ITER_HOLDS_UTF8(&f))
            rdb = bson_iter_utf8(&f, NULL);
        mfi_resource t = on_db(rdb);
        ask(a, &t, action);
    }
}

/* A privileges argument: grantRole (revokeRole) on the database of each
 * privilege on a database or a collection of one, on admin for any
 * other (mongod's checkAuthorizedToGrantPrivileges). */
static void ask_privileges(asks *a, const bson_t *cmd, int action)
{
    bson_iter_t it, p;
    if (!bson_iter_init_find(&it, cmd, "privileges") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &p))
        return;
    while (bson_iter_next(&p)) {
        bson_t d, res;
        bson_iter_t f;
        mfi_resource r;
        const char *db = "admin";
        if (BSON_ITER_HOLDS_DOCUMENT(&p) && mf_bsonx_doc_view(&p, &d) &&
            bson_iter_init_find(&f, &d, "resource") && BSON_ITER_HOLDS_DOCUMENT(&f) &&
            mf_bsonx_doc_view(&f, &res) && mfi_resource_parse(&res, &r) &&
            (r.kind == MFR_DB || r.kind == MFR_EXACT))
            db = r.db;
        mfi_resource t = on_db(db);
        ask(a, &t, action);
    }
}

/* A user name argument ("name" of `db`, or {user, db}) into `user`/`udb`. */
static bool user_arg(const bson_iter_t *it, const char *db, const char **user, const char **udb)
{
    bson_iter_t f;
    *udb = db;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        *user = bson_iter_utf8(it, NULL);
        return true;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &f))
        return false;
    *user = NULL;
    while (bson_iter_next(&f)) {
        if (strcmp(bson_iter_key(&f), "user") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            *user = bson_iter_utf8(&f, NULL);
        else if (strcmp(bson_iter_key(&f), "db") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            *udb = bson_iter_utf8(&f, NULL);
    }
    return *user != NULL;
}

static bool is_self(who *w, const char *user, const char *db)
{
    const char *u, *d;
    return mfi_auth_user(w->ctx, &u, &d) && strcmp(u, user) == 0 && strcmp(d, db) == 0;
}

/* Whether the user holds role@db, directly or inherited. */
static bool holds_role(who *w, const char *role, const char *db)
{
    bson_iter_t it, f;
    if (!w->g || !bson_iter_init(&it, &w->g->roles))
        return false;
    while (bson_iter_next(&it)) {
        const char *r = NULL, *d = NULL;
        if (!bson_iter_recurse(&it, &f))
            continue;
        while (bson_iter_next(&f))
            if (strcmp(bson_iter_key(&f), "role") == 0)
                r = bson_iter_utf8(&f, NULL);
            else if (strcmp(bson_iter_key(&f), "db") == 0)
                d = bson_iter_utf8(&f, NULL);
        if (r && d && strcmp(r, role) == 0 && strcmp(d, db) == 0)
            return true;
    }
    return false;
}

/* usersInfo and rolesInfo: 1 (the database's: view on it), forAllDBs
 * (view on the cluster), or names -- one's own user, or a role one holds,
 * needs nothing; any other needs view on its database. */
static void ask_info(asks *a, const bson_t *cmd, const char *db, bool users)
{
    bson_iter_t it, e;
    int action = users ? MFA_viewUser : MFA_viewRole;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &e) &&
        bson_iter_find(&e, "forAllDBs")) {
        ask(a, &on_cluster, action);
        return;
    }
    bool array = BSON_ITER_HOLDS_ARRAY(&it);
    if (!array && !BSON_ITER_HOLDS_UTF8(&it) && !BSON_ITER_HOLDS_DOCUMENT(&it)) {
        mfi_resource t = on_db(db);
        ask(a, &t, action);
        return;
    }
    if (array)
        bson_iter_recurse(&it, &e);
    while (array ? bson_iter_next(&e) : true) {
        const bson_iter_t *one = array ? &e : &it;
        const char *name = NULL, *ndb = db;
        bson_iter_t f;
        if (BSON_ITER_HOLDS_UTF8(one)) {
            name = bson_iter_utf8(one, NULL);
        } else if (BSON_ITER_HOLDS_DOCUMENT(one) && bson_iter_recurse(one, &f)) {
            while (bson_iter_next(&f))
                if (strcmp(bson_iter_key(&f), users ? "user" : "role") == 0 &&
                    BSON_ITER_HOLDS_UTF8(&f))
                    name = bson_iter_utf8(&f, NULL);
                else if (strcmp(bson_iter_key(&f), "db") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                    ndb = bson_iter_utf8(&f, NULL);
        }
        if (!name || !(users ? is_self(a->w, name, ndb) : holds_role(a->w, name, ndb))) {
            mfi_resource t = on_db(ndb);
            ask(a, &t, action);
        }
        if (!array)
            break;
    }
}

/* A stage's target namespace: "coll" (of `db`) or {db, coll}. */
static bool target_of(const bson_iter_t *it, const char *db, const char **tdb, const char **tcoll)
{
    bson_iter_t f;
    *tdb = db;
    *tcoll = NULL;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        *tcoll = bson_iter_utf8(it, NULL);
        return true;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &f))
        return false;
    while (bson_iter_next(&f))
        if (strcmp(bson_iter_key(&f), "db") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            *tdb = bson_iter_utf8(&f, NULL);
        else if (strcmp(bson_iter_key(&f), "coll") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            *tcoll = bson_iter_utf8(&f, NULL);
    return *tcoll != NULL;
}

/* The stages that are their own source of documents (mongod's initial
 * sources): a pipeline that starts with one reads no collection. */
static bool initial_source(const char *stage)
{
    static const char *const names[] = {"$changeStream", "$collStats", "$currentOp",
                                        "$documents", "$indexStats", "$listLocalSessions",
                                        "$listSessions", "$planCacheStats", "$listCatalog"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(stage, names[i]) == 0)
            return true;
    return false;
}

static void ask_pipeline(asks *a, const bson_iter_t *pipeline, const char *db, const char *coll,
                         bool aggregate_1, bool bypass);

/* A $lookup's or $unionWith's reading of `db`.`from`, with its own
 * pipeline (NULL: none). */
static void ask_foreign(asks *a, const char *db, const char *from, const bson_iter_t *sub,
                        bool bypass)
{
    bson_iter_t s, first;
    bool starts_own = false;
    if (sub && BSON_ITER_HOLDS_ARRAY(sub) && bson_iter_recurse(sub, &s) && bson_iter_next(&s) &&
        BSON_ITER_HOLDS_DOCUMENT(&s) && bson_iter_recurse(&s, &first) && bson_iter_next(&first))
        starts_own = initial_source(bson_iter_key(&first));
    if (from && !starts_own)
        ask_ns(a, db, from, MFA_find);
    if (sub && BSON_ITER_HOLDS_ARRAY(sub))
        ask_pipeline(a, sub, db, from ? from : "", false, bypass);
}

/* One stage's privileges (mongod's requiredPrivileges). */
static void ask_stage(asks *a, const char *name, const bson_iter_t *spec, const char *db,
                      const char *coll, bool aggregate_1, bool bypass)
{
    bson_iter_t f;
    const char *tdb, *tcoll;
    if (strcmp(name, "$out") == 0 || strcmp(name, "$merge") == 0) {
        bool merge = name[1] == 'm';
        const char *matched = "merge", *not_matched = "insert";
        bson_iter_t into = *spec;
        if (merge && BSON_ITER_HOLDS_DOCUMENT(spec) && bson_iter_recurse(spec, &f)) {
            while (bson_iter_next(&f))
                if (strcmp(bson_iter_key(&f), "into") == 0)
                    into = f;
                else if (strcmp(bson_iter_key(&f), "whenMatched") == 0 &&
                         BSON_ITER_HOLDS_UTF8(&f))
                    matched = bson_iter_utf8(&f, NULL);
                else if (strcmp(bson_iter_key(&f), "whenMatched") == 0)
                    matched = "pipeline";
                else if (strcmp(bson_iter_key(&f), "whenNotMatched") == 0 &&
                         BSON_ITER_HOLDS_UTF8(&f))
                    not_matched = bson_iter_utf8(&f, NULL);
        }
        if (!target_of(&into, db, &tdb, &tcoll))
            return; /* the stage's own parse refuses it */
        if (!merge) {
            ask_ns(a, tdb, tcoll, MFA_insert);
            ask_ns(a, tdb, tcoll, MFA_remove);
        } else {
            bool inserts = strcmp(not_matched, "insert") == 0;
            bool updates = strcmp(matched, "fail") != 0 && strcmp(matched, "keepExisting") != 0;
            if (inserts)
                ask_ns(a, tdb, tcoll, MFA_insert);
            if (updates || (strcmp(matched, "keepExisting") == 0 && inserts))
                ask_ns(a, tdb, tcoll, MFA_update);
        }
        if (bypass)
            ask_ns(a, tdb, tcoll, MFA_bypassDocumentValidation);
    } else if (strcmp(name, "$lookup") == 0 || strcmp(name, "$unionWith") == 0) {
        const char *from = NULL;
        bson_iter_t sub;
        bool has_sub = false;
        if (BSON_ITER_HOLDS_UTF8(spec))
            from = bson_iter_utf8(spec, NULL);
        else if (BSON_ITER_HOLDS_DOCUMENT(spec) && bson_iter_recurse(spec, &f))
            while (bson_iter_next(&f)) {
                const char *k = bson_iter_key(&f);
                if ((strcmp(k, "from") == 0 || strcmp(k, "coll") == 0) &&
                    target_of(&f, db, &tdb, &tcoll))
                    from = tcoll;
                else if (strcmp(k, "pipeline") == 0)
                    sub = f, has_sub = true;
            }
        ask_foreign(a, db, from, has_sub ? &sub : NULL, bypass);
    } else if (strcmp(name, "$graphLookup") == 0) {
        if (BSON_ITER_HOLDS_DOCUMENT(spec) && bson_iter_recurse(spec, &f) &&
            bson_iter_find(&f, "from") && BSON_ITER_HOLDS_UTF8(&f))
            ask_ns(a, db, bson_iter_utf8(&f, NULL), MFA_find);
    } else if (strcmp(name, "$facet") == 0) {
        if (BSON_ITER_HOLDS_DOCUMENT(spec) && bson_iter_recurse(spec, &f))
            while (bson_iter_next(&f))
                if (BSON_ITER_HOLDS_ARRAY(&f))
                    ask_pipeline(a, &f, db, coll, false, bypass);
    } else if (strcmp(name, "$collStats") == 0) {
        ask_ns(a, db, coll, MFA_collStats);
    } else if (strcmp(name, "$indexStats") == 0) {
        ask_ns(a, db, coll, MFA_indexStats);
    } else if (strcmp(name, "$planCacheStats") == 0) {
        ask_ns(a, db, coll, MFA_planCacheRead);
    } else if (strcmp(name, "$currentOp") == 0) {
        if (BSON_ITER_HOLDS_DOCUMENT(spec) && bson_iter_recurse(spec, &f) &&
            bson_iter_find(&f, "allUsers") && bson_iter_as_bool(&f))
            ask(a, &on_cluster, MFA_inprog);
    } else if (strcmp(name, "$listLocalSessions") == 0 || strcmp(name, "$listSessions") == 0) {
        bool others = false;
        if (BSON_ITER_HOLDS_DOCUMENT(spec) && bson_iter_recurse(spec, &f))
            while (bson_iter_next(&f)) {
                if (strcmp(bson_iter_key(&f), "allUsers") == 0 && bson_iter_as_bool(&f))
                    others = true;
                else if (strcmp(bson_iter_key(&f), "users") == 0 && BSON_ITER_HOLDS_ARRAY(&f)) {
                    bson_iter_t u;
                    bson_iter_recurse(&f, &u);
                    while (bson_iter_next(&u)) {
                        const char *user, *udb;
                        if (!user_arg(&u, "", &user, &udb) || !is_self(a->w, user, udb))
                            others = true;
                    }
                }
            }
        if (others)
            ask(a, &on_cluster, MFA_listSessions);
    } else if (strcmp(name, "$changeStream") == 0) {
        mfi_actset s;
        memset(&s, 0, sizeof s);
        mfi_actset_add(&s, MFA_changeStream);
        mfi_actset_add(&s, MFA_find);
        mfi_resource t = !aggregate_1                   ? on_ns(db, coll)
                         : strcmp(db, "admin") == 0 ? on_any_normal
                                                        : on_db(db);
        if (a->rc == 0)
            a->rc = mfi_privs_add(&a->needs, &t, &s, a->err);
    }
}

static void ask_pipeline(asks *a, const bson_iter_t *pipeline, const char *db, const char *coll,
                         bool aggregate_1, bool bypass)
{
    bson_iter_t s, st;
    bool first = true;
    if (!BSON_ITER_HOLDS_ARRAY(pipeline) || !bson_iter_recurse(pipeline, &s))
        return;
    while (bson_iter_next(&s)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&s) || !bson_iter_recurse(&s, &st) || !bson_iter_next(&st))
            continue;
        const char *name = bson_iter_key(&st);
        if (first && !initial_source(name) && *coll)
            ask_ns(a, db, coll, MFA_find);
        first = false;
        ask_stage(a, name, &st, db, coll, aggregate_1, bypass);
    }
    if (first && *coll) /* an empty pipeline reads the collection */
        ask_ns(a, db, coll, MFA_find);
}

static void ask_command(asks *a, const char *name, const bson_t *cmd, const char *db);

/* renameCollection (mongod's checkAuthForRenameCollectionCommand). */
static void ask_rename(asks *a, const bson_t *cmd)
{
    bson_iter_t it;
    char from_db[128], to_db[128];
    const char *from = NULL, *to = NULL;
    if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
        from = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, cmd, "to") && BSON_ITER_HOLDS_UTF8(&it))
        to = bson_iter_utf8(&it, NULL);
    const char *fd = from ? strchr(from, '.') : NULL, *td = to ? strchr(to, '.') : NULL;
    if (!fd || !td || fd - from >= 128 || td - to >= 128) {
        a->denied = !a->w->g; /* malformed: the command refuses it, if one may run it */
        return;
    }
    snprintf(from_db, sizeof from_db, "%.*s", (int)(fd - from), from);
    snprintf(to_db, sizeof to_db, "%.*s", (int)(td - to), to);
    const char *fc = fd + 1, *tc = td + 1;
    bool drop = flag(cmd, "dropTarget");
    if (strcmp(from_db, to_db) == 0 && normal_collection(from_db, fc) &&
        normal_collection(to_db, tc)) {
        mfi_resource s = on_ns(from_db, fc), t = on_ns(to_db, tc), d = on_db(from_db);
        bool ok = may1(a->w, &d, MFA_renameCollectionSameDB) &&
                  (!drop || may1(a->w, &t, MFA_dropCollection)) &&
                  (may1(a->w, &s, MFA_find) || !may1(a->w, &t, MFA_find));
        if (ok)
            return;
    }
    ask_ns(a, from_db, fc, MFA_find);
    ask_ns(a, from_db, fc, MFA_dropCollection);
    ask_ns(a, to_db, tc, MFA_insert);
    ask_ns(a, to_db, tc, MFA_createIndex);
    if (drop)
        ask_ns(a, to_db, tc, MFA_dropCollection);
}

/* Whether any of the command's write statements (array `key`, field
 * `field` of each) is true. */
static bool any_statement(const bson_t *cmd, const char *key, const char *field)
{
    bson_iter_t it, s, f;
    if (!bson_iter_init_find(&it, cmd, key) || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &s))
        return false;
    while (bson_iter_next(&s))
        if (BSON_ITER_HOLDS_DOCUMENT(&s) && bson_iter_recurse(&s, &f) &&
            bson_iter_find(&f, field) && bson_iter_as_bool(&f))
            return true;
    return false;
}

/* The commands whose one privilege is an action on their collection, on
 * their database or on the cluster. */
typedef struct simple_rule {
    const char *name;
    char on; /* 'n': the collection, 'd': the database, 'c': the cluster */
    int action;
} simple_rule;

static const simple_rule simple_rules[] = {
    {"collStats", 'n', MFA_collStats},
    {"collstats", 'n', MFA_collStats},
    {"convertToCapped", 'n', MFA_convertToCapped},
    {"count", 'n', MFA_find},
    {"createIndexes", 'n', MFA_createIndex},
    {"dbStats", 'd', MFA_dbStats},
    {"dbstats", 'd', MFA_dbStats},
    {"distinct", 'n', MFA_find},
    {"drop", 'n', MFA_dropCollection},
    {"dropAllRolesFromDatabase", 'd', MFA_dropRole},
    {"dropAllUsersFromDatabase", 'd', MFA_dropUser},
    {"dropDatabase", 'd', MFA_dropDatabase},
    {"dropIndexes", 'n', MFA_dropIndex},
    {"dropRole", 'd', MFA_dropRole},
    {"dropUser", 'd', MFA_dropUser},
    {"find", 'n', MFA_find},
    {"fsync", 'c', MFA_fsync},
    {"getClusterParameter", 'c', MFA_getClusterParameter},
    {"getCmdLineOpts", 'c', MFA_getCmdLineOpts},
    {"getLog", 'c', MFA_getLog},
    {"getParameter", 'c', MFA_getParameter},
    {"hostInfo", 'c', MFA_hostInfo},
    {"killAllSessions", 'c', MFA_killAnySession},
    {"listIndexes", 'n', MFA_listIndexes},
    {"planCacheClear", 'n', MFA_planCacheWrite},
    {"replSetGetConfig", 'c', MFA_replSetGetConfig},
    {"replSetGetStatus", 'c', MFA_replSetGetStatus},
    {"replSetInitiate", 'c', MFA_replSetConfigure},
    {"serverStatus", 'c', MFA_serverStatus},
    {"setClusterParameter", 'c', MFA_setClusterParameter},
    {"setParameter", 'c', MFA_setParameter},
    {"shutdown", 'c', MFA_shutdown},
    {"validate", 'n', MFA_validate},
};

/* The commands that need an authenticated user and no privilege (their
 * own rules apply as they run: a cursor's owner, a session's). */
static const char *const no_privilege[] = {
    "abortTransaction", "commitTransaction", "endSessions", "getMore", "listDatabases",
    "logout", "refreshSessions", "startSession", "testDeprecation",
    "testDeprecationInVersion2", "testRemoval", "testVersion2", "testVersions1And2",
    "whatsmyuri"};

bool mfi_authz_has_rule(const char *name)
{
    for (size_t i = 0; i < sizeof simple_rules / sizeof *simple_rules; i++)
        if (strcmp(simple_rules[i].name, name) == 0)
            return true;
    for (size_t i = 0; i < sizeof no_privilege / sizeof *no_privilege; i++)
        if (strcmp(no_privilege[i], name) == 0)
            return true;
    static const char *const own[] = {
        "aggregate", "cloneCollectionAsCapped", "collMod", "create", "createRole",
        "createUser", "delete", "explain", "findAndModify", "findandmodify",
        "grantPrivilegesToRole", "grantRolesToRole", "grantRolesToUser", "insert",
        "killCursors", "listCollections", "profile", "renameCollection",
        "revokePrivilegesFromRole", "revokeRolesFromRole", "revokeRolesFromUser", "rolesInfo",
        "update", "updateRole", "updateUser", "usersInfo"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (strcmp(own[i], name) == 0)
            return true;
    return false;
}

static void ask_command(asks *a, const char *name, const bson_t *cmd, const char *db)
{
    bson_iter_t it;
    mfi_resource ns = first_ns(cmd, db), dbr = on_db(db);
    bool bypass = flag(cmd, "bypassDocumentValidation");

    for (size_t i = 0; i < sizeof simple_rules / sizeof *simple_rules; i++)
        if (strcmp(simple_rules[i].name, name) == 0) {
            char on = simple_rules[i].on;
            ask(a, on == 'n' ? &ns : on == 'd' ? &dbr : &on_cluster, simple_rules[i].action);
            return;
        }
    if (strcmp(name, "insert") == 0 || strcmp(name, "update") == 0 ||
        strcmp(name, "delete") == 0) {
        ask(a, &ns, name[0] == 'i' ? MFA_insert : name[0] == 'u' ? MFA_update : MFA_remove);
        if (name[0] == 'u' && any_statement(cmd, "updates", "upsert"))
            ask(a, &ns, MFA_insert);
        if (bypass)
            ask(a, &ns, MFA_bypassDocumentValidation);
    } else if (strcasecmp(name, "findAndModify") == 0) {
        ask(a, &ns, MFA_find);
        if (bson_iter_init_find(&it, cmd, "update"))
            ask(a, &ns, MFA_update);
        if (flag(cmd, "upsert"))
            ask(a, &ns, MFA_insert);
        if (flag(cmd, "remove"))
            ask(a, &ns, MFA_remove);
        if (bypass)
            ask(a, &ns, MFA_bypassDocumentValidation);
    } else if (strcmp(name, "aggregate") == 0) {
        bool one = ns.kind != MFR_EXACT;
        if (bson_iter_init_find(&it, cmd, "pipeline"))
            ask_pipeline(a, &it, db, one ? "" : ns.coll, one, bypass);
        else if (!one)
            ask(a, &ns, MFA_find);
    } else if (strcmp(name, "explain") == 0) {
        bson_t inner;
        bson_iter_t f;
        if (bson_iter_init_find(&it, cmd, "explain") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            mf_bsonx_doc_view(&it, &inner) && bson_iter_init(&f, &inner) && bson_iter_next(&f))
            ask_command(a, bson_iter_key(&f), &inner, db);
    } else if (strcmp(name, "create") == 0) {
        if (flag(cmd, "capped"))
            ask(a, &ns, MFA_convertToCapped);
        if (!may1(a->w, &ns, MFA_createCollection) && !may1(a->w, &ns, MFA_insert))
            a->denied = true;
    } else if (strcmp(name, "collMod") == 0) {
        ask(a, &ns, MFA_collMod);
    } else if (strcmp(name, "cloneCollectionAsCapped") == 0) {
        ask(a, &ns, MFA_find);
        if (bson_iter_init_find(&it, cmd, "toCollection") && BSON_ITER_HOLDS_UTF8(&it)) {
            const char *to = bson_iter_utf8(&it, NULL);
            ask_ns(a, db, to, MFA_insert);
            ask_ns(a, db, to, MFA_createIndex);
            ask_ns(a, db, to, MFA_convertToCapped);
        }
    } else if (strcmp(name, "renameCollection") == 0) {
        ask_rename(a, cmd);
    } else if (strcmp(name, "listCollections") == 0) {
        /* authorizedCollections with nameOnly: anything on the database
         * will do, and the reply shows what one may use */
        if (!(flag(cmd, "authorizedCollections") && flag(cmd, "nameOnly") &&
              mfi_authz_any_in_db(a->w->ctx, db)))
            ask(a, &dbr, MFA_listCollections);
    } else if (strcmp(name, "profile") == 0) {
        bson_iter_init(&it, cmd);
        bson_iter_next(&it);
        bool reads = bson_iter_as_double(&it) < 0 && !bson_iter_init_find(&it, cmd, "slowms") &&
                     !bson_iter_init_find(&it, cmd, "sampleRate");
        if (reads)
            ask_ns(a, db, "system.profile", MFA_find);
        else
            ask(a, &dbr, MFA_enableProfiler);
    } else if (strcmp(name, "killCursors") == 0) {
        a->denied = !mfi_cursors_may_kill(a->w->ctx, cmd);
    } else if (strcmp(name, "createUser") == 0) {
        ask(a, &dbr, MFA_createUser);
        ask_roles(a, cmd, "roles", db, MFA_grantRole);
    } else if (strcmp(name, "updateUser") == 0) {
        const char *user = NULL, *udb = db;
        bson_iter_init(&it, cmd);
        bson_iter_next(&it);
        if (BSON_ITER_HOLDS_UTF8(&it))
            user = bson_iter_utf8(&it, NULL);
        bool self = user && is_self(a->w, user, udb);
        if (bson_iter_init_find(&it, cmd, "pwd") &&
            !(self && may1(a->w, &dbr, MFA_changeOwnPassword)))
            ask(a, &dbr, MFA_changePassword);
        if (bson_iter_init_find(&it, cmd, "customData") &&
            !(self && may1(a->w, &dbr, MFA_changeOwnCustomData)))
            ask(a, &dbr, MFA_changeCustomData);
        if (bson_iter_init_find(&it, cmd, "roles")) {
            ask(a, &on_any_normal, MFA_revokeRole);
            ask_roles(a, cmd, "roles", db, MFA_grantRole);
        }
    } else if (strcmp(name, "grantRolesToUser") == 0 || strcmp(name, "grantRolesToRole") == 0) {
        ask_roles(a, cmd, "roles", db, MFA_grantRole);
    } else if (strcmp(name, "revokeRolesFromUser") == 0 ||
               strcmp(name, "revokeRolesFromRole") == 0) {
        ask_roles(a, cmd, "roles", db, MFA_revokeRole);
    } else if (strcmp(name, "createRole") == 0) {
        ask(a, &dbr, MFA_createRole);
        ask_roles(a, cmd, "roles", db, MFA_grantRole);
        ask_privileges(a, cmd, MFA_grantRole);
    } else if (strcmp(name, "updateRole") == 0) {
        /* what it takes away is not known: the right to revoke anything */
        ask(a, &on_any_normal, MFA_revokeRole);
        ask_roles(a, cmd, "roles", db, MFA_grantRole);
        ask_privileges(a, cmd, MFA_grantRole);
    } else if (strcmp(name, "grantPrivilegesToRole") == 0) {
        ask_privileges(a, cmd, MFA_grantRole);
    } else if (strcmp(name, "revokePrivilegesFromRole") == 0) {
        ask_privileges(a, cmd, MFA_revokeRole);
    } else if (strcmp(name, "usersInfo") == 0 || strcmp(name, "rolesInfo") == 0) {
        ask_info(a, cmd, db, name[0] == 'u');
    }
    /* no_privilege[]: nothing to ask */
}

/* ------------------------------------------------------------ the checks */

/* Who runs the command: found once, before its session is read (later
 * reads of users and roles would run inside its transaction). */
static int who_init(mf_cmd_ctx *ctx, who *w, mf_error *err)
{
    memset(w, 0, sizeof *w);
    w->ctx = ctx;
    if (!ctx->authz_ready) {
        int rc = mfi_auth_grants(ctx, &ctx->authz_grants, err);
        if (rc)
            return rc;
        ctx->authz_bypass = !ctx->authz_grants && localhost_bypass(ctx);
        ctx->authz_ready = true;
    }
    w->g = ctx->authz_grants;
    if ((w->bypass = ctx->authz_bypass))
        default_privs(&w->dflt);
    return 0;
}

static bool checked(const mf_cmd_ctx *ctx)
{
    return ctx->inst->auth && ctx->client && !ctx->client->is_internal;
}

int mfi_authz_pre(mf_cmd_ctx *ctx, const mf_cmd_def *def, mf_error *err)
{
    if (!checked(ctx) || (def->flags & MF_CMD_NO_AUTH))
        return 0;
    who w;
    int rc = who_init(ctx, &w, err);
    if (rc == 0 && !w.g && !w.bypass)
        rc = mf_error_set(err, MF_Unauthorized, "Command %s requires authentication", def->name);
    mfi_privs_free(&w.dflt);
    return rc;
}

/* mongod's "not authorized" message: the command as it came, with its
 * sensitive fields (a password, a SASL payload) shown as "xxx". */
static int not_authorized(mf_cmd_ctx *ctx, const bson_t *cmd, mf_error *err)
{
    bson_t shown = BSON_INITIALIZER;
    bson_iter_t it;
    char text[MF_ERRMSG_MAX];
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "pwd") == 0 || strcmp(k, "payload") == 0)
            BSON_APPEND_UTF8(&shown, k, "xxx");
        else
            mf_bsonx_append_iter(&shown, k, -1, &it);
    }
    mf_bsonx_to_string(&shown, text, sizeof text);
    bson_destroy(&shown);
    mf_log(MF_LOG_INFO, "ACCESS", 20436, ctx->client->remote,
           "Checking authorization failed: not authorized on %s to execute command %s", ctx->db,
           text);
    return mf_error_set(err, MF_Unauthorized, "not authorized on %s to execute command %s",
                        ctx->db, text);
}

int mfi_authz_check(mf_cmd_ctx *ctx, const mf_cmd_def *def, const bson_t *cmd, mf_error *err)
{
    if (!checked(ctx) || (def->flags & MF_CMD_NO_AUTH))
        return 0;
    who w;
    asks a = {.w = &w, .err = err};
    int rc = who_init(ctx, &w, err);
    if (rc)
        return rc;
    ask_command(&a, def->name, cmd, ctx->db);
    rc = a.rc;
    bool ok = !a.denied;
    for (size_t i = 0; rc == 0 && ok && i < a.needs.n; i++) {
        mfi_priv *p = &a.needs.v[i];
        mfi_resource t = {.kind = p->kind, .db = p->db, .coll = p->coll};
        ok = who_may(&w, &t, &p->acts);
    }
    if (rc == 0 && !ok)
        rc = not_authorized(ctx, cmd, err);
    if (rc == 0 && ctx->authz_needs) {
        /* what a cursor the command opens checks at each getMore */
        mfi_privs_free(ctx->authz_needs);
        *ctx->authz_needs = a.needs;
        memset(&a.needs, 0, sizeof a.needs);
    }
    mfi_privs_free(&a.needs);
    mfi_privs_free(&w.dflt);
    return rc;
}

/* Any action on the database or anything in it (mongod's
 * isAuthorizedForAnyActionOnAnyResourceInDB), for what listDatabases and
 * listCollections show. */
static bool any_in_db(const who *w, const char *db)
{
    if (!w->g)
        return false;
    for (size_t i = 0; i < w->g->privs.n; i++) {
        const mfi_priv *p = &w->g->privs.v[i];
        bool any = false;
        for (size_t x = 0; x < sizeof p->acts.w / sizeof *p->acts.w; x++)
            any |= p->acts.w[x] != 0;
        if (!any)
            continue;
        switch (p->kind) {
        case MFR_ANY:
        case MFR_COLL:
        case MFR_ANY_BUCKETS:
            return true;
        case MFR_ANY_NORMAL:
            if (!special_db(db))
                return true;
            break;
        case MFR_DB:
        case MFR_EXACT:
            if (strcmp(p->db, db) == 0)
                return true;
            break;
        default:
            break;
        }
    }
    return false;
}

bool mfi_authz_any_in_db(mf_cmd_ctx *ctx, const char *db)
{
    who w;
    mf_error err;
    if (!checked(ctx))
        return true;
    bool any = who_init(ctx, &w, &err) == 0 && any_in_db(&w, db);
    mfi_privs_free(&w.dflt);
    return any;
}

bool mfi_authz_any_on_ns(mf_cmd_ctx *ctx, const char *db, const char *coll)
{
    who w;
    mf_error err;
    if (!checked(ctx))
        return true;
    if (who_init(ctx, &w, &err) != 0)
        return false;
    mfi_resource t = on_ns(db, coll);
    bool any = false;
    for (int x = 0; x < MFA__COUNT && !any; x++)
        any = x != MFA_anyAction && may1(&w, &t, x);
    mfi_privs_free(&w.dflt);
    return any;
}

bool mfi_authz_may(mf_cmd_ctx *ctx, const struct mfi_privs *needs)
{
    who w;
    mf_error err;
    if (!checked(ctx) || !needs)
        return true;
    bool ok = who_init(ctx, &w, &err) == 0;
    for (size_t i = 0; ok && i < needs->n; i++) {
        const mfi_priv *p = &needs->v[i];
        mfi_resource t = {.kind = p->kind, .db = p->db, .coll = p->coll};
        ok = who_may(&w, &t, &p->acts);
    }
    mfi_privs_free(&w.dflt);
    return ok;
}

bool mfi_authz_may_action(mf_cmd_ctx *ctx, int action, const char *db, const char *coll)
{
    who w;
    mf_error err;
    if (!checked(ctx))
        return true;
    bool ok = who_init(ctx, &w, &err) == 0;
    if (ok) {
        mfi_resource t = db ? (coll ? on_ns(db, coll) : on_db(db)) : on_cluster;
        ok = may1(&w, &t, action);
        mfi_privs_free(&w.dflt);
    }
    return ok;
}

/* What a copy that could not be made (no memory) stands for: `internal`
 * on the cluster, which only __system holds, so that a cursor whose needs
 * were lost is refused at its getMores, never allowed. */
static mfi_priv impossible_priv = {
    .kind = MFR_CLUSTER,
    .db = "",
    .coll = "",
    .acts = {.w = {[MFA_internal / 64] = (uint64_t)1 << (MFA_internal % 64)}}};
static mfi_privs impossible = {.v = &impossible_priv, .n = 1, .cap = 1};

struct mfi_privs *mfi_privs_dup(const struct mfi_privs *l)
{
    mf_error err;
    if (!l || !l->n)
        return NULL;
    mfi_privs *c = calloc(1, sizeof *c);
    if (!c)
        return &impossible;
    for (size_t i = 0; i < l->n; i++) {
        mfi_resource r = {.kind = l->v[i].kind, .db = l->v[i].db, .coll = l->v[i].coll};
        if (mfi_privs_add(c, &r, &l->v[i].acts, &err) != 0) {
            mfi_privs_destroy(c);
            return &impossible;
        }
    }
    return c;
}

void mfi_privs_destroy(struct mfi_privs *l)
{
    if (l && l != &impossible) {
        mfi_privs_free(l);
        free(l);
    }
}
