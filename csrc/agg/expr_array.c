#include "expr_int.h"

const op_def mfi_expr_array_ops[] = {
    {"$__placeholder_array", NULL, 0, 0, NULL},
};
const size_t mfi_expr_narray_ops = 0;
