/* Cases for csrc/command: the table and the dispatcher, without a socket. */
#include "test.h"
#include "cmdtest.h"
#include "../command/authz_int.h"

#include <stdlib.h>

static mf_instance *open_instance(void)
{
    return mft_instance_open(false);
}

/* Run `cmd` (a BCON-built document, consumed) and return the reply. */
static bson_t *run(mf_instance *inst, mf_client *client, bson_t *cmd, int *flags)
{
    return mft_command(inst, client, cmd, flags);
}

static int32_t reply_code(const bson_t *reply)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, "code") ? bson_iter_int32(&it) : 0;
}

static double reply_ok(const bson_t *reply)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, "ok") ? bson_iter_as_double(&it) : -1;
}

static const char *reply_str(const bson_t *reply, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, key) && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : NULL;
}

MFT_CASE(table_sorted, "/command/table/sorted_and_found")
{
    size_t n;
    const mf_cmd_def *t = mfi_command_table(&n);
    for (size_t i = 1; i < n; i++)
        CHECK(strcmp(t[i - 1].name, t[i].name) < 0);
    for (size_t i = 0; i < n; i++)
        CHECK(mfi_command_find(t[i].name) == &t[i]);
    CHECK(mfi_command_find("Ping") == NULL);
    CHECK(mfi_command_find("") == NULL);
}

/* Access control has a rule for every command: one that needs no
 * authentication, or a check of its own (authz.c); a command added to the
 * table without one fails here, not open to anyone at run time. */
MFT_CASE(table_authz, "/command/table/every_command_checked")
{
    size_t n;
    const mf_cmd_def *t = mfi_command_table(&n);
    for (size_t i = 0; i < n; i++)
        if (!(t[i].flags & MF_CMD_NO_AUTH) && !mfi_authz_has_rule(t[i].name)) {
            fprintf(stderr, "no access control rule for %s\n", t[i].name);
            CHECK(false);
        }
    CHECK(!mfi_authz_has_rule("nosuch"));
}

/* The action names are mongod's, each once. */
MFT_CASE(actions_named, "/command/authz/actions")
{
    CHECK_INT(MFA__COUNT, 164);
    for (int a = 0; a < MFA__COUNT; a++) {
        CHECK_INT(mfi_action_find(mfi_action_name(a)), a);
    }
    CHECK_INT(mfi_action_find("find"), MFA_find);
    CHECK_INT(mfi_action_find("fly"), -1);
    CHECK(strcmp(mfi_action_name(MFA_getChangeStreamState), "getChangeStreamState") == 0);
    CHECK_INT(MFA_getChangeStreamState, MFA__COUNT - 1);
}

/* The resource search list: what each kind of privilege covers. */
MFT_CASE(authz_search_list, "/command/authz/search_list")
{
    mfi_privs l = {0};
    mf_error err;
    mfi_actset find = {{0}};
    mfi_actset_add(&find, MFA_find);
    CHECK_INT(mfi_privs_add(&l, &(mfi_resource){.kind = MFR_DB, .db = "test"}, &find, &err), 0);
    mfi_resource c = {.kind = MFR_EXACT, .db = "test", .coll = "c"};
    mfi_resource sys = {.kind = MFR_EXACT, .db = "test", .coll = "system.js"};
    mfi_resource other = {.kind = MFR_EXACT, .db = "other", .coll = "c"};
    CHECK(mfi_privs_allow(&l, &c, &find));
    CHECK(!mfi_privs_allow(&l, &sys, &find));   /* not a normal collection */
    CHECK(!mfi_privs_allow(&l, &other, &find));
    mfi_actset both = find;
    mfi_actset_add(&both, MFA_insert);
    CHECK(!mfi_privs_allow(&l, &c, &both));
    /* actions add up across the patterns that cover a target */
    mfi_actset ins = {{0}};
    mfi_actset_add(&ins, MFA_insert);
    CHECK_INT(mfi_privs_add(&l, &(mfi_resource){.kind = MFR_COLL, .coll = "c"}, &ins, &err), 0);
    CHECK(mfi_privs_allow(&l, &c, &both));
    mfi_privs_free(&l);
    /* {db: "", collection: ""} covers no system collection, nor local */
    CHECK_INT(mfi_privs_add(&l, &(mfi_resource){.kind = MFR_ANY_NORMAL}, &find, &err), 0);
    CHECK(mfi_privs_allow(&l, &c, &find));
    CHECK(!mfi_privs_allow(&l, &sys, &find));
    CHECK(!mfi_privs_allow(&l, &(mfi_resource){.kind = MFR_EXACT, .db = "local", .coll = "x"},
                           &find));
    CHECK(!mfi_privs_allow(&l, &(mfi_resource){.kind = MFR_CLUSTER}, &find));
    mfi_privs_free(&l);
    /* anyAction on anyResource: everything */
    mfi_actset any = {{0}};
    mfi_actset_add(&any, MFA_anyAction);
    CHECK_INT(mfi_privs_add(&l, &(mfi_resource){.kind = MFR_ANY}, &any, &err), 0);
    CHECK(mfi_privs_allow(&l, &sys, &both));
    CHECK(mfi_privs_allow(&l, &(mfi_resource){.kind = MFR_CLUSTER}, &find));
    mfi_privs_free(&l);
}

/* Built-in roles: where they exist, and root's privileges in mongod's
 * order (its sub-roles first). */
MFT_CASE(authz_builtin, "/command/authz/builtin_roles")
{
    mf_error err;
    CHECK(mfi_role_is_builtin("read", "test"));
    CHECK(mfi_role_is_builtin("enableSharding", "test"));
    CHECK(!mfi_role_is_builtin("root", "test"));
    CHECK(mfi_role_is_builtin("root", "admin"));
    CHECK(!mfi_role_is_builtin("read", "$external"));
    CHECK(!mfi_role_is_builtin("reader", "admin"));
    mfi_privs l = {0};
    CHECK_INT(mfi_builtin_privs("dbOwner", "x", &l, &err), 0);
    CHECK_INT(l.n, 3); /* x, x.system.js, x.system.profile */
    CHECK(l.v[0].kind == MFR_DB && strcmp(l.v[0].db, "x") == 0);
    CHECK(mfi_actset_has(&l.v[0].acts, MFA_dropDatabase));
    CHECK(mfi_actset_has(&l.v[0].acts, MFA_createUser));
    CHECK(mfi_actset_has(&l.v[0].acts, MFA_insert));
    mfi_privs_free(&l);
    CHECK_INT(mfi_builtin_privs("root", "admin", &l, &err), 0);
    CHECK_INT(l.n, 25);
    mfi_privs_free(&l);
    CHECK_INT(mfi_builtin_privs("nosuch", "admin", &l, &err), 0);
    CHECK_INT(l.n, 0);
}

MFT_CASE(dispatch_ping, "/command/dispatch/ping")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 1};
    bson_t *r = run(inst, &client, BCON_NEW("ping", BCON_INT32(1), "$db", "admin"), NULL);
    CHECK(reply_ok(r) == 1.0);
    CHECK_INT(bson_count_keys(r), 1);
    bson_destroy(r);
    mf_instance_close(inst);
}

MFT_CASE(dispatch_errors, "/command/dispatch/errors")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 1};
    bson_t *r;

    r = run(inst, &client, BCON_NEW("nosuch", BCON_INT32(1), "$db", "test"), NULL);
    CHECK(reply_ok(r) == 0.0);
    CHECK_INT(reply_code(r), MF_CommandNotFound);
    CHECK_STR(reply_str(r, "errmsg"), "no such command: 'nosuch'");
    CHECK_STR(reply_str(r, "codeName"), "CommandNotFound");
    bson_destroy(r);

    r = run(inst, &client, BCON_NEW("ping", BCON_INT32(1)), NULL);
    CHECK_INT(reply_code(r), 40571);
    CHECK_STR(reply_str(r, "codeName"), "Location40571");
    bson_destroy(r);

    r = run(inst, &client, bson_new(), NULL);
    CHECK_INT(reply_code(r), 40571);
    bson_destroy(r);

    r = run(inst, &client, BCON_NEW("getParameter", "*", "$db", "test"), NULL);
    CHECK_INT(reply_code(r), MF_Unauthorized);
    CHECK_STR(reply_str(r, "errmsg"), "getParameter may only be run against the admin database.");
    bson_destroy(r);

    r = run(inst, &client, BCON_NEW("getParameter", BCON_INT32(1), "nosuch", BCON_INT32(1),
                                    "$db", "admin"), NULL);
    CHECK_INT(reply_code(r), MF_InvalidOptions);
    bson_destroy(r);

    r = run(inst, &client, BCON_NEW("getLog", "nosuch", "$db", "admin"), NULL);
    CHECK(reply_ok(r) == 0.0);
    CHECK_STR(reply_str(r, "errmsg"), "no RamLog named: nosuch");
    CHECK_INT(reply_code(r), 0); /* as mongod: errmsg only */
    bson_destroy(r);
    mf_instance_close(inst);
}

MFT_CASE(dispatch_hello, "/command/dispatch/hello_fields_and_metadata")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 7};
    bson_iter_t it;
    bson_t *r = run(inst, &client,
                    BCON_NEW("hello", BCON_INT32(1), "helloOk", BCON_BOOL(true), "client",
                             "{", "driver", "{", "name", "ctest", "}", "}", "$db", "admin"),
                    NULL);
    static const char *order[] = {"helloOk", "isWritablePrimary", "topologyVersion",
                                  "maxBsonObjectSize", "maxMessageSizeBytes",
                                  "maxWriteBatchSize", "localTime",
                                  "logicalSessionTimeoutMinutes", "connectionId",
                                  "minWireVersion", "maxWireVersion", "readOnly", "ok"};
    CHECK(bson_iter_init(&it, r));
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        CHECK(bson_iter_next(&it));
        CHECK_STR(bson_iter_key(&it), order[i]);
    }
    CHECK(!bson_iter_next(&it));
    CHECK(bson_iter_init_find(&it, r, "maxWireVersion") && bson_iter_int32(&it) == 21);
    CHECK(bson_iter_init_find(&it, r, "connectionId") && bson_iter_as_int64(&it) == 7);
    bson_destroy(r);

    /* A second hello may not carry client metadata. */
    r = run(inst, &client,
            BCON_NEW("hello", BCON_INT32(1), "client", "{", "x", BCON_INT32(1), "}", "$db",
                     "admin"),
            NULL);
    CHECK_INT(reply_code(r), MF_ClientMetadataCannotBeMutated);
    bson_destroy(r);

    /* isMaster answers with the legacy field. */
    r = run(inst, &client, BCON_NEW("isMaster", BCON_INT32(1), "$db", "admin"), NULL);
    CHECK(bson_iter_init_find(&it, r, "ismaster") && bson_iter_as_bool(&it));
    CHECK(!bson_iter_init_find(&it, r, "isWritablePrimary"));
    bson_destroy(r);
    mf_instance_close(inst);
}

MFT_CASE(awaitable_hello, "/command/dispatch/awaitable_hello_waits_and_wakes")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 1};
    int flags;
    bson_iter_t it;
    bson_t *r = run(inst, &client, BCON_NEW("hello", BCON_INT32(1), "$db", "admin"), NULL);
    CHECK(bson_iter_init_find(&it, r, "topologyVersion"));
    bson_iter_t tv;
    CHECK(bson_iter_recurse(&it, &tv) && bson_iter_find(&tv, "processId"));
    bson_oid_t pid;
    bson_oid_copy(bson_iter_oid(&tv), &pid);
    bson_destroy(r);

    int64_t t0 = mf_clock_mono_us();
    r = run(inst, &client,
            BCON_NEW("hello", BCON_INT32(1), "topologyVersion", "{", "processId", BCON_OID(&pid),
                     "counter", BCON_INT64(0), "}", "maxAwaitTimeMS", BCON_INT64(80), "$db",
                     "admin"),
            &flags);
    int64_t waited = mf_clock_mono_us() - t0;
    CHECK(reply_ok(r) == 1.0);
    CHECK(flags & MF_RUN_EXHAUST);
    CHECK(waited >= 80000);
    bson_destroy(r);

    /* Another process's topology version: answered at once. */
    bson_oid_t other;
    bson_oid_init(&other, NULL);
    t0 = mf_clock_mono_us();
    r = run(inst, &client,
            BCON_NEW("hello", BCON_INT32(1), "topologyVersion", "{", "processId",
                     BCON_OID(&other), "counter", BCON_INT64(0), "}", "maxAwaitTimeMS",
                     BCON_INT64(5000), "$db", "admin"),
            NULL);
    CHECK(mf_clock_mono_us() - t0 < 2000000);
    CHECK(reply_ok(r) == 1.0);
    bson_destroy(r);

    /* Mismatched halves are errors. */
    r = run(inst, &client, BCON_NEW("hello", BCON_INT32(1), "maxAwaitTimeMS", BCON_INT64(5),
                                    "$db", "admin"), NULL);
    CHECK_INT(reply_code(r), 31368);
    bson_destroy(r);

    /* Shutdown ends a wait early. */
    mf_instance_begin_shutdown(inst);
    t0 = mf_clock_mono_us();
    r = run(inst, &client,
            BCON_NEW("hello", BCON_INT32(1), "topologyVersion", "{", "processId", BCON_OID(&pid),
                     "counter", BCON_INT64(0), "}", "maxAwaitTimeMS", BCON_INT64(10000), "$db",
                     "admin"),
            NULL);
    CHECK(mf_clock_mono_us() - t0 < 2000000);
    CHECK_INT(reply_code(r), MF_ShutdownInProgress);
    bson_destroy(r);
    mf_instance_close(inst);
}

MFT_CASE(dispatch_shutdown, "/command/dispatch/shutdown_closes_and_requests_stop")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client remote = {.id = 1};
    snprintf(remote.remote, sizeof remote.remote, "10.1.2.3:5555");
    int flags;
    bson_t *r = run(inst, &remote, BCON_NEW("shutdown", BCON_INT32(1), "$db", "admin"), &flags);
    CHECK_INT(reply_code(r), MF_Unauthorized);
    CHECK(!mf_instance_is_shutting_down(inst));
    bson_destroy(r);

    mf_client local = {.id = 2};
    snprintf(local.remote, sizeof local.remote, "127.0.0.1:5555");
    r = run(inst, &local, BCON_NEW("shutdown", BCON_INT32(1), "$db", "test"), &flags);
    CHECK_INT(reply_code(r), MF_Unauthorized);
    bson_destroy(r);
    r = run(inst, &local, BCON_NEW("shutdown", BCON_INT32(1), "$db", "admin"), &flags);
    CHECK(flags & MF_RUN_CLOSE);
    CHECK(mf_instance_is_shutting_down(inst));
    bson_destroy(r);
    mf_instance_close(inst);
}
