/*
 * wire.h -- the wire server: listener, connections, message framing.
 *
 * An mf_server owns an mf_instance (the command layer's view of the running
 * server), the listening sockets and one thread per connection.  Its threads
 * never touch Python: the py/ layer calls these functions with the GIL
 * released.
 *
 * Life cycle:
 *     mf_server_open   bind the sockets (so a busy port fails here, at once)
 *     mf_server_start  start accepting on a listener thread
 *     mf_server_wait   block until stopped (shutdown command or stop)
 *     mf_server_stop   stop accepting, close every connection, join threads
 *     mf_server_close  free it all (stops first if needed)
 */
#ifndef MF_WIRE_H
#define MF_WIRE_H

#include "../command/command.h"

typedef struct mf_server mf_server;

/* A client that starts a message must finish it within this many ms, or its
 * connection is closed (a slowloris defence).  Idle time between messages
 * has no limit. */
#define MF_READ_DEADLINE_MS_DEFAULT 30000

/* net.tls.mode: which connections a server accepts. */
typedef enum mf_tls_mode {
    MF_TLS_DISABLED = 0, /* plain only */
    MF_TLS_ALLOW,        /* both */
    MF_TLS_PREFER,       /* both; a plain one is logged (23838) */
    MF_TLS_REQUIRE,      /* TLS only */
} mf_tls_mode;

typedef struct mf_server_config {
    const char *dbpath;
    const char *bind_ip;     /* "127.0.0.1"; comma-separated list allowed */
    int port;                /* 0 picks an ephemeral port; -1 means no TCP */
    const char *unix_socket; /* path, or NULL for none; created mode 0600 */
    int max_connections;     /* accepted connections beyond it are closed */
    bool enable_test_commands;
    bool auth;                  /* access control (--auth) */
    int ttl_monitor_sleep_secs; /* the TTL monitor's period; 0: 60 */
    int session_refresh_ms;     /* logicalSessionRefreshMillis; 0: 300000 */
    int read_deadline_ms;       /* time to finish a message once its first
                                 * byte arrived; 0: 30000, negative: none */
    mf_huge_pages huge_pages;   /* the data file's mapping (pager.h) */
    mf_os_faults *faults;       /* the engine's fault table (storage/os.h), the
                                 * caller's, outliving the server; NULL: its own */
    const char *replica_set;    /* the set's name: a one-member replica set's
                                 * primary; NULL or "": a standalone */
    const bson_t *cmdline_argv;
    const bson_t *cmdline_parsed;
    /* TLS (tls.c), as mongod's net.tls options: any but mode are NULL or
     * false when not given */
    mf_tls_mode tls_mode;
    const char *tls_certificate_key_file;          /* PEM: certificate (+ chain) and key */
    const char *tls_certificate_key_file_password; /* the key's, if encrypted */
    const char *tls_ca_file; /* verifies clients' certificates (required with TLS) */
    bool tls_allow_connections_without_certificates;
    bool tls_allow_invalid_certificates;
} mf_server_config;

/* Bind and listen.  Returns 0 and `*out`, or an error code with `err` set
 * (address in use, bad address, socket path too long, dbpath locked). */
int mf_server_open(const mf_server_config *cfg, mf_server **out, mf_error *err);

/* Start accepting connections.  Returns 0 or an error code. */
int mf_server_start(mf_server *srv, mf_error *err);

/* Wait up to `timeout_ms` (negative: forever) for the server to stop.
 * Returns true once it has stopped. */
bool mf_server_wait(mf_server *srv, int64_t timeout_ms);

/* Stop: no new connections, every open connection closed, every thread
 * joined.  Idempotent; safe before start. */
void mf_server_stop(mf_server *srv);

void mf_server_close(mf_server *srv);

/* The TCP port actually bound (useful with port 0), or -1 without TCP. */
int mf_server_port(const mf_server *srv);

/* Run one command in-process, through the same dispatcher as the wire:
 * `doc[0..len)` is the command as a caller built it (validated here), `db`
 * becomes its `$db`.  `reply` must be initialised and empty; it receives the
 * whole reply.  Blocks only as the command itself does. */
void mf_server_command(mf_server *srv, const uint8_t *doc, size_t len,
                       const char *db, bson_t *reply);

/* ---- message framing (msg.c), exposed for the C tests ---- */

enum {
    MF_OPCODE_REPLY = 1,
    MF_OPCODE_UPDATE = 2001,
    MF_OPCODE_INSERT = 2002,
    MF_OPCODE_QUERY = 2004,
    MF_OPCODE_GET_MORE = 2005,
    MF_OPCODE_DELETE = 2006,
    MF_OPCODE_KILL_CURSORS = 2007,
    MF_OPCODE_COMPRESSED = 2012,
    MF_OPCODE_MSG = 2013,
};

enum {
    MF_MSG_CHECKSUM_PRESENT = 1u << 0,
    MF_MSG_MORE_TO_COME = 1u << 1,
    MF_MSG_EXHAUST_ALLOWED = 1u << 16,
};

#define MF_MSG_HEADER_LEN 16
#define MF_MSG_MAX_SEQUENCES 2

typedef struct mf_msg_header {
    int32_t length;
    int32_t request_id;
    int32_t response_to;
    int32_t opcode;
} mf_msg_header;

typedef struct mf_msg_sequence {
    const char *name; /* points into the message */
    const uint8_t *docs;
    size_t len;
    uint32_t ndocs;
} mf_msg_sequence;

/* A parsed OP_MSG: every pointer borrows from the message buffer. */
typedef struct mf_op_msg {
    uint32_t flags;
    const uint8_t *body;
    size_t body_len;
    mf_msg_sequence seq[MF_MSG_MAX_SEQUENCES];
    int nseq;
} mf_op_msg;

void mf_msg_header_read(const uint8_t *p, mf_msg_header *h);

/* Parse and validate a whole OP_MSG (header included): flags, sections,
 * every document's BSON, and the checksum when present, in mongod's order.
 * Returns 0 or the error mongod gives for the first problem found. */
int mf_msg_parse_op_msg(const uint8_t *msg, size_t len, mf_op_msg *out, mf_error *err);

/* True if an error code from mf_msg_parse_op_msg() must close the
 * connection without a reply, as mongod's ConnectionFatalMessageParseError
 * category does. */
bool mf_msg_error_is_fatal(int code);

/* Build the command document an OP_MSG stands for: the body, plus each
 * document sequence as an array field.  `out` must be uninitialised; on
 * success it is initialised and owned by the caller. */
int mf_msg_command_doc(const mf_op_msg *m, bson_t *out, mf_error *err);

/* Append a whole OP_MSG reply (header, flags, one body section, checksum
 * when `flags` asks for it) to `out`. */
int mf_msg_build_reply(mf_buf *out, int32_t request_id, int32_t response_to,
                       uint32_t flags, const bson_t *body);

/* The parts of the same reply, for a gather write that does not copy the
 * body: the bytes before it (header, flags, section kind) into `prefix`,
 * and the checksum after it into `crc`; returns how many bytes of `crc`
 * follow the body (0, or 4 when `flags` asks for a checksum). */
#define MF_MSG_REPLY_PREFIX (MF_MSG_HEADER_LEN + 5)
size_t mf_msg_reply_parts(uint8_t prefix[MF_MSG_REPLY_PREFIX], uint8_t crc[4],
                          int32_t request_id, int32_t response_to, uint32_t flags,
                          const bson_t *body);

/* A parsed OP_QUERY (borrowing from the message). */
typedef struct mf_op_query {
    int32_t flags;
    const char *ns;
    int32_t skip, nreturn;
    const uint8_t *query;
    size_t query_len;
} mf_op_query;

int mf_msg_parse_op_query(const uint8_t *msg, size_t len, mf_op_query *out,
                          mf_error *err);

/* Append an OP_REPLY carrying one document. */
int mf_msg_build_op_reply(mf_buf *out, int32_t request_id, int32_t response_to,
                          int32_t response_flags, const bson_t *doc);

#endif /* MF_WIRE_H */
