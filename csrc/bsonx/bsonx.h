/*
 * bsonx.h -- what libbson lacks.  For now: validating BSON that arrives from
 * outside (the wire, a caller of Server.command) exactly once, at the
 * boundary, so that every layer above may iterate it freely.
 *
 * Later: MongoDB's comparison order, the order-preserving key encoding and
 * dotted-path lookup (DESIGN.md section 3).
 */
#ifndef MF_BSONX_H
#define MF_BSONX_H

#include "../util/util.h"

#include <bson/bson.h>

/* Nesting limit for documents received from clients, as mongod's
 * BSONDepth::kDefaultMaxAllowableDepth. */
#define MF_BSON_MAX_DEPTH 200

/* Check that `data[0..len)` is one well-formed BSON document: its declared
 * length is `len`, every element's length and terminator are in bounds,
 * strings and keys are UTF-8, and no document or array nests deeper than
 * MF_BSON_MAX_DEPTH.  Returns 0, or MF_InvalidBSON with `err` saying what
 * and where, or MF_Overflow (as mongod) when the nesting is too deep. */
int mf_bsonx_validate(const uint8_t *data, size_t len, mf_error *err);

#endif /* MF_BSONX_H */
