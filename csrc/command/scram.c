/*
 * scram.c -- SCRAM-SHA-1 and SCRAM-SHA-256, the server's side (scram.h).
 */
#include "scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/usprep.h>
#include <unicode/ustring.h>

#define MAX_HASH 32     /* SHA-256's */
#define SERVER_NONCE 24 /* random bytes, 32 base64 characters */

const char *mfi_scram_mech_name(mfi_scram_mech m)
{
    return m == MFI_SCRAM_SHA1 ? "SCRAM-SHA-1" : "SCRAM-SHA-256";
}

bool mfi_scram_mech_of(const char *name, mfi_scram_mech *out)
{
    if (strcmp(name, "SCRAM-SHA-1") == 0)
        *out = MFI_SCRAM_SHA1;
    else if (strcmp(name, "SCRAM-SHA-256") == 0)
        *out = MFI_SCRAM_SHA256;
    else
        return false;
    return true;
}

static const EVP_MD *md_of(mfi_scram_mech m)
{
    return m == MFI_SCRAM_SHA1 ? EVP_sha1() : EVP_sha256();
}

static size_t hash_len(mfi_scram_mech m)
{
    return m == MFI_SCRAM_SHA1 ? 20 : 32;
}

static int crypto_failed(mf_error *err, const char *what)
{
    return mf_error_set(err, MF_InternalError, "SCRAM: %s failed", what);
}

/* ------------------------------------------------------------- base64 */

void mfi_base64_encode(const uint8_t *p, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

bool mfi_base64_decode(const char *s, size_t len, uint8_t *out, size_t *n)
{
    if (len % 4 != 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool pad = c == '=' && i >= len - 2 && (i == len - 1 || s[len - 1] == '=');
        if (!(pad || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return false;
    }
    int got = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
    if (got < 0)
        return false;
    size_t pad = len && s[len - 1] == '=' ? (len > 1 && s[len - 2] == '=' ? 2 : 1) : 0;
    *n = (size_t)got - pad;
    return true;
}

/* ---------------------------------------------------------- primitives */

static bool digest(mfi_scram_mech m, const void *p, size_t n, uint8_t *out)
{
    unsigned int len = 0;
    return EVP_Digest(p, n, out, &len, md_of(m), NULL) == 1;
}

static bool hmac(mfi_scram_mech m, const uint8_t *key, size_t klen, const void *p, size_t n,
                 uint8_t *out)
{
    unsigned int len = 0;
    return HMAC(md_of(m), key, (int)klen, p, n, out, &len) != NULL;
}

int mfi_saslprep(const char *in, char **out, mf_error *err)
{
    UErrorCode st = U_ZERO_ERROR;
    *out = NULL;
    /* ASCII without control characters is its own SASLprep */
    bool plain = true;
    for (const unsigned char *c = (const unsigned char *)in; *c && plain; c++)
        plain = *c >= 0x20 && *c < 0x7f;
    if (plain)
        return (*out = strdup(in)) ? 0 : mf_error_oom(err);
    int32_t n16 = 0;
    u_strFromUTF8(NULL, 0, &n16, in, -1, &st);
    if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st))
        return mf_error_set(err, 50693, "Failed normalizing string: %s", u_errorName(st));
    st = U_ZERO_ERROR;
    UChar *src = malloc(((size_t)n16 + 1) * sizeof *src);
    UChar *dst = NULL;
    UStringPrepProfile *prof = NULL;
    int rc = 0;
    if (!src) {
        rc = mf_error_oom(err);
        goto out;
    }
    u_strFromUTF8(src, n16 + 1, NULL, in, -1, &st);
    prof = usprep_openByType(USPREP_RFC4013_SASLPREP, &st);
    if (U_FAILURE(st)) {
        rc = mf_error_set(err, MF_InternalError, "Error preparing SASL string: %s",
                          u_errorName(st));
        goto out;
    }
    /* preflight: NFKC may make one code unit eighteen */
    UParseError pe;
    int32_t dn = usprep_prepare(prof, src, n16, NULL, 0, USPREP_DEFAULT, &pe, &st);
    if (st == U_BUFFER_OVERFLOW_ERROR)
        st = U_ZERO_ERROR;
    if (U_SUCCESS(st) && !(dst = malloc(((size_t)dn + 1) * sizeof *dst))) {
        rc = mf_error_oom(err);
        goto out;
    }
    if (U_SUCCESS(st))
        dn = usprep_prepare(prof, src, n16, dst, dn + 1, USPREP_DEFAULT, &pe, &st);
    if (U_FAILURE(st)) {
        rc = mf_error_set(err, 50693, "Failed normalizing string: %s", u_errorName(st));
        goto out;
    }
    int32_t n8 = 0;
    u_strToUTF8(NULL, 0, &n8, dst, dn, &st);
    st = U_ZERO_ERROR;
    if (!(*out = malloc((size_t)n8 + 1))) {
        rc = mf_error_oom(err);
        goto out;
    }
    u_strToUTF8(*out, n8 + 1, NULL, dst, dn, &st);
    if (U_FAILURE(st)) {
        free(*out);
        *out = NULL;
        rc = mf_error_set(err, 50693, "Failed normalizing string: %s", u_errorName(st));
    }
out:
    if (prof)
        usprep_close(prof);
    free(src);
    free(dst);
    return rc;
}

/* What PBKDF2 takes as the password (scram.h). */
static int password_input(mfi_scram_mech m, const char *user, const char *password,
                          bool digest_it, char **out, mf_error *err)
{
    if (m == MFI_SCRAM_SHA256)
        return mfi_saslprep(password, out, err);
    if (!digest_it) /* the caller's password is the digest already */
        return (*out = strdup(password)) ? 0 : mf_error_oom(err);
    /* createPasswordDigest: hex MD5 of "user:mongo:password" */
    size_t n = strlen(user) + strlen(password) + 8;
    char *s = malloc(n);
    if (!s)
        return mf_error_oom(err);
    snprintf(s, n, "%s:mongo:%s", user, password);
    uint8_t md[16];
    unsigned int len = 0;
    bool ok = EVP_Digest(s, strlen(s), md, &len, EVP_md5(), NULL) == 1;
    free(s);
    if (!ok)
        return crypto_failed(err, "MD5");
    if (!(*out = malloc(33)))
        return mf_error_oom(err);
    for (int i = 0; i < 16; i++)
        snprintf(*out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int mfi_scram_creds_make(mfi_scram_mech m, const char *user, const char *password, bool digest_it,
                         int iterations, mfi_scram_creds *out, mf_error *err)
{
    size_t hl = hash_len(m), sl = hl - 4;
    uint8_t salt[MAX_HASH], salted[MAX_HASH], client_key[MAX_HASH], stored[MAX_HASH],
        server[MAX_HASH];
    char *pw = NULL;
    int rc = password_input(m, user, password, digest_it, &pw, err);
    if (rc)
        return rc;
    if (RAND_bytes(salt, (int)sl) != 1)
        rc = crypto_failed(err, "RAND_bytes");
    else if (PKCS5_PBKDF2_HMAC(pw, (int)strlen(pw), salt, (int)sl, iterations, md_of(m),
                               (int)hl, salted) != 1)
        rc = crypto_failed(err, "PBKDF2");
    else if (!hmac(m, salted, hl, "Client Key", 10, client_key) || !digest(m, client_key, hl, stored) ||
             !hmac(m, salted, hl, "Server Key", 10, server))
        rc = crypto_failed(err, "HMAC");
    OPENSSL_cleanse(pw, strlen(pw));
    free(pw);
    OPENSSL_cleanse(salted, sizeof salted);
    OPENSSL_cleanse(client_key, sizeof client_key);
    if (rc)
        return rc;
    out->iterations = iterations;
    mfi_base64_encode(salt, sl, out->salt);
    mfi_base64_encode(stored, hl, out->stored_key);
    mfi_base64_encode(server, hl, out->server_key);
    return 0;
}

/* --------------------------------------------------------- the messages */

static int bad(mf_error *err, const char *what)
{
    return mf_error_set(err, MF_BadValue, "%s", what);
}

void mfi_scram_conv_clear(mfi_scram_conv *c)
{
    free(c->client_first_bare);
    free(c->server_first);
    OPENSSL_cleanse(c, sizeof *c);
    memset(c, 0, sizeof *c);
}

/* The pieces of [p, end) between commas, empty ones skipped (mongod's
 * StringSplitter with empty pieces dropped): up to `max` into v/vn. */
static size_t split(const char *p, const char *end, const char **v, size_t *vn, size_t max)
{
    size_t n = 0;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (stop > p && n < max) {
            v[n] = p;
            vn[n] = (size_t)(stop - p);
            n++;
        } else if (stop > p) {
            n++;
        }
        p = comma ? comma + 1 : end;
    }
    return n;
}

/* A SCRAM user name: every "=2C" replaced by ',', then every "=3D" by
 * '=' (mongod's decoding; nothing else is checked). */
static bool decode_user(const char *v, size_t n, char *out, size_t cap)
{
    char tmp[1024];
    size_t o = 0;
    if (n >= sizeof tmp)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (n - i >= 3 && v[i] == '=' && v[i + 1] == '2' && v[i + 2] == 'C') {
            tmp[o++] = ',';
            i += 2;
        } else {
            tmp[o++] = v[i];
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < o; i++) {
        if (m + 1 >= cap)
            return false;
        if (o - i >= 3 && tmp[i] == '=' && tmp[i + 1] == '3' && tmp[i + 2] == 'D') {
            out[m++] = '=';
            i += 2;
        } else {
            out[m++] = tmp[i];
        }
    }
    out[m] = '\0';
    return true;
}

int mfi_scram_client_first(mfi_scram_conv *c, mfi_scram_mech m, const uint8_t *payload, size_t n,
                           mf_error *err)
{
    const char *p = (const char *)payload, *end = p + n;
    mfi_scram_conv_clear(c);
    c->mech = m;
    if (memchr(p, '\0', n))
        return bad(err, "SCRAM message contains a NUL byte");
    /* the GS2 header: a channel-binding flag, an authzid, then the bare
     * message */
    const char *c1 = memchr(p, ',', n);
    if (!c1)
        return bad(err, "Incorrect number of arguments for first SCRAM client message, got 1 "
                        "expected at least 3");
    size_t fl = (size_t)(c1 - p);
    if (fl >= 2 && p[0] == 'p' && p[1] == '=')
        return bad(err, "Server does not support channel binding");
    if (fl != 1 || (p[0] != 'y' && p[0] != 'n'))
        return mf_error_set(err, MF_BadValue, "Incorrect SCRAM client message prefix: %.*s",
                            (int)(fl > 64 ? 64 : fl), p);
    const char *c2 = memchr(c1 + 1, ',', (size_t)(end - c1 - 1));
    if (!c2)
        return bad(err, "Incorrect number of arguments for first SCRAM client message, got 2 "
                        "expected at least 3");
    const char *az = c1 + 1;
    size_t azn = (size_t)(c2 - az);
    char authz[512] = "";
    if (azn > 0 && (azn < 2 || az[0] != 'a' || az[1] != '=' ||
                    !decode_user(az + 2, azn - 2, authz, sizeof authz)))
        return bad(err, "Incorrect SCRAM authzid");
    const char *bare = c2 + 1;
    if (end - bare >= 2 && bare[0] == 'm' && bare[1] == '=')
        return bad(err, "SCRAM mandatory extensions are not supported");
    const char *v[2];
    size_t vn[2];
    size_t k = split(bare, end, v, vn, 2);
    if (k < 2)
        return mf_error_set(err, MF_BadValue,
                            "Incorrect number of arguments for first SCRAM client message, got %zu "
                            "expected at least 3",
                            k + 2);
    if (vn[0] < 3 || v[0][0] != 'n' || v[0][1] != '=' ||
        !decode_user(v[0] + 2, vn[0] - 2, c->user, sizeof c->user))
        return bad(err, "Invalid SCRAM user name");
    if (authz[0] && strcmp(authz, c->user) != 0)
        return mf_error_set(err, MF_BadValue, "SCRAM user name %s does not match authzid %s",
                            c->user, authz);
    if (vn[1] < 6 || v[1][0] != 'r' || v[1][1] != '=')
        return bad(err, "Invalid SCRAM client nonce");
    size_t nl = vn[1] - 2;
    if (nl + 4 * ((SERVER_NONCE + 2) / 3) + 1 > sizeof c->nonce)
        return bad(err, "SCRAM client nonce too long");
    memcpy(c->nonce, v[1] + 2, nl);
    c->nonce[nl] = '\0';
    size_t bn = (size_t)(end - bare);
    if (!(c->client_first_bare = malloc(bn + 1)))
        return mf_error_oom(err);
    memcpy(c->client_first_bare, bare, bn);
    c->client_first_bare[bn] = '\0';
    return 0;
}

int mfi_scram_server_first(mfi_scram_conv *c, const mfi_scram_creds *creds, mf_buf *out,
                           mf_error *err)
{
    uint8_t r[SERVER_NONCE];
    char rb[4 * ((SERVER_NONCE + 2) / 3) + 1];
    if (RAND_bytes(r, sizeof r) != 1)
        return crypto_failed(err, "RAND_bytes");
    mfi_base64_encode(r, sizeof r, rb);
    strcat(c->nonce, rb); /* room checked with the client's nonce */
    c->creds = *creds;
    char msg[512];
    int len = snprintf(msg, sizeof msg, "r=%s,s=%s,i=%d", c->nonce, creds->salt,
                       creds->iterations);
    if (len < 0 || (size_t)len >= sizeof msg)
        return bad(err, "SCRAM server message too long");
    if (!(c->server_first = strdup(msg)))
        return mf_error_oom(err);
    out->len = 0;
    if (mf_buf_append(out, msg, (size_t)len) != 0)
        return mf_error_oom(err);
    c->step = 1;
    return 0;
}

int mfi_scram_client_final(mfi_scram_conv *c, const uint8_t *payload, size_t n, mf_buf *out,
                           mf_error *err)
{
    const char *p = (const char *)payload, *end = p + n;
    size_t hl = hash_len(c->mech);
    if (c->step != 1)
        return bad(err, "SCRAM conversation is not at its second step");
    if (memchr(p, '\0', n))
        return bad(err, "SCRAM message contains a NUL byte");
    /* the proof is the last attribute; the rest, without it, is signed */
    const char *last = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == ',')
            last = q;
    if (!last)
        return bad(err, "Incorrect number of arguments for second SCRAM client message, got 1 "
                        "expected at least 3");
    const char *proof = last + 1;
    size_t pn = (size_t)(end - proof);
    if (pn < 3 || proof[0] != 'p' || proof[1] != '=')
        return bad(err, "Incorrect SCRAM ClientProof");
    proof += 2;
    pn -= 2;
    const char *v[2];
    size_t vn[2];
    size_t k = split(p, last, v, vn, 2);
    if (k < 2)
        return mf_error_set(err, MF_BadValue,
                            "Incorrect number of arguments for second SCRAM client message, got "
                            "%zu expected at least 3",
                            k + 1);
    /* c=: the channel binding, not compared (mongod accepts any) */
    if (vn[0] < 3 || v[0][0] != 'c' || v[0][1] != '=')
        return bad(err, "Incorrect SCRAM channel binding");
    if (vn[1] < 6 || v[1][0] != 'r' || v[1][1] != '=')
        return bad(err, "Incorrect SCRAM client|server nonce");
    const char *nonce = v[1] + 2;
    size_t nn = vn[1] - 2;
    if (nn != strlen(c->nonce) || CRYPTO_memcmp(nonce, c->nonce, nn) != 0)
        return mf_error_set(err, MF_AuthenticationFailed,
                            "Unmatched SCRAM nonce received from client in second step");
    const char *without_proof_end = last;
    uint8_t given[MAX_HASH + 4], stored[MAX_HASH + 4], server[MAX_HASH + 4];
    size_t gn = 0, sn = 0, svn = 0;
    if (pn > 4 * ((MAX_HASH + 2) / 3) || !mfi_base64_decode(proof, pn, given, &gn) || gn != hl)
        return bad(err, "Incorrect SCRAM client proof");
    if (!mfi_base64_decode(c->creds.stored_key, strlen(c->creds.stored_key), stored, &sn) || sn != hl ||
        !mfi_base64_decode(c->creds.server_key, strlen(c->creds.server_key), server, &svn) || svn != hl)
        return mf_error_set(err, MF_InternalError, "SCRAM: stored credentials are damaged");
    /* AuthMessage = client-first-bare "," server-first "," client-final
     * without its proof */
    size_t fl = (size_t)(without_proof_end - (const char *)payload);
    mf_buf msg = {0};
    int rc = 0;
    if (mf_buf_append(&msg, c->client_first_bare, strlen(c->client_first_bare)) != 0 ||
        mf_buf_append(&msg, ",", 1) != 0 ||
        mf_buf_append(&msg, c->server_first, strlen(c->server_first)) != 0 ||
        mf_buf_append(&msg, ",", 1) != 0 || mf_buf_append(&msg, payload, fl) != 0) {
        mf_buf_free(&msg);
        return mf_error_oom(err);
    }
    uint8_t sig[MAX_HASH], key[MAX_HASH], h[MAX_HASH], ssig[MAX_HASH];
    if (!hmac(c->mech, stored, hl, msg.data, msg.len, sig))
        rc = crypto_failed(err, "HMAC");
    for (size_t i = 0; rc == 0 && i < hl; i++)
        key[i] = given[i] ^ sig[i];
    if (rc == 0 && !digest(c->mech, key, hl, h))
        rc = crypto_failed(err, "digest");
    if (rc == 0 && CRYPTO_memcmp(h, stored, hl) != 0)
        rc = mf_error_set(err, MF_AuthenticationFailed,
                          "SCRAM authentication failed, storedKey mismatch");
    if (rc == 0 && !hmac(c->mech, server, hl, msg.data, msg.len, ssig))
        rc = crypto_failed(err, "HMAC");
    mf_buf_free(&msg);
    OPENSSL_cleanse(key, sizeof key);
    if (rc)
        return rc;
    char sb[4 * ((MAX_HASH + 2) / 3) + 1];
    mfi_base64_encode(ssig, hl, sb);
    out->len = 0;
    if (mf_buf_append(out, "v=", 2) != 0 || mf_buf_append(out, sb, strlen(sb)) != 0)
        return mf_error_oom(err);
    c->step = 2;
    return 0;
}
