/* Cases for csrc/wire: OP_MSG framing, and a real server on a socket. */
#include "test.h"
#include "../wire/wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* Build an OP_MSG from `flags` and raw section bytes; add a checksum when
 * the flag asks for one (corrupted when `bad_crc`). */
static void build(mf_buf *m, uint32_t flags, const uint8_t *sections, size_t n, bool bad_crc)
{
    uint8_t hdr[16] = {0};
    m->len = 0;
    mf_buf_append(m, hdr, 16);
    mf_buf_put_i32le(m, (int32_t)flags);
    mf_buf_append(m, sections, n);
    size_t total = m->len + ((flags & MF_MSG_CHECKSUM_PRESENT) ? 4 : 0);
    mf_store_i32le(m->data, (int32_t)total);
    mf_store_i32le(m->data + 4, 42);
    mf_store_i32le(m->data + 12, MF_OPCODE_MSG);
    if (flags & MF_MSG_CHECKSUM_PRESENT) {
        uint32_t crc = mf_crc32c(0, m->data, m->len) ^ (bad_crc ? 1u : 0u);
        mf_buf_put_i32le(m, (int32_t)crc);
    }
}

static void add_body(mf_buf *s, const bson_t *b)
{
    uint8_t kind = 0;
    mf_buf_append(s, &kind, 1);
    mf_buf_append(s, bson_get_data(b), b->len);
}

static void add_seq(mf_buf *s, const char *name, const bson_t *docs, int n)
{
    uint8_t kind = 1;
    size_t size = 4 + strlen(name) + 1;
    for (int i = 0; i < n; i++)
        size += docs[i].len;
    mf_buf_append(s, &kind, 1);
    mf_buf_put_i32le(s, (int32_t)size);
    mf_buf_append(s, name, strlen(name) + 1);
    for (int i = 0; i < n; i++)
        mf_buf_append(s, bson_get_data(&docs[i]), docs[i].len);
}

static int parse(mf_buf *sec, uint32_t flags, bool bad_crc, mf_op_msg *m, mf_error *err)
{
    mf_buf msg = {0};
    build(&msg, flags, sec->data, sec->len, bad_crc);
    int rc = mf_msg_parse_op_msg(msg.data, msg.len, m, err);
    /* The parse borrows from msg; these cases only look at counts and codes. */
    mf_buf_free(&msg);
    return rc;
}

MFT_CASE(parse_ok, "/wire/msg/body_and_sequences")
{
    mf_buf sec = {0};
    mf_op_msg m;
    mf_error err;
    bson_t *body = BCON_NEW("insert", "c", "$db", "test");
    bson_t docs[3];
    for (int i = 0; i < 3; i++) {
        bson_init(&docs[i]);
        BSON_APPEND_INT32(&docs[i], "_id", i);
    }
    add_body(&sec, body);
    add_seq(&sec, "documents", docs, 3);

    mf_buf msg = {0};
    build(&msg, MF_MSG_CHECKSUM_PRESENT, sec.data, sec.len, false);
    CHECK_INT(mf_msg_parse_op_msg(msg.data, msg.len, &m, &err), 0);
    CHECK_INT(m.nseq, 1);
    CHECK_STR(m.seq[0].name, "documents");
    CHECK_INT(m.seq[0].ndocs, 3);
    CHECK_INT(m.body_len, body->len);

    bson_t cmd;
    CHECK_INT(mf_msg_command_doc(&m, &cmd, &err), 0);
    bson_iter_t it, arr;
    CHECK(bson_iter_init_find(&it, &cmd, "documents") && BSON_ITER_HOLDS_ARRAY(&it));
    CHECK(bson_iter_recurse(&it, &arr));
    int n = 0;
    while (bson_iter_next(&arr))
        n++;
    CHECK_INT(n, 3);
    CHECK(bson_iter_init(&it, &cmd) && bson_iter_next(&it));
    CHECK_STR(bson_iter_key(&it), "insert");
    bson_destroy(&cmd);
    mf_buf_free(&msg);
    mf_buf_free(&sec);
    bson_destroy(body);
    for (int i = 0; i < 3; i++)
        bson_destroy(&docs[i]);
}

MFT_CASE(parse_errors, "/wire/msg/errors_in_mongod_order")
{
    mf_buf sec = {0};
    mf_op_msg m;
    mf_error err;
    bson_t *body = BCON_NEW("ping", BCON_INT32(1), "$db", "admin");
    bson_t *doc = BCON_NEW("x", BCON_INT32(1));

    add_body(&sec, body);
    CHECK_INT(parse(&sec, 0, false, &m, &err), 0);
    CHECK_INT(parse(&sec, 1u << 4, false, &m, &err), MF_IllegalOpMsgFlag);
    CHECK(strstr(err.msg, "Ob00000000000000000000000000010000") != NULL);
    CHECK(mf_msg_error_is_fatal(MF_IllegalOpMsgFlag));
    CHECK_INT(parse(&sec, 1u << 20, false, &m, &err), 0); /* optional bits are fine */
    CHECK_INT(parse(&sec, MF_MSG_CHECKSUM_PRESENT, false, &m, &err), 0);
    CHECK_INT(parse(&sec, MF_MSG_CHECKSUM_PRESENT, true, &m, &err), MF_ChecksumMismatch);

    add_body(&sec, body); /* two bodies */
    CHECK_INT(parse(&sec, 0, false, &m, &err), 40430);

    sec.len = 0;
    add_seq(&sec, "docs", doc, 1);
    CHECK_INT(parse(&sec, 0, false, &m, &err), 40587); /* no body */
    add_body(&sec, body);
    add_seq(&sec, "docs", doc, 1);
    CHECK_INT(parse(&sec, 0, false, &m, &err), 40431); /* duplicate sequence */

    sec.len = 0;
    add_body(&sec, body);
    add_seq(&sec, "ping", doc, 1);
    CHECK_INT(parse(&sec, 0, false, &m, &err), 40433); /* also a body field */

    sec.len = 0;
    add_body(&sec, body);
    add_seq(&sec, "a", doc, 1);
    add_seq(&sec, "b", doc, 1);
    add_seq(&sec, "c", doc, 1);
    CHECK_INT(parse(&sec, 0, false, &m, &err), 233);
    CHECK(mf_msg_error_is_fatal(233));

    sec.len = 0;
    add_body(&sec, body);
    uint8_t kind = 9;
    mf_buf_append(&sec, &kind, 1);
    CHECK_INT(parse(&sec, 0, false, &m, &err), 40432);
    CHECK_STR(err.msg, "Unknown section kind 9");

    /* A sequence whose size runs past the end of the message. */
    sec.len = 0;
    add_body(&sec, body);
    add_seq(&sec, "docs", doc, 1);
    mf_store_i32le(sec.data + body->len + 2, 1000);
    CHECK_INT(parse(&sec, 0, false, &m, &err), MF_Overflow);
    CHECK(!mf_msg_error_is_fatal(MF_Overflow));

    /* A body whose declared length runs past the end. */
    sec.len = 0;
    add_body(&sec, body);
    mf_store_i32le(sec.data + 1, (int32_t)body->len + 10);
    CHECK_INT(parse(&sec, 0, false, &m, &err), MF_InvalidBSON);

    mf_buf_free(&sec);
    bson_destroy(body);
    bson_destroy(doc);
}

MFT_CASE(reply_roundtrip, "/wire/msg/reply_checksum_verifies")
{
    mf_buf out = {0};
    mf_op_msg m;
    mf_error err;
    bson_t *doc = BCON_NEW("ok", BCON_DOUBLE(1.0));
    CHECK_INT(mf_msg_build_reply(&out, 5, 42, MF_MSG_CHECKSUM_PRESENT, doc), 0);
    mf_msg_header h;
    mf_msg_header_read(out.data, &h);
    CHECK_INT(h.length, out.len);
    CHECK_INT(h.response_to, 42);
    CHECK_INT(h.opcode, MF_OPCODE_MSG);
    CHECK_INT(mf_msg_parse_op_msg(out.data, out.len, &m, &err), 0);
    CHECK_INT(m.body_len, doc->len);
    out.data[out.len - 6] ^= 0x40; /* flip a bit inside the body */
    CHECK_INT(mf_msg_parse_op_msg(out.data, out.len, &m, &err), MF_ChecksumMismatch);
    mf_buf_free(&out);
    bson_destroy(doc);
}

/* ----------------------------------------------------------- a live server */

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send an OP_MSG ping and read the reply's body `ok`; -1 on failure. */
static int ping(int fd)
{
    mf_buf sec = {0}, msg = {0};
    bson_t *body = BCON_NEW("ping", BCON_INT32(1), "$db", "admin");
    add_body(&sec, body);
    build(&msg, 0, sec.data, sec.len, false);
    bson_destroy(body);
    ssize_t w = send(fd, msg.data, msg.len, MSG_NOSIGNAL);
    mf_buf_free(&sec);
    if (w != (ssize_t)msg.len) {
        mf_buf_free(&msg);
        return -1;
    }
    mf_buf_free(&msg);
    uint8_t buf[512];
    size_t got = 0;
    while (got < 16 || got < (size_t)mf_load_i32le(buf)) {
        ssize_t r = recv(fd, buf + got, sizeof buf - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    bson_t reply;
    bson_iter_t it;
    if (!bson_init_static(&reply, buf + 21, (size_t)mf_load_i32le(buf + 21)) ||
        !bson_iter_init_find(&it, &reply, "ok"))
        return -1;
    return (int)bson_iter_as_double(&it);
}

MFT_CASE(server_ping, "/wire/server/ping_then_stop_with_open_connections")
{
    mf_server_config cfg = {.dbpath = mft_tmpdir(), .bind_ip = "127.0.0.1", .port = 0,
                            .max_connections = 4};
    mf_server *srv = NULL;
    mf_error err;
    mf_log_configure(MF_LOG_WARNING, false);
    CHECK_INT(mf_server_open(&cfg, &srv, &err), 0);
    CHECK(mf_server_port(srv) > 0);
    CHECK_INT(mf_server_start(srv, &err), 0);

    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = connect_to(mf_server_port(srv));
        CHECK(fds[i] >= 0);
        CHECK_INT(ping(fds[i]), 1);
    }
    CHECK(!mf_server_wait(srv, 10));
    mf_server_stop(srv); /* with three connections still open */
    CHECK(mf_server_wait(srv, 0));
    for (int i = 0; i < 3; i++) {
        CHECK_INT(ping(fds[i]), -1);
        close(fds[i]);
    }
    mf_server_close(srv);
}

MFT_CASE(server_limit, "/wire/server/connection_limit")
{
    mf_server_config cfg = {.dbpath = mft_tmpdir(), .bind_ip = "127.0.0.1", .port = 0,
                            .max_connections = 2};
    mf_server *srv = NULL;
    mf_error err;
    mf_log_configure(MF_LOG_WARNING, false);
    CHECK_INT(mf_server_open(&cfg, &srv, &err), 0);
    CHECK_INT(mf_server_start(srv, &err), 0);
    int a = connect_to(mf_server_port(srv)), b = connect_to(mf_server_port(srv));
    CHECK_INT(ping(a), 1);
    CHECK_INT(ping(b), 1);
    int c = connect_to(mf_server_port(srv)); /* accepted by the kernel, closed by us */
    CHECK_INT(ping(c), -1);
    close(c);
    close(a);
    /* Once one closes, a new connection is served again. */
    int ok = 0;
    for (int tries = 0; tries < 50 && ok != 1; tries++) {
        usleep(20000);
        int d = connect_to(mf_server_port(srv));
        ok = ping(d);
        close(d);
    }
    CHECK_INT(ok, 1);
    close(b);
    mf_server_close(srv);
}

MFT_CASE(server_busy_dir, "/wire/server/second_server_on_a_dir_is_refused")
{
    mf_server_config cfg = {.dbpath = mft_tmpdir(), .bind_ip = "127.0.0.1", .port = 0};
    mf_server *a = NULL, *b = NULL;
    mf_error err;
    CHECK_INT(mf_server_open(&cfg, &a, &err), 0);
    CHECK_INT(mf_server_open(&cfg, &b, &err), MF_DBPathInUse);
    CHECK(b == NULL);
    mf_server_close(a);
}
