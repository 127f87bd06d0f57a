/*
 * test_expr_date.c -- the date operators under concurrency: expr_date.c
 * shares one ICU calendar per time zone between threads behind a mutex;
 * several threads evaluating in the same and in different zones must all
 * get the single-threaded answers (run under ASan by the harness).
 */
#include "../agg/agg.h"
#include "test.h"

#include <pthread.h>

/* Evaluate {$dateToString: {date: <ms>, timezone: <tz>, format: ...}} into out. */
static int to_string(int64_t ms, const char *tz, char *out, size_t cap)
{
    bson_t spec = BSON_INITIALIZER, inner, doc = BSON_INITIALIZER, res = BSON_INITIALIZER;
    bson_iter_t it;
    mf_expr *e = NULL;
    mf_error err;
    bool missing;
    int rc;
    BSON_APPEND_DOCUMENT_BEGIN(&spec, "$dateToString", &inner);
    BSON_APPEND_DATE_TIME(&inner, "date", ms);
    BSON_APPEND_UTF8(&inner, "timezone", tz);
    BSON_APPEND_UTF8(&inner, "format", "%Y-%m-%d %H:%M %z");
    bson_append_document_end(&spec, &inner);
    bson_t wrap = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&wrap, "e", &spec);
    bson_iter_init_find(&it, &wrap, "e");
    rc = mf_expr_parse(&it, NULL, 0, &e, &err);
    if (rc == 0)
        rc = mf_expr_eval(e, &doc, NULL, &res, "r", &missing, &err);
    if (rc == 0 && bson_iter_init_find(&it, &res, "r"))
        snprintf(out, cap, "%s", bson_iter_utf8(&it, NULL));
    mf_expr_free(e);
    bson_destroy(&spec);
    bson_destroy(&wrap);
    bson_destroy(&doc);
    bson_destroy(&res);
    return rc;
}

static const char *const zones[] = {"America/New_York", "Europe/Berlin", "Asia/Kolkata",
                                    "America/New_York"};
static const int64_t base_ms = 1636264800000LL; /* 2021-11-07T06:00:00Z */
#define NSTEPS 300

static char expect[4][NSTEPS][40];

static void *worker(void *arg)
{
    int z = (int)(intptr_t)arg, bad = 0;
    char got[40];
    for (int round = 0; round < 5; round++)
        for (int i = 0; i < NSTEPS; i++)
            if (to_string(base_ms + (int64_t)i * 1800000, zones[z], got, sizeof got) != 0 ||
                strcmp(got, expect[z][i]) != 0)
                bad++;
    return (void *)(intptr_t)bad;
}

MFT_CASE(date_zones_threads, "/agg/expr_date/zones_threads")
{
    for (int z = 0; z < 4; z++)
        for (int i = 0; i < NSTEPS; i++)
            CHECK_INT(to_string(base_ms + (int64_t)i * 1800000, zones[z], expect[z][i], 40), 0);
    CHECK_STR(expect[0][0], "2021-11-07 01:00 -0500");
    CHECK_STR(expect[1][0], "2021-11-07 07:00 +0100");
    CHECK_STR(expect[2][1], "2021-11-07 12:00 +0530");
    pthread_t th[8];
    for (int t = 0; t < 8; t++)
        CHECK_INT(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)(t % 4)), 0);
    int bad = 0;
    for (int t = 0; t < 8; t++) {
        void *r;
        pthread_join(th[t], &r);
        bad += (int)(intptr_t)r;
    }
    CHECK_INT(bad, 0);
}
