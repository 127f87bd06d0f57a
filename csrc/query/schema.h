/*
 * schema.h -- {$jsonSchema: ...} (schema.c): parsed once, then applied to
 * documents; the matcher holds one per $jsonSchema of a filter.
 */
#ifndef MF_QUERY_SCHEMA_H
#define MF_QUERY_SCHEMA_H

#include "query.h"

typedef struct mf_schema mf_schema;

/* Parse the operand of $jsonSchema.  Errors are mongod's json_schema_parser's:
 * FailedToParse (9) for an unknown, unsupported or repeated keyword and
 * bad counts, TypeMismatch (14) for an operand of the wrong type, BadValue
 * (2) for an unknown type name, 51091 for a bad pattern; `encrypt` and
 * `encryptMetadata` are NotImplemented (238). */
int mf_schema_parse(const bson_iter_t *it, mf_schema **out, mf_error *err);
void mf_schema_free(mf_schema *s);

/* Whether the document `doc` satisfies the schema. */
bool mf_schema_match(const mf_schema *s, const bson_t *doc);
/* The same for an embedded document `value` ($elemMatch's elements); any
 * other value does not match. */
bool mf_schema_match_value(const mf_schema *s, const bson_iter_t *value);

/* Why `doc` does not satisfy the schema, as mongod's document validation
 * error details: {operatorName: "$jsonSchema", title?, description?,
 * schemaRulesNotSatisfied: [...]} appended to `out`; `inverted` (under
 * $nor or $not, where it matched): {operatorName, reason: "schema matched"}. */
void mf_schema_explain(const mf_schema *s, const bson_t *doc, bool inverted, bson_t *out);

/* Equality as enum and uniqueItems see it: by value, numbers across
 * types, documents whatever the order of their fields. */
bool mf_schema_values_equal(const bson_iter_t *a, const bson_iter_t *b);

#endif
