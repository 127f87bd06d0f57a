/*
 * tls.c -- TLS for the wire server, with OpenSSL's libssl, as mongod 7.0
 * sets it up (ssl_manager_openssl.cpp):
 *
 *   - the server's certificate and key from one PEM file (the leaf first,
 *     any chain after it), an optional password for the key;
 *   - TLS 1.2 and 1.3 only, ciphers "HIGH:!EXPORT:!aNULL@STRENGTH";
 *   - with a CA file, every client is asked for a certificate, and the
 *     handshake never fails for want of one: the certificate is judged
 *     after it, where a missing one (23255) or one the CA does not vouch
 *     for (23256) ends the connection unless the options allow it;
 *   - a verified certificate's subject is what MONGODB-X509 authenticates
 *     (the command layer's `authenticate`).
 *
 * A connection is told TLS from plain by its first 16 bytes (conn.c), as
 * mongod does: a MongoDB header's responseTo is 0 or -1, a TLS record's
 * bytes there are not.
 */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

/* The last OpenSSL error as text. */
static void ssl_reason(char *out, size_t cap)
{
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, out, cap);
    else
        snprintf(out, cap, "unknown error");
    ERR_clear_error();
}

static int password_cb(char *buf, int size, int rwflag, void *arg)
{
    (void)rwflag;
    const char *pw = arg;
    int n = pw ? (int)strlen(pw) : 0;
    if (n >= size)
        n = size - 1;
    if (n > 0)
        memcpy(buf, pw, (size_t)n);
    return n;
}

/* mongod verifies after the handshake: the handshake takes any
 * certificate, so that a refusal is its own, logged, decision. */
static int verify_any(int ok, X509_STORE_CTX *store)
{
    (void)ok, (void)store;
    return 1;
}

int mf_tls_open(const mf_server_config *cfg, mf_tls *out, mf_error *err)
{
    memset(out, 0, sizeof *out);
    bool any_option = (cfg->tls_certificate_key_file && *cfg->tls_certificate_key_file) ||
                      (cfg->tls_ca_file && *cfg->tls_ca_file) ||
                      (cfg->tls_certificate_key_file_password &&
                       *cfg->tls_certificate_key_file_password) ||
                      cfg->tls_allow_connections_without_certificates ||
                      cfg->tls_allow_invalid_certificates;
    if (cfg->tls_mode == MF_TLS_DISABLED) {
        if (any_option)
            return mf_error_set(err, MF_BadValue,
                                "need to enable TLS via the sslMode/tlsMode flag when using TLS "
                                "configuration parameters");
        return 0;
    }
    if (!cfg->tls_certificate_key_file || !*cfg->tls_certificate_key_file)
        return mf_error_set(err, MF_BadValue,
                            "need tlsCertificateKeyFile or certificateSelector when TLS is "
                            "enabled");
    /* mongod 7.0.6 and later: a chain of trust is required */
    if (!cfg->tls_ca_file || !*cfg->tls_ca_file)
        return mf_error_set(err, MF_BadValue,
                            "The use of TLS without specifying a chain of trust is no longer "
                            "supported");
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return mf_error_oom(err);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
    if (!SSL_CTX_set_cipher_list(ctx, "HIGH:!EXPORT:!aNULL@STRENGTH")) {
        SSL_CTX_free(ctx);
        return mf_error_set(err, MF_InvalidSSLConfiguration, "can't set supported cipher list");
    }
    SSL_CTX_set_default_passwd_cb(ctx, password_cb);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)cfg->tls_certificate_key_file_password);
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_certificate_key_file) != 1) {
        ssl_reason(why, sizeof why);
        mf_log(MF_LOG_ERROR, "NETWORK", 23248, "main", "Cannot read certificate file %s: %s",
               cfg->tls_certificate_key_file, why);
        SSL_CTX_free(ctx);
        return mf_error_set(err, MF_InvalidSSLConfiguration, "Can not set up PEM key file.");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_certificate_key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        ssl_reason(why, sizeof why);
        mf_log(MF_LOG_ERROR, "NETWORK", 23251, "main", "Cannot read PEM key %s: %s",
               cfg->tls_certificate_key_file, why);
        SSL_CTX_free(ctx);
        return mf_error_set(err, MF_InvalidSSLConfiguration, "Can not set up PEM key file.");
    }
    /* the password is needed only to read the key */
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    X509 *own = SSL_CTX_get0_certificate(ctx);
    if (own && (X509_cmp_current_time(X509_get0_notAfter(own)) < 0 ||
                X509_cmp_current_time(X509_get0_notBefore(own)) > 0)) {
        SSL_CTX_free(ctx);
        return mf_error_set(err, MF_InvalidSSLConfiguration,
                            "The provided SSL certificate is expired or not yet valid.");
    }
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_ca_file);
    if (!names || SSL_CTX_load_verify_locations(ctx, cfg->tls_ca_file, NULL) != 1) {
        ssl_reason(why, sizeof why);
        if (names)
            sk_X509_NAME_pop_free(names, X509_NAME_free);
        SSL_CTX_free(ctx);
        return mf_error_set(err, MF_InvalidSSLConfiguration,
                            "cannot read certificate authority file: %s %s", cfg->tls_ca_file,
                            why);
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_any);
    out->ctx = ctx;
    out->mode = cfg->tls_mode;
    out->has_ca = true;
    out->allow_no_cert = cfg->tls_allow_connections_without_certificates;
    out->allow_invalid = cfg->tls_allow_invalid_certificates;
    return 0;
}

void mf_tls_close(mf_tls *t)
{
    if (t->ctx)
        SSL_CTX_free(t->ctx);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------- subjects */

static void put(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && *o + 1 < cap; i++)
        out[(*o)++] = s[i];
    out[*o < cap ? *o : cap - 1] = '\0';
}

/* A value with mongod's escapeRfc2253: a backslash before , + " \ < > ;,
 * before a leading space or '#' and a trailing space; bytes of 0x80 and
 * above as \XX. */
static void put_escaped(char *out, size_t cap, size_t *o, const unsigned char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char buf[4];
        unsigned char ch = v[i];
        if (ch >= 0x80) {
            snprintf(buf, sizeof buf, "\\%02X", ch);
            put(out, cap, o, buf, 3);
            continue;
        }
        if (strchr(",+\"\\<>;", ch) || (i == 0 && (ch == ' ' || ch == '#')) ||
            (i == n - 1 && ch == ' '))
            put(out, cap, o, "\\", 1);
        put(out, cap, o, (const char *)&ch, 1);
    }
}

void mf_tls_subject(X509 *x, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    const X509_NAME *name = X509_get_subject_name(x);
    int n = name ? X509_NAME_entry_count(name) : 0;
    int prev_set = -1;
    /* last to first: RFC 2253's order; entries of one set are one RDN */
    for (int i = n - 1; i >= 0; i--) {
        const X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
        int set = X509_NAME_ENTRY_set(e);
        if (i != n - 1)
            put(out, cap, &o, set == prev_set ? "+" : ",", 1);
        prev_set = set;
        const ASN1_OBJECT *obj = X509_NAME_ENTRY_get_object(e);
        int nid = OBJ_obj2nid(obj);
        char oid[128];
        const char *sn = nid != NID_undef ? OBJ_nid2sn(nid) : NULL;
        if (!sn) {
            OBJ_obj2txt(oid, sizeof oid, obj, 1);
            sn = oid;
        }
        put(out, cap, &o, sn, strlen(sn));
        put(out, cap, &o, "=", 1);
        const ASN1_STRING *v = X509_NAME_ENTRY_get_data(e);
        put_escaped(out, cap, &o, ASN1_STRING_get0_data(v), (size_t)ASN1_STRING_length(v));
    }
}

/* ------------------------------------------------------------ handshake */

static void set_timeouts(int fd, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

SSL *mf_tls_accept(const mf_tls *t, int fd, int deadline_ms, char *subject, size_t cap,
                   char *why, size_t whycap, const char *remote)
{
    subject[0] = '\0';
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl || SSL_set_fd(ssl, fd) != 1) {
        snprintf(why, whycap, "out of memory");
        SSL_free(ssl);
        return NULL;
    }
    /* a client that starts a handshake must finish it as it must finish a
     * message: within the read deadline */
    if (deadline_ms > 0)
        set_timeouts(fd, deadline_ms);
    int r = SSL_accept(ssl);
    if (deadline_ms > 0)
        set_timeouts(fd, 0);
    if (r != 1) {
        char reason[200];
        ssl_reason(reason, sizeof reason);
        snprintf(why, whycap, "SSL handshake failed: %s", reason);
        SSL_free(ssl);
        return NULL;
    }
    if (!t->has_ca)
        return ssl;
    X509 *peer = SSL_get1_peer_certificate(ssl);
    if (!peer) {
        if (t->allow_no_cert) {
            mf_log(MF_LOG_WARNING, "NETWORK", 23234, remote,
                   "No SSL certificate provided by peer");
            return ssl;
        }
        mf_log(MF_LOG_ERROR, "NETWORK", 23255, remote,
               "No SSL certificate provided by peer; connection rejected");
        snprintf(why, whycap, "no SSL certificate provided by peer; connection rejected");
        SSL_free(ssl);
        return NULL;
    }
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        if (t->allow_invalid) {
            /* kept, but with no subject: it authenticates no one */
            mf_log(MF_LOG_WARNING, "NETWORK", 23235, remote,
                   "SSL peer certificate validation failed: %s",
                   X509_verify_cert_error_string(v));
            X509_free(peer);
            return ssl;
        }
        mf_log(MF_LOG_ERROR, "NETWORK", 23256, remote,
               "SSL peer certificate validation failed: %s", X509_verify_cert_error_string(v));
        snprintf(why, whycap, "SSL peer certificate validation failed: %s",
                 X509_verify_cert_error_string(v));
        X509_free(peer);
        SSL_free(ssl);
        return NULL;
    }
    mf_tls_subject(peer, subject, cap);
    X509_free(peer);
    return ssl;
}
