/*
 * query.h -- the query language: filters (match.c).  Later: update
 * operators, projection, sort, the planner (DESIGN.md section 5).
 *
 * A filter is parsed once into a predicate tree (mf_matcher_parse), then
 * evaluated against documents as they are stored -- BSON bytes, walked with
 * iterators that skip every field the filter does not name.
 */
#ifndef MF_QUERY_H
#define MF_QUERY_H

#include "../bsonx/bsonx.h"

typedef struct mf_matcher mf_matcher;

/* Parse `filter`.  Errors are mongod's: BadValue (2) for an unknown or
 * malformed operator ("unknown operator: $foo", "$in needs an array", ...),
 * and the codes mongod gives for a bad regex or $type.  The matcher copies
 * what it needs: `filter` may be freed after. */
int mf_matcher_parse(const bson_t *filter, mf_matcher **out, mf_error *err);

/* Whether `doc` matches.  Thread-safe: one matcher may serve many threads. */
bool mf_matcher_match(const mf_matcher *m, const bson_t *doc);

void mf_matcher_free(mf_matcher *m);

#endif /* MF_QUERY_H */
