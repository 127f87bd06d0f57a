/*
 * instance.c -- what every part of the server asks of its instance: the
 * shutdown flag and a sleep that shutdown cuts short, the counters, the
 * address it answers as, its directory for sorts that spill.  Opening and
 * closing the instance, which wire every part together, are dispatch.c's.
 */
#include "command_int.h"

#include <stdio.h>

void mf_instance_set_me(mf_instance *inst, const char *host)
{
    mfi_repl_set_me(inst, host);
}

mf_counters *mf_instance_counters(mf_instance *inst)
{
    return &inst->counters;
}

void mf_instance_begin_shutdown(mf_instance *inst)
{
    pthread_mutex_lock(&inst->mu);
    inst->is_shutting_down = true;
    pthread_cond_broadcast(&inst->cond);
    pthread_mutex_unlock(&inst->mu);
}

bool mf_instance_is_shutting_down(mf_instance *inst)
{
    pthread_mutex_lock(&inst->mu);
    bool v = inst->is_shutting_down;
    pthread_mutex_unlock(&inst->mu);
    return v;
}

bool mfi_instance_sleep(mf_instance *inst, int64_t ms)
{
    struct timespec deadline;
    mf_clock_deadline(CLOCK_MONOTONIC, ms, &deadline);
    pthread_mutex_lock(&inst->mu);
    while (!inst->is_shutting_down) {
        if (pthread_cond_timedwait(&inst->cond, &inst->mu, &deadline) != 0)
            break; /* ETIMEDOUT */
    }
    bool v = inst->is_shutting_down;
    pthread_mutex_unlock(&inst->mu);
    return v;
}

/* The temporary directory for sorts that spill. */
void mfi_tmpdir_of(mf_instance *inst, char *out, size_t cap)
{
    snprintf(out, cap, "%s/_tmp", inst->dbpath);
}
