#include "expr_int.h"

const op_def mfi_expr_object_ops[] = {
    {"$__placeholder_object", NULL, 0, 0, NULL},
};
const size_t mfi_expr_nobject_ops = 0;
