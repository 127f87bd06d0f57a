/*
 * bsonx.h -- what libbson lacks.
 *
 *  - Validation of BSON from outside (the wire, a caller of Server.command),
 *    done once at the boundary with mongod's checks and error messages, so
 *    every layer above may iterate it freely.
 *  - mongod's human-readable rendering of BSON (BSONObj::toString), which
 *    its error messages embed: { a: 1, b: "x" }.
 *
 *  - MongoDB's comparison order over values and documents (compare.c).
 *
 *  - The order-preserving key encoding of index keys (keyenc.c).
 *
 * Later: dotted-path lookup (DESIGN.md section 3).
 */
#ifndef MF_BSONX_H
#define MF_BSONX_H

#include "../util/util.h"

#include <bson/bson.h>

/* Nesting limit for documents received from clients, as mongod's
 * BSONDepth::kDefaultMaxAllowableDepth: a flat document is depth 0. */
#define MF_BSON_MAX_DEPTH 200

/* Validate the BSON document at `data`, which may use at most `avail`
 * bytes (the document may be shorter: its own length field says how long
 * it is).  Checks what mongod's validateBSON checks -- lengths, terminators,
 * element layout, bool values, nesting depth -- plus the UTF-8 of every key
 * and text value.  Returns 0 and the document's length in `*len`, or:
 *   MF_InvalidBSON  malformed (mongod's message, then " in element with
 *                   field name '<path>' in object with <_id or unknown _id>")
 *   MF_Overflow     nested deeper than MF_BSON_MAX_DEPTH */
int mf_bsonx_validate_prefix(const uint8_t *data, size_t avail, size_t *len, mf_error *err);

/* As mf_bsonx_validate_prefix, and the document must fill all `len` bytes. */
int mf_bsonx_validate(const uint8_t *data, size_t len, mf_error *err);

/* ------------------------------------------------- comparison (compare.c) */

/* MongoDB's alias for a BSON type ("double", "string", "object", ...). */
const char *mf_bsonx_type_alias(bson_type_t t);

/* A decimal128 (IEEE 754-2008, BID encoding) taken apart.  For a finite
 * value: sign (-1 or 1), coefficient hi:lo (a non-canonical coefficient,
 * 10^34 or more, reads as 0, as the standard says) and exponent of ten. */
typedef enum { MF_DEC_NAN, MF_DEC_INF, MF_DEC_FINITE } mf_dec_class;
mf_dec_class mf_bsonx_decimal_parts(const bson_decimal128_t *d, int *sign, uint64_t *hi,
                                    uint64_t *lo, int *exp10);

/* mongod's canonical type bracket of a BSON type (numbers share one). */
int mf_bsonx_canonical_type(bson_type_t t);

/* Compare two values in MongoDB's order (no collation): <0, 0 or >0.
 * Numbers compare by exact value across int32, int64, double and
 * decimal128; NaN equals NaN and sorts below every other number. */
int mf_bsonx_compare_values(const bson_iter_t *a, const bson_iter_t *b);

/* Compare two documents element by element (type, name, value); `a` and
 * `b` are positioned before their first fields and are advanced. */
int mf_bsonx_compare_docs_iter(bson_iter_t *a, bson_iter_t *b);
int mf_bsonx_compare_docs(const bson_t *a, const bson_t *b);

/* mongod's Value::coerceToBool: false, null, undefined, missing (EOD) and
 * numeric zeros are false; everything else (NaN included) is true.  The
 * truth of $expr, $cond and the boolean operators. */
bool mf_bsonx_truthy(const bson_value_t *v);

/* ------------------------------------------- key encoding (keyenc.c) */

/* Append the order-preserving encoding of `value` to `out`: memcmp order of
 * encodings is mf_bsonx_compare_values order (reversed when `descending`),
 * and numerically equal values encode identically.  Encodings are
 * self-delimiting, so a compound key is the concatenation of its parts.
 * Returns 0, or -1 on out of memory (`out` unchanged). */
int mf_bsonx_key_append(mf_buf *out, const bson_iter_t *value, bool descending);
/* The same for a value held outside a document (an expression's result);
 * BSON_TYPE_EOD (missing) encodes as undefined. */
int mf_bsonx_key_append_value(mf_buf *out, const bson_value_t *value, bool descending);

/* Render `doc` as mongod's BSONObj::toString does ("{ a: 1, s: \"x\" }"),
 * into `out` (always NUL-terminated; cut with "..." past `cap`). */
void mf_bsonx_to_string(const bson_t *doc, char *out, size_t cap);

/* Render one element as BSONElement::toString does ("a: 1"), or only its
 * value when `with_name` is false. */
void mf_bsonx_elem_to_string(const bson_iter_t *it, bool with_name, char *out, size_t cap);

#endif /* MF_BSONX_H */
