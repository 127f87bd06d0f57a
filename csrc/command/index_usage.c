/*
 * index_usage.c -- how often each index was used, for $indexStats'
 * `accesses: {ops, since}`.
 *
 * mongod's CollectionIndexUsageTracker counts, per index, the operations
 * whose plan read it; the counters live in memory, start at zero when the
 * server starts or the index is created, and vanish with the index.  Here
 * they are a small table in the instance keyed by (namespace, index name),
 * under its own mutex: mfi_scan_new counts a scan planned on an index
 * (IXSCAN or IDHACK), createIndexes starts a fresh counter (`since` now),
 * dropping an index, its collection or its database forgets the counters.
 * An index with no entry has existed since the server started: ops 0,
 * since the start.
 */
#include "command_int.h"

#include <stdlib.h>
#include <string.h>

struct mfi_index_usage {
    char *ns;
    char *index;
    int64_t ops;
    int64_t since_ms;
};

void mfi_index_usage_init(mf_instance *inst)
{
    pthread_mutex_init(&inst->usage_mu, NULL);
    inst->usage = NULL;
    inst->nusage = inst->capusage = 0;
}

static void entry_free(mfi_index_usage *u)
{
    free(u->ns);
    free(u->index);
}

void mfi_index_usage_destroy(mf_instance *inst)
{
    for (size_t i = 0; i < inst->nusage; i++)
        entry_free(&inst->usage[i]);
    free(inst->usage);
    inst->usage = NULL;
    inst->nusage = inst->capusage = 0;
    pthread_mutex_destroy(&inst->usage_mu);
}

/* The entry of (ns, index), NULL if none.  Caller holds usage_mu. */
static mfi_index_usage *find(mf_instance *inst, const char *ns, const char *index)
{
    for (size_t i = 0; i < inst->nusage; i++)
        if (strcmp(inst->usage[i].ns, ns) == 0 && strcmp(inst->usage[i].index, index) == 0)
            return &inst->usage[i];
    return NULL;
}

/* A new entry (ops 0).  Caller holds usage_mu.  NULL when out of memory:
 * the counter is then not kept, which only under-reports. */
static mfi_index_usage *add(mf_instance *inst, const char *ns, const char *index, int64_t since)
{
    if (inst->nusage == inst->capusage) {
        size_t cap = inst->capusage ? 2 * inst->capusage : 16;
        mfi_index_usage *v = realloc(inst->usage, cap * sizeof *v);
        if (!v)
            return NULL;
        inst->usage = v;
        inst->capusage = cap;
    }
    mfi_index_usage *u = &inst->usage[inst->nusage];
    u->ns = strdup(ns);
    u->index = strdup(index);
    if (!u->ns || !u->index) {
        entry_free(u);
        return NULL;
    }
    u->ops = 0;
    u->since_ms = since;
    inst->nusage++;
    return u;
}

void mfi_index_usage_count(mf_instance *inst, const char *ns, const char *index)
{
    pthread_mutex_lock(&inst->usage_mu);
    mfi_index_usage *u = find(inst, ns, index);
    if (!u)
        u = add(inst, ns, index, inst->start_wall_ms);
    if (u)
        u->ops++;
    pthread_mutex_unlock(&inst->usage_mu);
}

void mfi_index_usage_forget(mf_instance *inst, const char *ns, const char *index)
{
    size_t nslen = strlen(ns);
    pthread_mutex_lock(&inst->usage_mu);
    for (size_t i = 0; i < inst->nusage;) {
        mfi_index_usage *u = &inst->usage[i];
        bool hit = index ? strcmp(u->ns, ns) == 0 && strcmp(u->index, index) == 0
                         : strcmp(u->ns, ns) == 0 ||
                               (ns[nslen - 1] == '.' && strncmp(u->ns, ns, nslen) == 0);
        if (hit) {
            entry_free(u);
            inst->usage[i] = inst->usage[--inst->nusage];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&inst->usage_mu);
}

void mfi_index_usage_start(mf_instance *inst, const char *ns, const char *index)
{
    mfi_index_usage_forget(inst, ns, index);
    pthread_mutex_lock(&inst->usage_mu);
    (void)add(inst, ns, index, mf_clock_wall_ms());
    pthread_mutex_unlock(&inst->usage_mu);
}

void mfi_index_usage_get(mf_instance *inst, const char *ns, const char *index, int64_t *ops,
                         int64_t *since_ms)
{
    pthread_mutex_lock(&inst->usage_mu);
    const mfi_index_usage *u = find(inst, ns, index);
    *ops = u ? u->ops : 0;
    *since_ms = u ? u->since_ms : inst->start_wall_ms;
    pthread_mutex_unlock(&inst->usage_mu);
}
