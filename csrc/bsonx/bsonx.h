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
 *  - Collations: ICU's language-aware string order (collation.c).
 *
 *  - mongod's FieldPath rule, the one check of every field path the query
 *    and aggregation layers accept (fieldpath.c).
 *
 *  - Decimal128 arithmetic as mongod's, over Intel's decimal library
 *    (decimal.c): one copy for the expression evaluator and the update
 *    operators.
 *
 *  - mongod's hash of an element (hash.c), over OpenSSL's MD5: hashed
 *    index keys and $toHashedIndexKey.
 *
 * Later: dotted-path lookup (DESIGN.md section 3).
 */
#ifndef MF_BSONX_H
#define MF_BSONX_H

#include "../util/util.h"

#include <bson/bson.h>

/* Nesting limit for documents received from clients, as mongod's
 * BSONDepth::kDefaultMaxAllowableDepth: a flat document is depth 0. */
/* The largest document a client may store (mongod's BSONObjMaxUserSize). */
#define MF_MAX_BSON_OBJECT_SIZE (16 * 1024 * 1024)
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

/* mongod's BSONDepth::getMaxDepthForUserStorage(): the deepest a stored
 * document may be, counting itself (200 less 20 levels kept for the
 * server's own wrapping). */
#define MF_BSON_MAX_STORAGE_DEPTH 180

/* Whether `doc` is more than `max_levels` documents deep, counting itself;
 * empty documents and arrays do not count (mongod's validateDepth).  Stops
 * descending past the limit, so any depth is safe. */
bool mf_bsonx_depth_exceeds(const bson_t *doc, int max_levels);

/* ------------------------------------------- field paths (fieldpath.c) */

/* Whether the `len` bytes at `name` may be one component of a field path,
 * as mongod's FieldPath::uassertValidFieldName: 15998 empty, 16410 a
 * leading '$' (but $ref, $id, $db and mongod's metadata names are
 * allowed), 16411 a NUL byte, 16412 a '.'.  0 when it may. */
int mf_bsonx_field_name_check(const char *name, size_t len, mf_error *err);

/* Whether the `len` bytes at `path` are a dotted field path that mongod's
 * FieldPath constructor accepts: 40352 empty, 40353 a trailing '.',
 * Overflow (15) more than MF_BSON_MAX_DEPTH components, then each
 * component as mf_bsonx_field_name_check.  The one rule for every path the
 * query and aggregation layers validate. */
int mf_bsonx_field_path_check(const char *path, size_t len, mf_error *err);

/* ------------------------------------------------ collation (collation.c) */

/* A collation other than the simple one.  Every function taking a
 * `const mf_collator *` reads NULL as the simple (binary) collation. */
typedef struct mf_collator mf_collator;

/* Parse a collation document as mongod's CollatorFactoryICU::makeFromBSON:
 * into `*out` (one reference), or NULL for {locale: "simple"}.  Errors and
 * messages as mongod's: NoSuchKey (4) without a locale, TypeMismatch (14)
 * for an option of the wrong type, BadValue (2) for an unknown locale
 * ("Field 'locale' is invalid in: { ... }. Did you mean 'en'?") or an
 * option combination that means nothing (backwards at strength 1,
 * caseFirst without caseLevel below strength 3), FailedToParse (9) for a
 * bad option value or an unknown field, IncompatibleCollationVersion (161)
 * for a version other than this ICU's. */
int mf_collator_new(const bson_t *spec, mf_collator **out, mf_error *err);
/* The same from an element, which must hold a document (else
 * TypeMismatch "collation must be an object"). */
int mf_collator_new_iter(const bson_iter_t *it, mf_collator **out, mf_error *err);
/* The same from a spec document ({} or none: simple, *out NULL). */
int mf_collator_new_doc(const bson_t *spec, mf_collator **out, mf_error *err);

/* Take and drop references (both accept NULL).  A collator is immutable
 * and thread-safe; the last unref frees it. */
mf_collator *mf_collator_ref(const mf_collator *c);
void mf_collator_unref(mf_collator *c);

/* Append the full spec's fields to `out` as mongod shows it: locale,
 * caseLevel, caseFirst, strength, numericOrdering, alternate, maxVariable,
 * normalization, backwards, version -- or only locale: "simple" for NULL. */
void mf_collator_to_bson(const mf_collator *c, bson_t *out);

/* Whether two collations order every string alike (NULL: simple). */
bool mf_collator_equal(const mf_collator *a, const mf_collator *b);

/* Compare two UTF-8 strings under `c` (not NULL): <0, 0 or >0. */
int mf_collator_strcmp(const mf_collator *c, const char *a, size_t al, const char *b, size_t bl);

/* Append the sort key of a UTF-8 string under `c` (not NULL) to `out`:
 * sort keys compare with memcmp as mf_collator_strcmp orders the strings,
 * and contain no 0 byte.  0, or -1 on out of memory (`out` unchanged). */
int mf_collator_sort_key(const mf_collator *c, const char *s, size_t len, mf_buf *out);

/* ------------------------------------------------- comparison (compare.c) */

/* MongoDB's alias for a BSON type ("double", "string", "object", ...). */
const char *mf_bsonx_type_alias(bson_type_t t);

/* A decimal128 (IEEE 754-2008, BID encoding) taken apart.  For a finite
 * value: sign (-1 or 1), coefficient hi:lo (a non-canonical coefficient,
 * 10^34 or more, reads as 0, as the standard says) and exponent of ten. */
typedef enum { MF_DEC_NAN, MF_DEC_INF, MF_DEC_FINITE } mf_dec_class;
mf_dec_class mf_bsonx_decimal_parts(const bson_decimal128_t *d, int *sign, uint64_t *hi,
                                    uint64_t *lo, int *exp10);

/* A number as mongod's tryCoerce to a long has it: int32 and int64
 * exactly, a double or decimal128 truncated toward zero.  0 with `*out`
 * set; 1 for NaN or an infinity (or not a number); 2 out of int64's range. */
int mf_bsonx_number_to_int64(const bson_iter_t *v, int64_t *out);

/* mongod's canonical type bracket of a BSON type (numbers share one). */
int mf_bsonx_canonical_type(bson_type_t t);

/* Compare two values in MongoDB's order (no collation): <0, 0 or >0.
 * Numbers compare by exact value across int32, int64, double and
 * decimal128; NaN equals NaN and sorts below every other number. */
int mf_bsonx_compare_values(const bson_iter_t *a, const bson_iter_t *b);
/* Same type and same value bytes (mongod's binaryEqualValues): 1 and 1.0
 * differ, as do strings that compare equal under a collation. */
bool mf_bsonx_binary_equal(const bson_iter_t *a, const bson_iter_t *b);
/* The same under a collation: strings and symbols, at any depth, compare
 * as `coll` orders them (field names never do). */
int mf_bsonx_compare_values_coll(const bson_iter_t *a, const bson_iter_t *b,
                                 const mf_collator *coll);

/* Compare two documents element by element (type, name, value); `a` and
 * `b` are positioned before their first fields and are advanced. */
int mf_bsonx_compare_docs_iter(bson_iter_t *a, bson_iter_t *b);
int mf_bsonx_compare_docs(const bson_t *a, const bson_t *b);
int mf_bsonx_compare_docs_coll(const bson_t *a, const bson_t *b, const mf_collator *coll);

/* mongod's Value::coerceToBool: false, null, undefined, missing (EOD) and
 * numeric zeros are false; everything else (NaN included) is true.  The
 * truth of $expr, $cond and the boolean operators. */
bool mf_bsonx_truthy(const bson_value_t *v);

/* --------------------------------------- decimal128 arithmetic (decimal.c)
 *
 * Decimal128 arithmetic with mongod's semantics, over Intel's Decimal
 * Floating-Point Math Library (the library mongod itself uses).
 *
 * A value is a bson_decimal128_t: BSON stores decimal128 in the BID
 * encoding, the library's own, so no conversion happens (see decimal.c).
 * Every operation rounds half to even unless it takes a rounding mode, as
 * mongod's Decimal128 defaults.  `flags` arguments (may be NULL) receive
 * the IEEE 754 exception bits the operation raised (MF_DEC_F_*), OR-ed in.
 *
 * Used by the expression evaluator's arithmetic and $convert, the
 * accumulators, $bucket, $densify and $setWindowFields (agg/), $inc and
 * $mul (query/update.c), and the command layer's number coercion. */

typedef bson_decimal128_t mf_dec;

/* Rounding modes, as mongod's Decimal128::RoundingMode (and the library's). */
typedef enum {
    MF_DEC_HALF_EVEN = 0, /* kRoundTiesToEven */
    MF_DEC_FLOOR = 1,     /* kRoundTowardNegative */
    MF_DEC_CEIL = 2,      /* kRoundTowardPositive */
    MF_DEC_TRUNC = 3,     /* kRoundTowardZero */
    MF_DEC_HALF_AWAY = 4  /* kRoundTiesToAway */
} mf_dec_round;

/* Exception flags (the library's values). */
enum {
    MF_DEC_F_INVALID = 0x01,
    MF_DEC_F_DIVBYZERO = 0x04,
    MF_DEC_F_OVERFLOW = 0x08,
    MF_DEC_F_UNDERFLOW = 0x10,
    MF_DEC_F_INEXACT = 0x20
};

/* Longest text of mf_dec_to_string, with its NUL. */
#define MF_DEC_STRLEN BSON_DECIMAL128_STRING

mf_dec mf_dec_add(mf_dec a, mf_dec b);
mf_dec mf_dec_sub(mf_dec a, mf_dec b);
mf_dec mf_dec_mul(mf_dec a, mf_dec b);
mf_dec mf_dec_div(mf_dec a, mf_dec b); /* x/0 is +-Infinity, 0/0 NaN */
mf_dec mf_dec_mod(mf_dec a, mf_dec b); /* fmod: the sign of a, as mongod's modulo */
mf_dec mf_dec_abs(mf_dec a);
mf_dec mf_dec_neg(mf_dec a);
mf_dec mf_dec_exp(mf_dec a);
mf_dec mf_dec_ln(mf_dec a);
mf_dec mf_dec_log10(mf_dec a);
/* log of `a` in `base`: log2/log10 for bases 2 and 10, else ln a / ln base. */
mf_dec mf_dec_log(mf_dec a, mf_dec base);
/* mongod's Decimal128::power: exp10/exp2 for bases 10 and 2, else pow; the
 * result is then widened to 34 digits where exact (8 -> 8.000...000). */
mf_dec mf_dec_pow(mf_dec base, mf_dec exp);
mf_dec mf_dec_sqrt(mf_dec a);

/* Round `a` to a multiple of 10^exp10 (mongod's Decimal128::quantize with
 * the quantum 1E<exp10>): when that would need more than 34 digits the
 * value comes back with 34 digits instead of NaN.  `flags` may be NULL. */
mf_dec mf_dec_quantize(mf_dec a, int exp10, mf_dec_round mode, uint32_t *flags);

/* Three-way numeric comparison: -1, 0, 1.  NaN equals NaN and is less than
 * every other value (MongoDB's order); 1.0 and 1.00 are equal. */
int mf_dec_cmp(mf_dec a, mf_dec b);
bool mf_dec_isnan(mf_dec a);
bool mf_dec_isinf(mf_dec a);
bool mf_dec_iszero(mf_dec a);
bool mf_dec_isneg(mf_dec a); /* the sign bit (also for -0 and -NaN) */

mf_dec mf_dec_from_int64(int64_t i);
/* mongod's Decimal128(double): rounded to 15 significant digits (so 0.1
 * becomes 0.100000000000000); zero, infinities and NaN as they are. */
mf_dec mf_dec_from_double(double d);
/* The double's exact binary value rounded to 34 digits (kRoundTo34Digits). */
mf_dec mf_dec_from_double34(double d);
/* Parse as mongod's Decimal128(string): case-insensitive, "[+-]digits[.digits]
 * [e[+-]digits]", "nan", "inf", "infinity"; rounds to 34 digits.  On a
 * malformed string *flags gets MF_DEC_F_INVALID; overflow and underflow set
 * their flags (the value then is the library's: Infinity or a rounded
 * tiny).  `s` is NUL-terminated. */
mf_dec mf_dec_from_string(const char *s, uint32_t *flags);

double mf_dec_to_double(mf_dec a, uint32_t *flags);
/* To an integer with the rounding mode; out of range or NaN sets
 * MF_DEC_F_INVALID (and the value is the library's INT_MIN). */
int64_t mf_dec_to_int64(mf_dec a, mf_dec_round mode, uint32_t *flags);
int32_t mf_dec_to_int32(mf_dec a, mf_dec_round mode, uint32_t *flags);
/* mongod's Decimal128::toString (the BSON spec's form): "1.50", "1E+3",
 * "-Infinity", "NaN".  `out` holds MF_DEC_STRLEN bytes. */
void mf_dec_to_string(mf_dec a, char *out);

/* ---------------------------------------------------- hashing (hash.c) */

/* mongod's BSONElementHasher::hash64 with seed 0: the key of a hashed
 * index and the value of $toHashedIndexKey.  The element's value at `it`
 * (its name is not hashed), strings at any depth taken as their sort keys
 * under `coll` (NULL: as they are), into `*out`.  0, or -1 on out of
 * memory. */
int mf_bsonx_hash64(const bson_iter_t *it, const mf_collator *coll, int64_t *out);
/* The same for a value; missing (BSON_TYPE_EOD) hashes as null. */
int mf_bsonx_hash64_value(const bson_value_t *v, const mf_collator *coll, int64_t *out);

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
/* The same under a collation: a string or symbol, at any depth, encodes
 * as its sort key (mf_collator_sort_key), so memcmp order is the collated
 * order and strings `coll` calls equal encode alike.  Such a key cannot be
 * read back into the value. */
int mf_bsonx_key_append_coll(mf_buf *out, const bson_iter_t *value, bool descending,
                             const mf_collator *coll);
int mf_bsonx_key_append_value_coll(mf_buf *out, const bson_value_t *value, bool descending,
                                   const mf_collator *coll);

/* The string a key starts with (its first value's, inverted back for a
 * descending field): 1 with `*str` and `*slen` set -- into the key itself
 * when it can be read there, else into `scratch` --, or 0 if that value is
 * not a string (or symbol: they encode alike), or -1 for damage or no
 * memory.  Under a collation the bytes are its sort key, not the string. */
int mf_bsonx_key_string(const uint8_t *key, size_t len, bool descending, mf_buf *scratch,
                        const char **str, size_t *slen);

/* The length of the first value's encoding in `key` (of `len` bytes; its
 * bytes inverted for a descending field), so that a compound key can be
 * cut into its fields; 0 if it is damaged. */
size_t mf_bsonx_key_value_len(const uint8_t *key, size_t len, bool descending);

/* Render `doc` as mongod's BSONObj::toString does ("{ a: 1, s: \"x\" }"),
 * into `out` (always NUL-terminated; cut with "..." past `cap`). */
void mf_bsonx_to_string(const bson_t *doc, char *out, size_t cap);

/* Render one element as BSONElement::toString does ("a: 1"), or only its
 * value when `with_name` is false. */
void mf_bsonx_elem_to_string(const bson_iter_t *it, bool with_name, char *out, size_t cap);

/* libbson's bson_append_iter, bson_append_value and bson_value_copy, the
 * same in every way but one: a Code, CodeWScope or DBPointer whose string
 * holds a NUL keeps its bytes past it (libbson's appenders take those
 * strings as C strings).  Use these for every value a user may have
 * written (append.c). */
bool mf_bsonx_append_iter(bson_t *dst, const char *key, int key_length, const bson_iter_t *it);
/* The document `it` holds as a read-only view (`out` borrows its bytes);
 * false when it holds no document. */
bool mf_bsonx_doc_view(const bson_iter_t *it, bson_t *out);
/* As mf_bsonx_doc_view for a document or an array (an array's view is
 * the document of its elements keyed "0", "1", ...). */
bool mf_bsonx_container_view(const bson_iter_t *it, bson_t *out);
bool mf_bsonx_append_value(bson_t *dst, const char *key, int key_length, const bson_value_t *v);
void mf_bsonx_value_copy(const bson_value_t *src, bson_value_t *dst);
#define MF_APPEND_VALUE(b, key, val) mf_bsonx_append_value((b), (key), (int)strlen(key), (val))

/* bson_copy_to_excluding_noinit with one field left out, through
 * mf_bsonx_append_iter. */
void mf_bsonx_copy_except(const bson_t *src, bson_t *dst, const char *except);

#endif /* MF_BSONX_H */
