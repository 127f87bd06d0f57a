/*
 * path.c -- dotted field paths as mongod's FieldPath accepts them.
 */
#include "query_int.h"

#include <string.h>

enum {
    E_PATH_TOO_LONG = MF_Overflow,
    E_PATH_EMPTY = 40352,
    E_PATH_TRAILING_DOT = 40353,
    E_PATH_EMPTY_FIELD = 15998,
    E_PATH_DOLLAR = 16410,
};

/* Whether `path` is a valid FieldPath (mongod's field_path.cpp), with its
 * error.  A few `$` names (DBRef and metadata) are allowed as fields. */
int mfi_field_path_check(const char *path, mf_error *err)
{
    static const char *const allowed[] = {"$id", "$ref", "$db", "$sortKey", "$recordId",
                                          "$searchSortValues", "$searchScore"};
    size_t len = strlen(path);
    if (len == 0)
        return mf_error_set(err, E_PATH_EMPTY, "FieldPath cannot be constructed with empty string");
    if (path[len - 1] == '.')
        return mf_error_set(err, E_PATH_TRAILING_DOT, "FieldPath must not end with a '.'.");
    size_t parts = 1;
    for (const char *p = path; *p; p++)
        parts += *p == '.';
    if (parts > MF_BSON_MAX_DEPTH)
        return mf_error_set(err, E_PATH_TOO_LONG, "FieldPath is too long");
    for (const char *p = path; *p;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n == 0)
            return mf_error_set(err, E_PATH_EMPTY_FIELD,
                                "FieldPath field names may not be empty strings.");
        if (p[0] == '$') {
            bool ok = false;
            for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
                ok |= strlen(allowed[i]) == n && memcmp(allowed[i], p, n) == 0;
            if (!ok)
                return mf_error_set(err, E_PATH_DOLLAR,
                                    "FieldPath field names may not start with '$'. Consider "
                                    "using $getField or $setField.");
        }
        p += n;
        if (*p == '.')
            p++;
    }
    return 0;
}
