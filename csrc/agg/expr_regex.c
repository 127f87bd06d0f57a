#include "expr_int.h"
const op_def mfi_expr_regex_ops[] = {{"$regexMatch", NULL, 0, 0, NULL}};
const size_t mfi_expr_nregex_ops = 0;
