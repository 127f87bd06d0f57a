/*
 * msg.c -- MongoDB wire-protocol framing: parse OP_MSG and OP_QUERY, build
 * OP_MSG and OP_REPLY.  Pure functions over byte ranges; no sockets here.
 *
 * Standard message header (all integers little-endian):
 *
 *   OFFSET SIZE DESCRIPTION
 *   0      4    messageLength, whole message including this header
 *   4      4    requestID
 *   8      4    responseTo (requestID of the request this answers)
 *   12     4    opCode
 *
 * OP_MSG (opCode 2013), after the header:
 *
 *   16     4    flagBits: bit 0 checksumPresent, bit 1 moreToCome,
 *               bit 16 exhaustAllowed; bits 0-15 are "required": an
 *               unknown one there is an error, unknown bits 16-31 are not
 *   20     ...  sections, until the checksum or the end:
 *                 kind 0: one BSON document (the body; exactly one)
 *                 kind 1: int32 size (counting itself), cstring identifier,
 *                         then BSON documents filling the rest of the size
 *   len-4  4    CRC-32C of bytes [0, len-4), present iff checksumPresent
 *
 * Checks happen in mongod's order (src/mongo/rpc/op_msg.cpp): flags, the
 * checksum's room, then section by section, then "has a body", then
 * duplicates between sequences and the body, and the checksum last.
 */
#include "wire.h"

#include <stdio.h>
#include <string.h>

void mf_msg_header_read(const uint8_t *p, mf_msg_header *h)
{
    h->length = mf_load_i32le(p);
    h->request_id = mf_load_i32le(p + 4);
    h->response_to = mf_load_i32le(p + 8);
    h->opcode = mf_load_i32le(p + 12);
}

bool mf_msg_error_is_fatal(int code)
{
    /* mongod's ConnectionFatalMessageParseError category. */
    return code == MF_IllegalOpMsgFlag || code == MF_TooManyDocumentSequences ||
           code == MF_ChecksumMismatch;
}

/* Read one BSON document at `p` with `avail` bytes left in its section and
 * validate it.  On success `*doclen` is its length.  As mongod's
 * Validated<BSONObj>: the bytes are validated first, then the BSONObj
 * constructor refuses one larger than BSONObjMaxInternalSize. */
static int read_doc(const uint8_t *p, size_t avail, size_t *doclen, mf_error *err)
{
    int rc = mf_bsonx_validate_prefix(p, avail, doclen, err);
    if (rc != 0 || *doclen <= MF_MAX_BSON_INTERNAL_SIZE)
        return rc;
    char first[128] = "";
    bson_t doc;
    bson_iter_t it;
    if (bson_init_static(&doc, p, *doclen) && bson_iter_init(&it, &doc) && bson_iter_next(&it))
        mf_bsonx_elem_to_string(&it, true, first, sizeof first);
    return mf_error_set(err, MF_BSONObjectTooLarge,
                        "BSONObj size: %zu (0x%zX) is invalid. Size must be between 0 and "
                        "%d(%dMB) First element: %s",
                        *doclen, *doclen, MF_MAX_BSON_INTERNAL_SIZE,
                        MF_MAX_BSON_INTERNAL_SIZE / (1024 * 1024), first);
}

/* Whether `body` has a top-level field `name` (mongod looks up the dotted
 * path; a sequence identifier with a dot is matched by its first part being
 * a document holding the rest, which bson_iter_find_descendant does). */
static bool body_has(const uint8_t *body, size_t len, const char *name)
{
    bson_t b;
    bson_iter_t it, found;
    if (!bson_init_static(&b, body, len) || !bson_iter_init(&it, &b))
        return false;
    return bson_iter_find_descendant(&it, name, &found);
}

int mf_msg_parse_op_msg(const uint8_t *msg, size_t len, mf_op_msg *out, mf_error *err)
{
    memset(out, 0, sizeof *out);
    if (len < MF_MSG_HEADER_LEN + 4)
        return mf_error_set(err, MF_Overflow,
                            "buffer size too small to read (4) bytes out of buffer[%zu] at offset: %d",
                            len - MF_MSG_HEADER_LEN, 0);
    uint32_t flags = mf_load_u32le(msg + MF_MSG_HEADER_LEN);
    const uint32_t known = MF_MSG_CHECKSUM_PRESENT | MF_MSG_MORE_TO_COME;
    if (flags & ~known & 0xffffu) {
        char bits[33];
        for (int i = 0; i < 32; i++)
            bits[i] = (flags >> (31 - i)) & 1 ? '1' : '0';
        bits[32] = '\0';
        return mf_error_set(err, MF_IllegalOpMsgFlag,
                            "Message contains illegal flags value: Ob%s", bits);
    }
    out->flags = flags;

    size_t data = len - MF_MSG_HEADER_LEN - 4; /* sections (+ checksum) */
    bool has_checksum = (flags & MF_MSG_CHECKSUM_PRESENT) != 0;
    if (has_checksum) {
        /* mongod's getChecksum() rejects this before parse() can (51252). */
        if (data <= 4)
            return mf_error_set(err, 51252,
                                "Invalid message size for an OpMsg containing a checksum");
        data -= 4;
    }

    const uint8_t *p = msg + MF_MSG_HEADER_LEN + 4;
    const uint8_t *end = p + data;
    bool has_body = false;
    int rc;

    while (p < end) {
        uint8_t kind = *p++;
        size_t off = (size_t)(p - (msg + MF_MSG_HEADER_LEN + 4));
        if (kind == 0) {
            size_t n;
            if (has_body)
                return mf_error_set(err, MF_Location40430,
                                    "Multiple body sections in message");
            has_body = true;
            if ((rc = read_doc(p, (size_t)(end - p), &n, err)) != 0)
                return rc;
            out->body = p;
            out->body_len = n;
            p += n;
        } else if (kind == 1) {
            if (out->nseq >= MF_MSG_MAX_SEQUENCES)
                return mf_error_set(err, MF_TooManyDocumentSequences, "Too many document sequences in OP_MSG");
            if (end - p < 4)
                return mf_error_set(err, MF_Overflow,
                                    "buffer size too small to read (4) bytes out of buffer[%zu] at offset: %zu",
                                    (size_t)(end - p), off);
            int32_t size = mf_load_i32le(p);
            if (size < 4 || (size_t)size > (size_t)(end - p))
                return mf_error_set(err, MF_Overflow,
                                    "Invalid offset(%lld) past end of buffer[%zu] at offset: %zu",
                                    (long long)size - 4, (size_t)(end - p) - 4, off + 4);
            const uint8_t *sp = p + 4, *send = p + size;
            const uint8_t *nul = memchr(sp, 0, (size_t)(send - sp));
            if (!nul)
                return mf_error_set(err, MF_Overflow,
                                    "couldn't locate terminal char (\\u0000) in buffer[%zu] at offset: %zu",
                                    (size_t)(send - sp), off + 4);
            const char *name = (const char *)sp;
            /* The identifier becomes a field name of the command: UTF-8,
             * as every key is (mongod does not check; found by fuzz_wire,
             * tests/fuzz_regressions/wire/sequence-name-not-utf8). */
            if (!bson_utf8_validate(name, (size_t)(nul - sp), false))
                return mf_error_set(err, MF_InvalidBSON,
                                    "Found string that doesn't follow UTF-8 encoding. in "
                                    "document sequence identifier");
            for (int i = 0; i < out->nseq; i++)
                if (strcmp(out->seq[i].name, name) == 0)
                    return mf_error_set(err, MF_Location40431,
                                        "Duplicate document sequence: %s", name);
            mf_msg_sequence *s = &out->seq[out->nseq++];
            s->name = name;
            s->docs = nul + 1;
            s->len = (size_t)(send - s->docs);
            s->ndocs = 0;
            for (const uint8_t *d = s->docs; d < send;) {
                size_t n;
                if ((rc = read_doc(d, (size_t)(send - d), &n, err)) != 0)
                    return rc;
                d += n;
                s->ndocs++;
            }
            p = send;
        } else if (kind == 2) {
            return mf_error_set(err, MF_Unauthorized, "Unsupported Security Token provided");
        } else {
            return mf_error_set(err, MF_Location40432, "Unknown section kind %u",
                                (unsigned)kind);
        }
    }
    if (!has_body)
        return mf_error_set(err, MF_Location40587, "OP_MSG messages must have a body");
    for (int i = 0; i < out->nseq; i++)
        if (body_has(out->body, out->body_len, out->seq[i].name))
            return mf_error_set(err, MF_Location40433,
                                "Duplicate field between body and document sequence %s",
                                out->seq[i].name);
    if (has_checksum) {
        uint32_t want = mf_load_u32le(msg + len - 4);
        if (mf_crc32c(0, msg, len - 4) != want)
            return mf_error_set(err, MF_ChecksumMismatch,
                                "OP_MSG checksum does not match contents");
    }
    return 0;
}

int mf_msg_command_doc(const mf_op_msg *m, bson_t *out, mf_error *err)
{
    if (m->nseq == 0) {
        if (!bson_init_static(out, m->body, m->body_len))
            return mf_error_set(err, MF_InvalidBSON, "invalid body");
        return 0;
    }
    /* Sequences become array fields after the body's own fields, as mongod's
     * OpMsgRequest::body sees them. */
    bson_t body;
    if (!bson_init_static(&body, m->body, m->body_len))
        return mf_error_set(err, MF_InvalidBSON, "invalid body");
    bson_init(out);
    bson_concat(out, &body);
    for (int i = 0; i < m->nseq; i++) {
        const mf_msg_sequence *s = &m->seq[i];
        bson_t arr;
        char key[16];
        const char *k;
        uint32_t idx = 0;
        /* No size limit of our own here: mongod keeps the sequences apart,
         * so a 48,000,000-byte message of 100,000 documents is a valid
         * insert even though this one document is larger (array keys add
         * up to 8 bytes per document, far below bson_t's 2 GiB). */
        bool ok = bson_append_array_begin(out, s->name, -1, &arr);
        for (const uint8_t *d = s->docs; ok && d < s->docs + s->len;) {
            bson_t doc;
            size_t n = (size_t)mf_load_i32le(d);
            bson_init_static(&doc, d, n);
            mf_uint32_to_key(idx++, &k, key, sizeof key);
            ok = bson_append_document(&arr, k, -1, &doc);
            d += n;
        }
        if (!ok || !bson_append_array_end(out, &arr)) {
            bson_destroy(out);
            return mf_error_set(err, MF_BSONObjectTooLarge, "command is too large");
        }
    }
    return 0;
}

static void store_header(uint8_t *h, size_t len, int32_t request_id, int32_t response_to,
                         int32_t opcode)
{
    mf_store_i32le(h, (int32_t)len);
    mf_store_i32le(h + 4, request_id);
    mf_store_i32le(h + 8, response_to);
    mf_store_i32le(h + 12, opcode);
}

/* The header of the message from `at` to the end of `out`. */
static void put_header(mf_buf *out, size_t at, int32_t request_id,
                       int32_t response_to, int32_t opcode)
{
    store_header(out->data + at, out->len - at, request_id, response_to, opcode);
}

size_t mf_msg_reply_parts(uint8_t prefix[MF_MSG_REPLY_PREFIX], uint8_t crc[4],
                          int32_t request_id, int32_t response_to, uint32_t flags,
                          const bson_t *body)
{
    size_t tail = (flags & MF_MSG_CHECKSUM_PRESENT) ? 4 : 0;
    store_header(prefix, MF_MSG_REPLY_PREFIX + body->len + tail, request_id, response_to,
                 MF_OPCODE_MSG);
    mf_store_i32le(prefix + 16, (int32_t)flags);
    prefix[20] = 0; /* section kind 0: the body */
    if (tail) {
        uint32_t c = mf_crc32c(0, prefix, MF_MSG_REPLY_PREFIX);
        c = mf_crc32c(c, bson_get_data(body), body->len);
        mf_store_i32le(crc, (int32_t)c);
    }
    return tail;
}

int mf_msg_build_reply(mf_buf *out, int32_t request_id, int32_t response_to,
                       uint32_t flags, const bson_t *body)
{
    uint8_t prefix[MF_MSG_REPLY_PREFIX], crc[4];
    size_t tail = mf_msg_reply_parts(prefix, crc, request_id, response_to, flags, body);
    if (mf_buf_append(out, prefix, sizeof prefix) ||
        mf_buf_append(out, bson_get_data(body), body->len) || mf_buf_append(out, crc, tail))
        return -1;
    return 0;
}

int mf_msg_parse_op_query(const uint8_t *msg, size_t len, mf_op_query *out,
                          mf_error *err)
{
    const uint8_t *p = msg + MF_MSG_HEADER_LEN, *end = msg + len;
    int rc;
    if (end - p < 4)
        return mf_error_set(err, MF_Overflow, "OP_QUERY message is truncated");
    out->flags = mf_load_i32le(p);
    p += 4;
    const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
    if (!nul)
        return mf_error_set(err, MF_Overflow,
                            "couldn't locate terminal char (\\u0000) in OP_QUERY namespace");
    out->ns = (const char *)p;
    /* It becomes the command's $db, and error messages quote it. */
    if (!bson_utf8_validate(out->ns, (size_t)(nul - p), false))
        return mf_error_set(err, MF_InvalidNamespace, "OP_QUERY namespace is not valid UTF-8");
    p = nul + 1;
    if (end - p < 8)
        return mf_error_set(err, MF_Overflow, "OP_QUERY message is truncated");
    out->skip = mf_load_i32le(p);
    out->nreturn = mf_load_i32le(p + 4);
    p += 8;
    size_t n;
    if ((rc = read_doc(p, (size_t)(end - p), &n, err)) != 0)
        return rc;
    out->query = p;
    out->query_len = n;
    p += n;
    if (p < end) { /* returnFieldsSelector: validated, then ignored */
        size_t m;
        if ((rc = read_doc(p, (size_t)(end - p), &m, err)) != 0)
            return rc;
    }
    return 0;
}

int mf_msg_build_op_reply(mf_buf *out, int32_t request_id, int32_t response_to,
                          int32_t response_flags, const bson_t *doc)
{
    size_t at = out->len;
    uint8_t zero[MF_MSG_HEADER_LEN] = {0};
    uint8_t fields[20] = {0}; /* responseFlags, cursorID (8), startingFrom, numberReturned */
    mf_store_i32le(fields, response_flags);
    mf_store_i32le(fields + 16, 1);
    if (mf_buf_append(out, zero, sizeof zero) || mf_buf_append(out, fields, sizeof fields) ||
        mf_buf_append(out, bson_get_data(doc), doc->len))
        return -1;
    put_header(out, at, request_id, response_to, MF_OPCODE_REPLY);
    return 0;
}
