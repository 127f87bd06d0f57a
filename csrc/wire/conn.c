/*
 * conn.c -- one connection: read a message, answer it, repeat.
 *
 * Each connection has its own thread, which blocks in recv() and send();
 * stopping the server shuts the socket down, which wakes it.  What a
 * message gets, by opcode, follows mongod 7.0:
 *
 *   OP_MSG          run the command; reply unless moreToCome
 *   OP_QUERY        on <db>.$cmd, the handshake commands only -> OP_REPLY;
 *                   on a collection, the legacy-removal $err -> OP_REPLY
 *   OP_GET_MORE     the legacy-removal $err -> OP_REPLY
 *   OP_INSERT, OP_UPDATE, OP_DELETE, OP_KILL_CURSORS, OP_COMPRESSED
 *                   logged, then the connection is closed
 *   anything else   logged, no reply, the connection stays open
 *
 * A framing error (length outside [16, 48000000]) closes the connection;
 * so does a message not complete within the server's read deadline after
 * its first byte (a client trickling bytes would otherwise hold a thread
 * forever); an idle connection between messages is never closed.
 * an OP_MSG parse error gets an error reply unless mongod counts it as
 * connection-fatal (mf_msg_error_is_fatal).  Nothing here is shared with
 * another connection except the counters, so no other client notices.
 */
#include "wire_int.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#define LEGACY_LINK "The client driver may require an upgrade. For more details see " \
                    "https://dochub.mongodb.org/core/legacy-opcode-removal"

/* What a handler tells the loop. */
enum { KEEP = 0, CLOSE = 1 };

static atomic_int_fast32_t request_ids = 1;

int32_t mfi_next_request_id(void)
{
    return (int32_t)(atomic_fetch_add_explicit(&request_ids, 1, memory_order_relaxed) &
                     0x7fffffff);
}

/* What read_full() returns besides 0. */
enum { READ_EOF = -1, READ_LATE = -2 };

/* Up to `n` bytes from the connection (through TLS when it has it), as
 * recv() answers: the count, 0 at EOF, -1 with errno. */
static ssize_t conn_recv(mf_conn *c, uint8_t *p, size_t n)
{
    if (!c->ssl)
        return recv(c->fd, p, n, 0);
    int r = SSL_read(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0)
        return r;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    if (e == SSL_ERROR_SYSCALL && errno == EINTR)
        return -1;
    errno = EIO;
    return -1;
}

/* Read exactly `n` bytes, giving up at `deadline_us` on the monotonic clock
 * (negative: never).  Returns 0, READ_EOF on EOF or error, READ_LATE when
 * the deadline passed first. */
static int read_full(mf_conn *c, uint8_t *p, size_t n, int64_t deadline_us)
{
    int fd = c->fd;
    while (n > 0) {
        /* (what TLS has already decrypted needs no wait) */
        if (deadline_us >= 0 && !(c->ssl && SSL_pending(c->ssl) > 0)) {
            int64_t left = deadline_us - mf_clock_mono_us();
            if (left <= 0)
                return READ_LATE;
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int pr = poll(&pfd, 1, (int)((left + 999) / 1000));
            if (pr < 0 && errno == EINTR)
                continue;
            if (pr < 0)
                return READ_EOF;
            if (pr == 0)
                return READ_LATE;
        }
        ssize_t r = conn_recv(c, p, n);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            return READ_EOF;
        }
    }
    return 0;
}

/* Read the rest of a message whose first bytes arrived, within the
 * server's read deadline; log a connection closed for being too slow. */
static int read_rest(mf_conn *c, uint8_t *p, size_t n, int64_t deadline_us)
{
    int r = read_full(c, p, n, deadline_us);
    if (r == READ_LATE) {
        mf_log(MF_LOG_INFO, "NETWORK", 22989, c->client.remote,
               "Error receiving request from client: a message was not complete %d ms after "
               "its first byte. Ending connection from remote",
               c->srv->read_deadline_ms);
    }
    return r;
}

/* Send the `n` parts in `iov` whole (the array is consumed), counting the
 * bytes out. */
static int send_parts(mf_conn *c, struct iovec *iov, int n)
{
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    size_t left = 0;
    for (int i = 0; i < n; i++)
        left += iov[i].iov_len;
    mf_counters *k = mf_instance_counters(c->srv->inst);
    atomic_fetch_add_explicit(&k->bytes_out, left, memory_order_relaxed);
    if (c->ssl) {
        /* one TLS record per part, each written whole */
        for (int i = 0; i < n; i++) {
            const uint8_t *p = iov[i].iov_base;
            size_t len = iov[i].iov_len;
            while (len > 0) {
                size_t chunk = len > (1u << 30) ? (1u << 30) : len;
                size_t wrote = 0;
                if (SSL_write_ex(c->ssl, p, chunk, &wrote) != 1)
                    return -1;
                p += wrote;
                len -= wrote;
            }
        }
        return 0;
    }
    while (left > 0) {
        ssize_t r = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        left -= (size_t)r;
        /* skip what was sent: whole parts, then into the next one */
        while (mh.msg_iovlen > 0 && (size_t)r >= mh.msg_iov->iov_len) {
            r -= (ssize_t)mh.msg_iov->iov_len;
            mh.msg_iov++;
            mh.msg_iovlen--;
        }
        if (mh.msg_iovlen > 0) {
            mh.msg_iov->iov_base = (uint8_t *)mh.msg_iov->iov_base + r;
            mh.msg_iov->iov_len -= (size_t)r;
        }
    }
    return 0;
}

static int write_full(mf_conn *c, const uint8_t *p, size_t n)
{
    struct iovec iov = {(void *)p, n};
    return send_parts(c, &iov, 1);
}

/* Send an OP_MSG reply of `body` without copying the body: its prefix,
 * the body where it lies, and the checksum if asked, in one gather
 * write (a reply can be 16 MiB, and copying it into a message buffer
 * cost a copy and the buffer's growth). */
static int send_msg_reply(mf_conn *c, int32_t request_id, int32_t response_to, uint32_t flags,
                          const bson_t *body)
{
    uint8_t prefix[MF_MSG_REPLY_PREFIX], crc[4];
    size_t tail = mf_msg_reply_parts(prefix, crc, request_id, response_to, flags, body);
    struct iovec iov[3] = {{prefix, sizeof prefix},
                           {(void *)bson_get_data(body), body->len},
                           {crc, tail}};
    return send_parts(c, iov, tail ? 3 : 2);
}

static bool reply_ok(const bson_t *reply)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, "ok") && bson_iter_as_bool(&it);
}

static int send_op_reply(mf_conn *c, int32_t response_to, int32_t flags,
                         const bson_t *doc, mf_buf *out)
{
    out->len = 0;
    if (mf_msg_build_op_reply(out, mfi_next_request_id(), response_to, flags, doc) != 0)
        return CLOSE;
    return write_full(c, out->data, out->len) == 0 ? KEEP : CLOSE;
}

/* The $err document mongod sends for a removed legacy operation. */
static int send_legacy_err(mf_conn *c, int32_t response_to, const char *what, mf_buf *out)
{
    char msg[256];
    bson_t doc = BSON_INITIALIZER;
    snprintf(msg, sizeof msg, "%s is no longer supported. " LEGACY_LINK, what);
    BSON_APPEND_UTF8(&doc, "$err", msg);
    BSON_APPEND_INT32(&doc, "code", 5739101);
    BSON_APPEND_DOUBLE(&doc, "ok", 0.0);
    int rc = send_op_reply(c, response_to, 2 /* QueryFailure */, &doc, out);
    bson_destroy(&doc);
    return rc;
}

/* ------------------------------------------------------------------- OP_MSG */

static int handle_op_msg(mf_conn *c, const mf_msg_header *h, const uint8_t *msg,
                         size_t len)
{
    mf_instance *inst = c->srv->inst;
    mf_op_msg m;
    mf_error err;
    bson_t cmd, reply;
    int run_flags = 0;

    /* mongod reads the flags again to shape its error reply; with no room
     * for them that read fails outside any handler and the connection
     * closes. */
    if (len < MF_MSG_HEADER_LEN + 4) {
        mf_log(MF_LOG_INFO, "NETWORK", 4879802, c->client.remote,
               "OP_MSG without flags; closing connection");
        return CLOSE;
    }
    /* The raw flags, for a reply to a message that fails to parse. */
    uint32_t raw_flags = mf_load_u32le(msg + 16);

    mf_error_clear(&err);
    int rc = mf_msg_parse_op_msg(msg, len, &m, &err);
    if (rc == 0)
        rc = mf_msg_command_doc(&m, &cmd, &err);
    if (rc != 0) {
        if (mf_msg_error_is_fatal(rc)) {
            mf_log(MF_LOG_INFO, "NETWORK", 4879802, c->client.remote,
                   "Failed to handle request: %s (%d); closing connection", err.msg, rc);
            return CLOSE;
        }
        if (raw_flags & MF_MSG_MORE_TO_COME)
            return KEEP;
        bson_init(&reply);
        mf_command_error_reply(&reply, &err);
        rc = send_msg_reply(c, mfi_next_request_id(), h->request_id,
                            raw_flags & MF_MSG_CHECKSUM_PRESENT, &reply);
        bson_destroy(&reply);
        return rc != 0 ? CLOSE : KEEP;
    }

    c->client.exhaust_allowed = (m.flags & MF_MSG_EXHAUST_ALLOWED) != 0;
    bson_init(&reply);
    mf_command_run(inst, &c->client, &cmd, &reply, &run_flags);
    if (run_flags & MF_RUN_CLOSE) {
        bson_destroy(&reply);
        bson_destroy(&cmd);
        return CLOSE;
    }
    if (m.flags & MF_MSG_MORE_TO_COME) { /* the client wants no reply */
        bson_destroy(&reply);
        bson_destroy(&cmd);
        return KEEP;
    }

    /* Exhaust: while the command can stream and succeeds, send each reply
     * with moreToCome and run the command again; each reply answers the
     * previous one's requestID, as a driver reading the stream expects. */
    uint32_t base = m.flags & MF_MSG_CHECKSUM_PRESENT;
    int32_t response_to = h->request_id;
    int result = KEEP;
    for (;;) {
        bool stream = c->client.exhaust_allowed && (run_flags & MF_RUN_EXHAUST) &&
                      reply_ok(&reply) && !mf_instance_is_shutting_down(inst);
        int32_t id = mfi_next_request_id();
        if (send_msg_reply(c, id, response_to, base | (stream ? MF_MSG_MORE_TO_COME : 0),
                           &reply) != 0) {
            result = CLOSE;
            break;
        }
        if (!stream)
            break;
        response_to = id;
        bson_reinit(&reply);
        mf_command_run(inst, &c->client, &cmd, &reply, &run_flags);
        if (run_flags & MF_RUN_CLOSE) {
            result = CLOSE;
            break;
        }
    }
    c->client.exhaust_allowed = false;
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return result;
}

/* ----------------------------------------------------------------- OP_QUERY */

/* Commands OP_QUERY may still carry (check_allowed_op_query_cmd.cpp): the
 * handshake, and a few mongod 7.0 tolerates while warning. */
static bool op_query_allowed(const char *name)
{
    static const char *allowed[] = {"hello", "isMaster", "ismaster", "_isSelf",
                                    "authenticate", "buildinfo", "buildInfo",
                                    "saslContinue", "saslStart"};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (strcmp(name, allowed[i]) == 0)
            return true;
    return false;
}

/* Fill `cmd` with the command an OP_QUERY on <db>.$cmd stands for: the
 * query unwrapped from $query/query, with $db appended. */
static int op_query_command(const mf_op_query *q, bson_t *cmd, mf_error *err)
{
    bson_t query, inner;
    bson_iter_t it;
    const bson_t *src = &query;

    bson_init_static(&query, q->query, q->query_len);
    if (bson_iter_init(&it, &query) && bson_iter_next(&it) &&
        (strcmp(bson_iter_key(&it), "$query") == 0 || strcmp(bson_iter_key(&it), "query") == 0) &&
        BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t n;
        const uint8_t *d;
        bson_iter_document(&it, &n, &d);
        bson_init_static(&inner, d, n);
        src = &inner;
        if (bson_iter_init_find(&it, &query, "$maxTimeMS"))
            return mf_error_set(err, MF_InvalidOptions,
                                "cannot use $maxTimeMS query option with commands; use maxTimeMS command option instead");
    }
    if (bson_iter_init_find(&it, src, "$db"))
        return mf_error_set(err, 40621, "$db is not allowed in OP_QUERY requests");
    if (!bson_iter_init(&it, src) || !bson_iter_next(&it))
        return mf_error_set(err, MF_UnsupportedOpQueryCommand,
                            "Unsupported OP_QUERY command: . " LEGACY_LINK);
    if (!op_query_allowed(bson_iter_key(&it)))
        return mf_error_set(err, MF_UnsupportedOpQueryCommand,
                            "Unsupported OP_QUERY command: %s. " LEGACY_LINK,
                            bson_iter_key(&it));

    const char *dot = strchr(q->ns, '.');
    bson_init(cmd);
    bson_concat(cmd, src);
    bson_append_utf8(cmd, "$db", 3, q->ns, (int)(dot - q->ns));
    return 0;
}

static int handle_op_query(mf_conn *c, const mf_msg_header *h, const uint8_t *msg,
                           size_t len, mf_buf *out)
{
    mf_op_query q;
    mf_error err;
    bson_t reply, cmd;
    int run_flags = 0, result;

    mf_error_clear(&err);
    bson_init(&reply);
    int rc = mf_msg_parse_op_query(msg, len, &q, &err);
    if (rc == 0) {
        const char *dot = strchr(q.ns, '.');
        if (!dot || strcmp(dot + 1, "$cmd") != 0) {
            bson_destroy(&reply);
            return send_legacy_err(c, h->request_id, "OP_QUERY", out);
        }
        if (q.flags & 64 /* QueryOption_Exhaust */) {
            bson_t query;
            char shown[256] = "";
            if (bson_init_static(&query, q.query, q.query_len))
                mf_bsonx_to_string(&query, shown, sizeof shown);
            rc = mf_error_set(&err, 18527,
                              "The 'exhaust' OP_QUERY flag is invalid for commands: %s %s",
                              q.ns, shown);
        }
        else if (q.nreturn != 1 && q.nreturn != -1)
            rc = mf_error_set(&err, 16979,
                              "Bad numberToReturn (%d) for $cmd type ns - can only be 1 or -1",
                              q.nreturn);
        else
            rc = op_query_command(&q, &cmd, &err);
    }
    if (rc != 0) {
        mf_command_error_reply(&reply, &err);
        result = send_op_reply(c, h->request_id, 8 /* AwaitCapable */, &reply, out);
        bson_destroy(&reply);
        return result;
    }
    mf_command_run(c->srv->inst, &c->client, &cmd, &reply, &run_flags);
    bson_destroy(&cmd);
    if (run_flags & MF_RUN_CLOSE)
        result = CLOSE;
    else
        result = send_op_reply(c, h->request_id, 8 /* AwaitCapable */, &reply, out);
    bson_destroy(&reply);
    return result;
}

/* --------------------------------------------------------------- the loop */

/* A removed fire-and-forget write: mongod fails it outside any reply, so
 * the connection closes. */
static int legacy_write(const char *ctx, const char *what)
{
    mf_log(MF_LOG_INFO, "NETWORK", 4879802, ctx,
           "%s is no longer supported; closing connection", what);
    return CLOSE;
}

static int handle(mf_conn *c, const mf_msg_header *h, const uint8_t *msg,
                  size_t len, mf_buf *out)
{
    const char *ctx = c->client.remote;
    switch (h->opcode) {
    case MF_OPCODE_MSG:
        return handle_op_msg(c, h, msg, len);
    case MF_OPCODE_QUERY:
        return handle_op_query(c, h, msg, len, out);
    case MF_OPCODE_GET_MORE:
        return send_legacy_err(c, h->request_id, "OP_GET_MORE", out);
    case MF_OPCODE_INSERT:
        return legacy_write(ctx, "OP_INSERT");
    case MF_OPCODE_UPDATE:
        return legacy_write(ctx, "OP_UPDATE");
    case MF_OPCODE_DELETE:
        return legacy_write(ctx, "OP_DELETE");
    case MF_OPCODE_KILL_CURSORS:
        return legacy_write(ctx, "OP_KILL_CURSORS");
    case MF_OPCODE_COMPRESSED:
        /* No compressor is enabled, so no id can name an available one. */
        mf_log(MF_LOG_INFO, "NETWORK", 4879802, ctx, "%s; closing connection",
               len < MF_MSG_HEADER_LEN + 9
                   ? "Invalid compressed message header"
                   : "Compression algorithm specified in message is not available");
        return CLOSE;
    default:
        mf_log(MF_LOG_INFO, "NETWORK", 21968, ctx, "Operation is not supported: %d",
               h->opcode);
        return KEEP;
    }
}

/* mongod answers an HTTP GET on its port with this, then hangs up
 * (checkForHTTPRequest looks at the first four bytes only). */
static bool looks_like_http(const uint8_t *hdr)
{
    return memcmp(hdr, "GET ", 4) == 0;
}

static void send_http_notice(mf_conn *c)
{
    static const char body[] =
        "It looks like you are trying to access MongoDB over HTTP on the native driver port.\r\n";
    char resp[512];
    int n = snprintf(resp, sizeof resp,
                     "HTTP/1.0 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     sizeof body - 1, body);
    (void)write_full(c, (const uint8_t *)resp, (size_t)n);
}

static void conn_loop(mf_conn *c)
{
    mf_counters *k = mf_instance_counters(c->srv->inst);
    mf_buf in = {0}, out = {0};
    uint8_t hdr[MF_MSG_HEADER_LEN];
    bool first = true;

    for (;;) {
        /* Idle between messages for as long as the client likes; once a
         * message's first byte is here, the whole of it must follow within
         * the read deadline. */
        ssize_t got = conn_recv(c, hdr, sizeof hdr);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        int64_t deadline_us = c->srv->read_deadline_ms < 0
                                  ? -1
                                  : mf_clock_mono_us() + (int64_t)c->srv->read_deadline_ms * 1000;
        if (read_rest(c, hdr + got, sizeof hdr - (size_t)got, deadline_us) != 0)
            break;
        if (first && looks_like_http(hdr)) {
            send_http_notice(c);
            break;
        }
        first = false;
        mf_msg_header h;
        mf_msg_header_read(hdr, &h);
        /* Check the length before allocating for it. */
        if (h.length < MF_MSG_HEADER_LEN || h.length > MF_MAX_MESSAGE_SIZE) {
            mf_log(MF_LOG_INFO, "NETWORK", 4615638, c->client.remote,
                   "recv(): message msgLen %d is invalid. Min %d Max: %d", h.length,
                   MF_MSG_HEADER_LEN, MF_MAX_MESSAGE_SIZE);
            break;
        }
        in.len = 0;
        if (mf_buf_reserve(&in, (size_t)h.length) != 0)
            break;
        memcpy(in.data, hdr, sizeof hdr);
        if (read_rest(c, in.data + sizeof hdr, (size_t)h.length - sizeof hdr, deadline_us) != 0)
            break;
        in.len = (size_t)h.length;
        atomic_fetch_add_explicit(&k->bytes_in, in.len, memory_order_relaxed);
        atomic_fetch_add_explicit(&k->num_requests, 1, memory_order_relaxed);

        atomic_fetch_add_explicit(&k->conn_active, 1, memory_order_relaxed);
        int r = handle(c, &h, in.data, in.len, &out);
        atomic_fetch_sub_explicit(&k->conn_active, 1, memory_order_relaxed);
        if (r == CLOSE)
            break;
        /* A huge request or reply should not pin its memory for the life of
         * an idle connection. */
        if (in.cap > (1u << 20))
            mf_buf_free(&in);
        if (out.cap > (1u << 20))
            mf_buf_free(&out);
    }
    mf_buf_free(&in);
    mf_buf_free(&out);
}

/* The client's hook for an awaitable hello: has the peer hung up? */
static bool peer_gone(mf_client *client)
{
    mf_conn *c = (mf_conn *)((char *)client - offsetof(mf_conn, client));
    struct pollfd pfd = {.fd = c->fd, .events = POLLRDHUP};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void end_for_tls(mf_conn *c, const char *why)
{
    mf_log(MF_LOG_INFO, "NETWORK", 22988, c->client.remote,
           "Error receiving request from client. Ending connection from remote: "
           "SSLHandshakeFailed: %s",
           why);
}

/* TLS or plain, told by the first 16 bytes as mongod tells them: a
 * MongoDB header's responseTo (bytes 8..11) is 0 or -1, a TLS record's
 * bytes there are not (an HTTP request aside).  Nothing is consumed.
 * Returns 0 to go on (through c->ssl for TLS), -1 to close. */
static int start_tls(mf_conn *c)
{
    mf_server *srv = c->srv;
    uint8_t hdr[MF_MSG_HEADER_LEN];
    ssize_t r;
    if (srv->tls.mode == MF_TLS_DISABLED)
        return 0; /* (a TLS client's hello is then a malformed message) */
    /* idle before the first byte as long as the client likes */
    do
        r = recv(c->fd, hdr, 1, MSG_PEEK);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return -1;
    /* then the header within the read deadline */
    if (srv->read_deadline_ms > 0) {
        struct timeval tv = {.tv_sec = srv->read_deadline_ms / 1000,
                             .tv_usec = (srv->read_deadline_ms % 1000) * 1000};
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    do
        r = recv(c->fd, hdr, sizeof hdr, MSG_PEEK | MSG_WAITALL);
    while (r < 0 && errno == EINTR);
    if (srv->read_deadline_ms > 0) {
        struct timeval none = {0};
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    }
    if (r < (ssize_t)sizeof hdr) {
        if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
            mf_log(MF_LOG_INFO, "NETWORK", 22989, c->client.remote,
                   "Error receiving request from client: a message was not complete %d ms "
                   "after its first byte. Ending connection from remote",
                   srv->read_deadline_ms);
        return -1;
    }
    int32_t response_to = (int32_t)((uint32_t)hdr[8] | (uint32_t)hdr[9] << 8 |
                                    (uint32_t)hdr[10] << 16 | (uint32_t)hdr[11] << 24);
    bool tls = response_to != 0 && response_to != -1 && !looks_like_http(hdr);
    if (!tls) {
        if (srv->tls.mode == MF_TLS_REQUIRE) {
            end_for_tls(c, "The server is configured to only allow SSL connections");
            return -1;
        }
        if (srv->tls.mode == MF_TLS_PREFER)
            mf_log(MF_LOG_INFO, "NETWORK", 23838, c->client.remote,
                   "SSL mode is set to 'preferred' and connection to remote is not using SSL.");
        return 0;
    }
    char why[300];
    c->ssl = mf_tls_accept(&srv->tls, c->fd, srv->read_deadline_ms, c->client.tls_subject,
                           sizeof c->client.tls_subject, why, sizeof why, c->client.remote);
    if (!c->ssl) {
        end_for_tls(c, why);
        return -1;
    }
    c->client.tls = true;
    return 0;
}

void *mfi_conn_main(void *arg)
{
    mf_conn *c = arg;
    mf_server *srv = c->srv;
    mf_counters *k = mf_instance_counters(srv->inst);

    c->client.peer_gone = peer_gone;
    if (start_tls(c) == 0)
        conn_loop(c);
    if (c->ssl)
        SSL_free(c->ssl);

    mf_log(MF_LOG_INFO, "NETWORK", 22944, c->client.remote, "Connection ended");
    mf_command_client_end(&c->client);
    pthread_mutex_lock(&srv->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->nconns--;
    /* Close under the lock: the stopper shuts sockets down under it too, so
     * it never touches a descriptor number already reused. */
    close(c->fd);
    atomic_fetch_sub_explicit(&k->conn_current, 1, memory_order_relaxed);
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->mu);
    free(c);
    return NULL;
}
