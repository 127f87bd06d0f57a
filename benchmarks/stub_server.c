/*
 * stub_server.c -- a do-nothing MongoDB wire endpoint, the baseline for the
 * wire benchmarks (benchmarks/ping_latency.py, benchmarks/crud_latency.py).
 *
 * It answers every OP_MSG with one fixed body and every OP_QUERY with the
 * same body in an OP_REPLY, and does nothing else: no parsing beyond the
 * header, no dispatch, no BSON library.  The body is a minimal hello reply
 * (no topologyVersion, so drivers poll instead of streaming), which also
 * satisfies a ping, plus an empty cursor and a count:
 *
 *   cursor: {firstBatch: [], id: Int64 0, ns: "bench.c"}   find, aggregate, listIndexes
 *   n: 1                                                   insert, update, delete, count
 *
 * A driver reads only the fields of the reply it expects, so one body
 * answers the handshake and every command alike: ok, an exhausted empty
 * cursor (find_one returns None, countDocuments 0), n 1.  Same threading model
 * as MultiforaDB's server: one thread per connection, blocking sockets,
 * TCP_NODELAY.
 *
 *   cc -O2 -pthread -o stub_server stub_server.c && ./stub_server PORT
 *
 * Prints "listening PORT" once ready (PORT 0 picks one).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint8_t body[512]; /* the fixed reply body: 258 bytes */
static size_t body_len;

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A BSON document under construction in a caller's buffer (big enough:
 * the body is fixed and small). */
typedef struct {
    uint8_t *p;
    size_t len;
} doc;

static void doc_begin(doc *d, uint8_t *p)
{
    d->p = p, d->len = 4;
}

/* Append an element: type byte, key, value bytes. */
static void el(doc *d, uint8_t type, const char *key, const void *val, size_t n)
{
    d->p[d->len++] = type;
    memcpy(d->p + d->len, key, strlen(key) + 1);
    d->len += strlen(key) + 1;
    memcpy(d->p + d->len, val, n);
    d->len += n;
}

static void el_int32(doc *d, const char *key, uint32_t v)
{
    uint8_t b[4];
    put32(b, v);
    el(d, 0x10, key, b, 4);
}

static void el_string(doc *d, const char *key, const char *s)
{
    uint8_t b[64];
    size_t n = strlen(s) + 1;
    put32(b, (uint32_t)n);
    memcpy(b + 4, s, n);
    el(d, 0x02, key, b, 4 + n);
}

/* Terminate a document; returns its length. */
static size_t doc_end(doc *d)
{
    d->p[d->len++] = 0;
    put32(d->p, (uint32_t)d->len);
    return d->len;
}

static void build_body(void)
{
    uint8_t t = 1, zero64[8] = {0}, batch[8], cursor[160];
    double one = 1.0;
    doc b, ba, cu;

    doc_begin(&ba, batch); /* [] */
    doc_begin(&cu, cursor);
    el(&cu, 0x04, "firstBatch", batch, doc_end(&ba));
    el(&cu, 0x12, "id", zero64, 8);
    el_string(&cu, "ns", "bench.c");

    doc_begin(&b, body);
    el(&b, 0x08, "isWritablePrimary", &t, 1);
    el(&b, 0x08, "ismaster", &t, 1);
    el_int32(&b, "maxBsonObjectSize", 16777216);
    el_int32(&b, "maxMessageSizeBytes", 48000000);
    el_int32(&b, "maxWriteBatchSize", 100000);
    el_int32(&b, "logicalSessionTimeoutMinutes", 30);
    el_int32(&b, "minWireVersion", 0);
    el_int32(&b, "maxWireVersion", 21);
    el(&b, 0x03, "cursor", cursor, doc_end(&cu));
    el_int32(&b, "n", 1);
    el(&b, 0x01, "ok", &one, 8);
    body_len = doc_end(&b);
}

static int read_full(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0)
            return -1;
        p += r, n -= (size_t)r;
    }
    return 0;
}

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg;
    uint8_t hdr[16], out[512];
    uint8_t *msg = malloc(48000000);
    uint32_t id = 1;
    while (msg && read_full(fd, hdr, 16) == 0) {
        uint32_t len = get32(hdr);
        if (len < 16 || len > 48000000 || read_full(fd, msg, len - 16) != 0)
            break;
        uint32_t opcode = get32(hdr + 12), flags = len >= 20 ? get32(msg) : 0;
        size_t n = 16;
        if (opcode == 2013) {
            put32(out + n, 0), n += 4;
            out[n++] = 0;
        } else if (opcode == 2004) {
            memset(out + n, 0, 20), put32(out + n, 8), put32(out + n + 16, 1), n += 20;
        } else {
            continue;
        }
        memcpy(out + n, body, body_len), n += body_len;
        put32(out, (uint32_t)n), put32(out + 4, id++), memcpy(out + 8, hdr + 4, 4);
        put32(out + 12, opcode == 2013 ? 2013 : 1);
        if (opcode == 2013 && (flags & 2))
            continue; /* moreToCome: no reply */
        if (send(fd, out, n, MSG_NOSIGNAL) != (ssize_t)n)
            break;
    }
    free(msg);
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 0, one = 1;
    build_body();
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 128)) {
        perror("bind");
        return 1;
    }
    socklen_t sl = sizeof sa;
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    printf("listening %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, serve, (void *)(intptr_t)fd) != 0)
            close(fd);
        pthread_attr_destroy(&a);
    }
}
