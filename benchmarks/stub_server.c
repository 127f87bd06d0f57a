/*
 * stub_server.c -- a do-nothing MongoDB wire endpoint, the baseline for
 * benchmarks/ping_latency.py.
 *
 * It answers every OP_MSG with one fixed body and every OP_QUERY with the
 * same body in an OP_REPLY, and does nothing else: no parsing beyond the
 * header, no dispatch, no BSON library.  The body is a minimal hello reply
 * (no topologyVersion, so drivers poll instead of streaming), which also
 * satisfies a ping.  Same threading model as MultiforaDB's server: one
 * thread per connection, blocking sockets, TCP_NODELAY.
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

static uint8_t body[512];
static size_t body_len;

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Append a BSON element: type byte, key, value bytes. */
static void el(uint8_t type, const char *key, const void *val, size_t n)
{
    body[body_len++] = type;
    memcpy(body + body_len, key, strlen(key) + 1);
    body_len += strlen(key) + 1;
    memcpy(body + body_len, val, n);
    body_len += n;
}

static void build_body(void)
{
    uint8_t t = 1, i32[4];
    double one = 1.0;
    body_len = 4;
    el(0x08, "isWritablePrimary", &t, 1);
    el(0x08, "ismaster", &t, 1);
    put32(i32, 16777216);
    el(0x10, "maxBsonObjectSize", i32, 4);
    put32(i32, 48000000);
    el(0x10, "maxMessageSizeBytes", i32, 4);
    put32(i32, 100000);
    el(0x10, "maxWriteBatchSize", i32, 4);
    put32(i32, 30);
    el(0x10, "logicalSessionTimeoutMinutes", i32, 4);
    put32(i32, 0);
    el(0x10, "minWireVersion", i32, 4);
    put32(i32, 21);
    el(0x10, "maxWireVersion", i32, 4);
    el(0x01, "ok", &one, 8);
    body[body_len++] = 0;
    put32(body, (uint32_t)body_len);
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
