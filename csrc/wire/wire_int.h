/*
 * wire_int.h -- private to csrc/wire: the server and connection records.
 */
#ifndef MF_WIRE_INT_H
#define MF_WIRE_INT_H

#include "wire.h"
#include "tls.h"

#include <pthread.h>
#include <stdatomic.h>

#define MF_MAX_LISTENERS 8

typedef struct mf_conn mf_conn;

struct mf_server {
    mf_instance *inst;
    int listen_fds[MF_MAX_LISTENERS];
    int nlisten;
    char unix_path[108]; /* sun_path; "" when none */
    int port;
    int max_connections;
    int read_deadline_ms; /* mf_server_config's; -1: none */
    mf_tls tls;           /* mode MF_TLS_DISABLED: no TLS */
    int wake[2]; /* self-pipe: written to stop the listener */

    pthread_t listener;
    bool listener_started;

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cond;
    mf_conn *conns; /* open connections, a doubly linked list */
    int nconns;
    bool stop_requested;
    bool stopped;

    atomic_int_fast64_t next_conn_id;
};

struct mf_conn {
    mf_server *srv;
    int fd;
    SSL *ssl; /* a TLS connection's (conn.c reads and writes through it) */
    mf_client client;
    mf_conn *prev, *next;
};

/* Next requestID for a message this server sends. */
int32_t mfi_next_request_id(void);

/* Thread body for one connection; owns `conn` and frees it. */
void *mfi_conn_main(void *conn);

#endif /* MF_WIRE_INT_H */
