/* What the command-layer cases share: an instance over a fresh directory
 * and one command run through the dispatcher, without a socket. */
#ifndef MF_TEST_CMDTEST_H
#define MF_TEST_CMDTEST_H

#include "../command/command_int.h"

/* An instance over mft_tmpdir(), or NULL (the error printed). */
mf_instance *mft_instance_open(bool test_commands);

/* Run `cmd` (consumed) for `client`; returns the reply (the caller's);
 * `*flags` (if given) gets MF_RUN_*. */
bson_t *mft_command(mf_instance *inst, mf_client *client, bson_t *cmd, int *flags);

#endif
