/*
 * table.c -- the command table's names, flags and help (commands.def),
 * and the lookup by name.  The handlers are bound to it in dispatch.c.
 */
#include "command_int.h"

#include <string.h>

static const mf_cmd_def table[] = {
#define MF_COMMAND(name, fn, flags, help) {name, flags, help},
#include "commands.def"
#undef MF_COMMAND
};

const mf_cmd_def *mfi_command_table(size_t *n)
{
    *n = sizeof table / sizeof table[0];
    return table;
}

const mf_cmd_def *mfi_command_find(const char *name)
{
    size_t lo = 0, hi = sizeof table / sizeof table[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(table[mid].name, name);
        if (c == 0)
            return &table[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
