/* cmdtest.c -- shared set-up for the command-layer cases (cmdtest.h). */
#include "test.h"
#include "cmdtest.h"

mf_instance *mft_instance_open(bool test_commands)
{
    mf_instance_config cfg = {.dbpath = mft_tmpdir(), .max_connections = 10,
                              .enable_test_commands = test_commands};
    mf_instance *inst = NULL;
    mf_error err;
    if (mf_instance_open(&cfg, &inst, &err) != 0) {
        printf("  mf_instance_open: %s\n", err.msg);
        return NULL;
    }
    return inst;
}

bson_t *mft_command(mf_instance *inst, mf_client *client, bson_t *cmd, int *flags)
{
    bson_t *reply = bson_new();
    int f = 0;
    mf_command_run(inst, client, cmd, reply, &f);
    if (flags)
        *flags = f;
    bson_destroy(cmd);
    return reply;
}
