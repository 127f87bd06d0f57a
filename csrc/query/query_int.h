/*
 * query_int.h -- what the files of csrc/query share and nobody else sees.
 */
#ifndef MF_QUERY_INT_H
#define MF_QUERY_INT_H

#include "query.h"

/* Whether `path` is a valid dotted field path, as mongod's FieldPath
 * constructor checks it (src/mongo/db/pipeline/field_path.cpp), with its
 * errors: 40352 empty, 40353 trailing '.', 15998 empty component, 16410 a
 * component starting with '$' (other than $id, $ref, $db and a few
 * metadata names), Overflow (15) deeper than MF_BSON_MAX_DEPTH. */
int mfi_field_path_check(const char *path, mf_error *err);

#endif /* MF_QUERY_INT_H */
