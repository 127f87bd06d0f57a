/*
 * tls.h -- TLS for the wire server (tls.c), with OpenSSL's libssl, as
 * mongod 7.0's net.tls options describe it.  Private to csrc/wire.
 */
#ifndef MF_WIRE_TLS_H
#define MF_WIRE_TLS_H

#include "wire.h"

#include <openssl/ssl.h>

/* The server's TLS set-up, made from its options at open. */
typedef struct mf_tls {
    SSL_CTX *ctx;
    mf_tls_mode mode;
    bool has_ca;          /* a CA file: client certificates are asked for */
    bool allow_no_cert;   /* tlsAllowConnectionsWithoutCertificates */
    bool allow_invalid;   /* tlsAllowInvalidCertificates */
} mf_tls;

/* Check the options as mongod's startup does (BadValue with its message)
 * and load the certificate, key and CA (InvalidSSLConfiguration 140).
 * With mode disabled, `*out` stays zeroed. */
int mf_tls_open(const mf_server_config *cfg, mf_tls *out, mf_error *err);
void mf_tls_close(mf_tls *t);

/* The handshake on a connection whose first bytes are a TLS record: the
 * socket (blocking) within `deadline_ms` (negative: none); then the
 * client's certificate checked as mongod checks it, its subject written
 * into `subject` ("" when there is none).  Returns the SSL, or NULL with
 * the reason in `why` (the connection is then to be closed). */
SSL *mf_tls_accept(const mf_tls *t, int fd, int deadline_ms, char *subject, size_t cap,
                   char *why, size_t whycap, const char *remote);

/* The subject of certificate `x` as mongod prints it (RFC 2253 order, the
 * most specific RDN first, OpenSSL short names, no spaces, mongod's
 * escaping). */
void mf_tls_subject(X509 *x, char *out, size_t cap);

#endif /* MF_WIRE_TLS_H */
