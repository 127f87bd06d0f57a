/*
 * keygen.h -- the one generator of a document's keys over a key pattern:
 * mongod's BtreeKeyGenerator (src/mongo/db/index/btree_key_generator.cpp),
 * which index keys (index.c) and sort keys (sort.c) both are.
 *
 * What it does, for both.  Each field's dotted path is followed through
 * documents; the first array met on any path is expanded, one recursion
 * per element, and every path through that same array takes its value
 * from the same element; a second, different array is "parallel arrays"
 * (171).  A numeric component also names an array element ("a.0"),
 * looked up once per array; an array inside an expanded array is one
 * value.  Missing is null, an empty array undefined.  Each combination of
 * values is one candidate key, handed to the caller's `emit`; its
 * order-preserving encoding (descending fields inverted, strings as the
 * collation's sort keys) is mfi_keygen_encode's.  The multikey bits
 * follow mongod's multikeyPaths: a field is multikey when an array it
 * traverses may give it several values (not when a positional component
 * picks one element).
 *
 * What differs, and stays with the caller.
 *   index.c  fans out: every candidate is an index key (kept, sorted and
 *            made unique), a sparse index drops a candidate whose every
 *            field was missing, the multikey bits are recorded, and 171
 *            is the error.
 *   sort.c   keeps one: the memcmp-least candidate, which is the least
 *            array element for an ascending field and the greatest for a
 *            descending one (its encoding is inverted); the multikey bits
 *            are ignored, and 171 becomes BadValue "cannot sort with keys
 *            that are parallel arrays", as mongod's SortKeyGenerator
 *            turns it.
 *
 * Cost: one allocation for the fields per document and one per array
 * expanded; the values are iterators into the document, never copies.
 */
#ifndef MF_QUERY_KEYGEN_H
#define MF_QUERY_KEYGEN_H

#include "../bsonx/bsonx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


/* One key field while keys are generated: mongod's fieldNames[i],
 * fixed[i] and PositionalPathInfo.  `emit` reads `fixed` only. */
typedef struct mfi_kfield {
    bson_iter_t fixed;    /* the field's value in this candidate */
    const char *rest;     /* path still to follow; "" once `fixed` holds the value */
    bool has_pos;         /* the next component indexes the array just expanded */
    bson_iter_t pos_elt;  /* that element */
    bson_iter_t pos_arr;  /* the array (for the 16746 message) */
    const char *pos_rest; /* the path after what `dotted` followed */
    bool dotted_found;
    bson_iter_t dotted;   /* the rest of the path followed from the array */
} mfi_kfield;

typedef struct mfi_keygen mfi_keygen;

struct mfi_keygen {
    /* set by the caller */
    size_t nfields;
    char *const *paths;      /* each field's dotted path */
    const bool *desc;        /* each field: descending */
    const mf_collator *coll; /* strings' order, or NULL: simple */
    /* Called once per candidate with its `nfields` values and how many of
     * them were missing; 0 or an error code, which ends the run. */
    int (*emit)(mfi_keygen *g, const mfi_kfield *f, size_t nmissing);
    void *arg;               /* the caller's, for `emit` */
    mf_error *err;
    /* set by mfi_keygen_run */
    uint32_t multikey;       /* bit i: field i is multikey (bit 31: field 31 and past) */
};

/* Generate the candidate keys of `doc`, calling g->emit for each; `doc`
 * and the values emit sees are borrowed from the caller.  g->multikey is
 * OR-ed into, not cleared.  Returns 0, emit's error, 171 (parallel arrays:
 * "cannot index parallel arrays [b] [a]"), 16746 (a numeric component
 * that is also a field of an array's element) or InternalError on out of
 * memory, each with g->err set. */
int mfi_keygen_run(mfi_keygen *g, const bson_t *doc);

/* Append the key of candidate `f` (g->nfields values) to `out`: each value
 * in the order-preserving encoding (mf_bsonx_key_append_coll).  0, or -1
 * on out of memory. */
int mfi_keygen_encode(const mfi_keygen *g, const mfi_kfield *f, mf_buf *out);

/* The null value a missing field takes, as an iterator (static storage). */
void mfi_keygen_null(bson_iter_t *out);

/* mongod's dotted_path_support::extractAllElementsAlongPath, for the
 * kinds whose keys are not the b-tree's (2dsphere, 2d): every value at
 * dotted `path` of `doc`, following documents, and the documents and
 * arrays inside an array met along the way (a component of digits right
 * after an array names its element instead); a remaining path that is
 * itself a field's name ("a.b" as one key) is that field.  The value at
 * the end of the path is one value, an array too.  `fn(arg, value)` is
 * called for each, in the document's order (no repeats removed); its
 * nonzero return ends the walk and is returned.  `*through_array` is set
 * when the walk went through the elements of an array. */
int mfi_path_elements(const bson_t *doc, const char *path,
                      int (*fn)(void *arg, const bson_iter_t *v), void *arg, bool *through_array);

#endif /* MF_QUERY_KEYGEN_H */
