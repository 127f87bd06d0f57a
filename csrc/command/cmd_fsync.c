/*
 * cmd_fsync.c -- fsync: make everything acknowledged so far part of a
 * checkpoint now (mongod's {fsync: 1} flushes the storage engine the same
 * way).  Every acknowledged write is already durable in the log; this
 * writes the data file's image and lets the log before it go.  {lock:
 * true} (fsyncLock) is not supported.
 */
#include "command_int.h"

int mfi_cmd_fsync(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, cmd, "lock") && bson_iter_as_bool(&it))
        return mf_error_set(err, MF_CommandNotSupported,
                            "fsync with lock: true (fsyncLock) is not supported");
    int rc = mf_engine_checkpoint(ctx->inst->engine, err);
    if (rc)
        return rc;
    BSON_APPEND_INT32(reply, "numFiles", 1);
    return 0;
}
