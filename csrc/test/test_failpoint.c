/* Cases for the fail points (command/failpoint.c, fail_command.c) through the
 * dispatcher, without a socket; the threads case is for the sanitizers. */
#include "test.h"
#include "cmdtest.h"

#include <pthread.h>
#include <stdlib.h>

static mf_instance *open_instance(void)
{
    return mft_instance_open(true);
}

/* Run `cmd` (consumed) and return the reply; `*flags` gets MF_RUN_*. */
static bson_t *run(mf_instance *inst, mf_client *client, bson_t *cmd, int *flags)
{
    return mft_command(inst, client, cmd, flags);
}

static int32_t reply_int(const bson_t *reply, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, key) && BSON_ITER_HOLDS_INT32(&it)
               ? bson_iter_int32(&it)
               : -1;
}

/* The reply's keys joined with ',', for checking their order. */
static void keys_of(const bson_t *reply, char *out, size_t cap)
{
    bson_iter_t it;
    size_t n = 0;
    out[0] = '\0';
    bson_iter_init(&it, reply);
    while (bson_iter_next(&it) && n < cap)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? "," : "", bson_iter_key(&it));
}

static int32_t ping_code(mf_instance *inst, mf_client *client)
{
    bson_t *r = run(inst, client, BCON_NEW("ping", BCON_INT32(1), "$db", "admin"), NULL);
    int32_t code = reply_int(r, "code");
    bson_destroy(r);
    return code < 0 ? 0 : code;
}

static int32_t configure(mf_instance *inst, mf_client *client, bson_t *cmd)
{
    bson_t *r = run(inst, client, cmd, NULL);
    int32_t count = reply_int(r, "count");
    bson_destroy(r);
    return count;
}

MFT_CASE(fp_times, "/command/failpoint/times_counts_down")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 1};
    CHECK_INT(configure(inst, &client,
                        BCON_NEW("configureFailPoint", "failCommand", "mode", "{", "times",
                                 BCON_INT32(2), "}", "data", "{", "failCommands", "[", "ping",
                                 "]", "errorCode", BCON_INT32(2), "}", "$db", "admin")),
              0);
    CHECK_INT(ping_code(inst, &client), 2);
    CHECK_INT(ping_code(inst, &client), 2);
    CHECK_INT(ping_code(inst, &client), 0);
    CHECK_INT(configure(inst, &client,
                        BCON_NEW("configureFailPoint", "failCommand", "mode", "off", "$db",
                                 "admin")),
              2);
    mf_instance_close(inst);
}

MFT_CASE(fp_close, "/command/failpoint/close_connection_sets_the_flag")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 1};
    int flags = 0;
    configure(inst, &client,
              BCON_NEW("configureFailPoint", "failCommand", "mode", "alwaysOn", "data", "{",
                       "failCommands", "[", "ping", "]", "closeConnection", BCON_BOOL(true),
                       "}", "$db", "admin"));
    bson_t *r = run(inst, &client, BCON_NEW("ping", BCON_INT32(1), "$db", "admin"), &flags);
    CHECK(flags & MF_RUN_CLOSE);
    CHECK_INT(reply_int(r, "code"), 50985);
    bson_destroy(r);
    /* The in-process caller is a local client: untouched by default. */
    mf_client local = {.is_internal = true};
    r = run(inst, &local, BCON_NEW("ping", BCON_INT32(1), "$db", "admin"), &flags);
    CHECK_INT(flags, 0);
    CHECK_INT(reply_int(r, "code"), -1);
    bson_destroy(r);
    mf_instance_close(inst);
}

MFT_CASE(fp_wce, "/command/failpoint/write_concern_error_order")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 1};
    char keys[256];
    configure(inst, &client,
              BCON_NEW("configureFailPoint", "failCommand", "mode", "alwaysOn", "data", "{",
                       "failCommands", "[", "insert", "]", "writeConcernError", "{", "code",
                       BCON_INT32(100), "errmsg", "x", "}", "errorLabels", "[", "L", "]", "}",
                       "$db", "admin"));
    bson_t *r = run(inst, &client,
                    BCON_NEW("insert", "c", "documents", "[", "{", "_id", BCON_INT32(1), "}",
                             "]", "$db", "db"),
                    NULL);
    keys_of(r, keys, sizeof keys);
    CHECK_STR(keys, "n,writeConcernError,ok,errorLabels");
    bson_destroy(r);
    mf_instance_close(inst);
}

/* Threads entering one fail point: `times` is used up exactly. */
typedef struct fp_worker {
    mf_instance *inst;
    int64_t id;
    int failed;
} fp_worker;

static void *fp_worker_main(void *arg)
{
    fp_worker *w = arg;
    mf_client client = {.id = w->id};
    for (int i = 0; i < 60; i++)
        if (ping_code(w->inst, &client) == 2)
            w->failed++;
    return NULL;
}

MFT_CASE(fp_threads, "/command/failpoint/times_exact_across_threads")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 100};
    configure(inst, &client,
              BCON_NEW("configureFailPoint", "failCommand", "mode", "{", "times",
                       BCON_INT32(101), "}", "data", "{", "failCommands", "[", "ping", "]",
                       "errorCode", BCON_INT32(2), "}", "$db", "admin"));
    fp_worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (fp_worker){.inst = inst, .id = i + 1};
        CHECK(pthread_create(&th[i], NULL, fp_worker_main, &w[i]) == 0);
    }
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        failed += w[i].failed;
    }
    CHECK_INT(failed, 101);
    mf_instance_close(inst);
}

static int32_t ping_max_time_code(mf_instance *inst, mf_client *client, int32_t ms)
{
    bson_t *r = run(inst, client,
                    BCON_NEW("ping", BCON_INT32(1), "maxTimeMS", BCON_INT32(ms), "$db", "admin"),
                    NULL);
    int32_t code = reply_int(r, "code");
    bson_destroy(r);
    return code < 0 ? 0 : code;
}

MFT_CASE(fp_max_time, "/command/failpoint/max_time_always_time_out_times")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_client client = {.id = 1};
    CHECK_INT(configure(inst, &client,
                        BCON_NEW("configureFailPoint", "maxTimeAlwaysTimeOut", "mode", "{",
                                 "times", BCON_INT32(2), "}", "$db", "admin")),
              0);
    CHECK_INT(ping_max_time_code(inst, &client, 0), 0); /* no limit: not entered */
    CHECK_INT(ping_max_time_code(inst, &client, 60000), 50);
    CHECK_INT(ping_code(inst, &client), 0);
    CHECK_INT(ping_max_time_code(inst, &client, 1), 50);
    CHECK_INT(ping_max_time_code(inst, &client, 1), 0); /* its two times used */
    CHECK_INT(configure(inst, &client,
                        BCON_NEW("configureFailPoint", "maxTimeAlwaysTimeOut", "mode", "off",
                                 "$db", "admin")),
              2);
    /* failCommand counts its own entries */
    CHECK_INT(configure(inst, &client,
                        BCON_NEW("configureFailPoint", "failCommand", "mode", "off", "$db",
                                 "admin")),
              0);
    mf_instance_close(inst);
}
