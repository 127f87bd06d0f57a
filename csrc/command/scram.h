/*
 * scram.h -- the server side of SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802,
 * RFC 7677) as mongod speaks them over saslStart/saslContinue, and the
 * credentials mongod stores for them (admin.system.users).
 *
 * Credentials.  For a password P and a salt S (random, the hash's length
 * less 4 bytes: 16 for SHA-1, 28 for SHA-256), i iterations:
 *
 *   SaltedPassword = PBKDF2-HMAC-H(P', S, i)
 *   StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
 *   ServerKey      = HMAC(SaltedPassword, "Server Key")
 *
 * where P' is, for SHA-1, the hex MD5 of "user:mongo:P" (mongod's
 * createPasswordDigest) and, for SHA-256, P after SASLprep (RFC 4013, ICU's
 * profile).  Only S, i, StoredKey and ServerKey are kept, base64.
 *
 * A conversation, one per connection at a time:
 *
 *   client-first   n,,n=<user>,r=<client nonce>
 *   server-first   r=<client nonce><server nonce>,s=<salt>,i=<iterations>
 *   client-final   c=biws,r=<nonce>,p=<proof>
 *   server-final   v=<server signature>
 *
 * The proof is checked in constant time: ClientKey = proof XOR
 * HMAC(StoredKey, AuthMessage), then H(ClientKey) against StoredKey.
 * Every refusal of a user's credentials is the same AuthenticationFailed
 * to the client (the reason goes to the log), as mongod answers.
 *
 * The crypto is OpenSSL's libcrypto (EVP digests, HMAC, PBKDF2,
 * RAND_bytes, CRYPTO_memcmp, base64).
 */
#ifndef MF_COMMAND_SCRAM_H
#define MF_COMMAND_SCRAM_H

#include "../util/util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum mfi_scram_mech { MFI_SCRAM_SHA1, MFI_SCRAM_SHA256 } mfi_scram_mech;

/* mongod's names, "SCRAM-SHA-1" and "SCRAM-SHA-256". */
const char *mfi_scram_mech_name(mfi_scram_mech m);
/* The mechanism named `name`; false when it is neither. */
bool mfi_scram_mech_of(const char *name, mfi_scram_mech *out);

/* One mechanism's stored credentials, base64 strings. */
typedef struct mfi_scram_creds {
    int iterations;
    char salt[48];
    char stored_key[48];
    char server_key[48];
} mfi_scram_creds;

/* mongod's scramIterationCount and scramSHA256IterationCount defaults. */
#define MFI_SCRAM_SHA1_ITERATIONS 10000
#define MFI_SCRAM_SHA256_ITERATIONS 15000

/* The credentials of `user` with `password` for `m`, a fresh salt, into
 * `out`; for SCRAM-SHA-1 without `digest` (createUser's digestPassword:
 * false) `password` is the hex digest itself.  50693 "Failed normalizing string: <ICU error>" when SASLprep
 * refuses the password (SHA-256: a prohibited or unassigned code point);
 * InternalError when the crypto fails. */
int mfi_scram_creds_make(mfi_scram_mech m, const char *user, const char *password, bool digest,
                         int iterations, mfi_scram_creds *out, mf_error *err);

/* SASLprep (RFC 4013) of the UTF-8 string `in`, stored-string rules (no
 * unassigned code points), into a malloc'd string `*out`.  50693 when
 * refused (mongod's icuSaslPrep). */
int mfi_saslprep(const char *in, char **out, mf_error *err);

/* The base64 string `s` (`len` characters) decoded into `out` (room for
 * 3 * len / 4 bytes), its length into `*n`; false when it is not base64
 * (padded, RFC 4648's alphabet). */
bool mfi_base64_decode(const char *s, size_t len, uint8_t *out, size_t *n);

/* `n` bytes as padded base64 into `out` (room for 4 * ceil(n / 3) + 1). */
void mfi_base64_encode(const uint8_t *p, size_t n, char *out);

/* A conversation's state. */
typedef struct mfi_scram_conv {
    mfi_scram_mech mech;
    int step;                /* 0: nothing yet; 1: server-first sent;
                                2: server-final sent; 3: done */
    char user[512];          /* the client-first's user, unescaped */
    char *client_first_bare; /* n=...,r=... */
    char *server_first;
    char nonce[128];         /* client nonce + server nonce */
    mfi_scram_creds creds;
} mfi_scram_conv;

/* Read the client-first message `p` (`n` bytes) into `c` (mechanism `m`):
 * its user and nonce.  BadValue with mongod's reason when it is not one
 * (a channel binding asked for, an authzid other than the user, a bad
 * escape, a missing nonce). */
int mfi_scram_client_first(mfi_scram_conv *c, mfi_scram_mech m, const uint8_t *p, size_t n,
                           mf_error *err);

/* The server-first message for the user's `creds`, into `out`. */
int mfi_scram_server_first(mfi_scram_conv *c, const mfi_scram_creds *creds, mf_buf *out,
                           mf_error *err);

/* Check the client-final message `p` and write the server-final one into
 * `out`.  BadValue for a malformed message; AuthenticationFailed (18) for
 * a wrong nonce or proof, with the reason for the log in the message. */
int mfi_scram_client_final(mfi_scram_conv *c, const uint8_t *p, size_t n, mf_buf *out,
                           mf_error *err);

void mfi_scram_conv_clear(mfi_scram_conv *c);

#endif /* MF_COMMAND_SCRAM_H */
