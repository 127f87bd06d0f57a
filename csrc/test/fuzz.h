/*
 * fuzz.h -- the fuzz targets' entry points (fuzz_targets.c).
 *
 * Each takes one input as libFuzzer hands it over and returns 0; a bug is
 * a crash, a sanitizer report or a failed MF_FUZZ_ASSERT (abort).  The same
 * functions run in two builds:
 *
 *   - libFuzzer: tests/test_rel_fuzz.py compiles fuzz_targets.c with
 *     -DMF_FUZZ_TARGET=<function> and -fsanitize=fuzzer,address,undefined,
 *     which adds LLVMFuzzerTestOneInput calling that one function;
 *   - the C test binary (ASan/UBSan, no libFuzzer): the case /fuzz/
 *     regressions (test_fuzz.c) feeds every committed regression input,
 *     tests/fuzz_regressions/<target>/<file>, to the function of <target>.
 *
 * Input formats (the first byte of wire and wal inputs is a mode byte that
 * lets the fuzzer past framing it would almost never guess):
 *
 *   bson  a BSON document as a client sends it: validated with
 *         mf_bsonx_validate_prefix; one that passes must then be safe to
 *         walk with libbson, render, compare and key-encode.
 *   wire  mode, then bytes as they arrive on a connection: messages are
 *         read as the connection loop reads them and parsed (OP_MSG,
 *         OP_QUERY); mode bit 0 sets the first header's length to the
 *         input's, bit 1 fixes an OP_MSG's CRC-32C when it has one.  A
 *         parsed OP_MSG's command document must be valid BSON, and a reply
 *         built around it must parse back.
 *   wal   mode, then the bytes of a log segment after its 32-byte header
 *         (the harness writes the header: salt MF_FUZZ_WAL_SALT, first LSN
 *         1), opened with mf_wal_open.  Mode bit 0 recomputes each block's
 *         header and payload hashes as it walks the blocks (else nearly
 *         every mutation dies at a hash), bit 1 opens with after_lsn 1,
 *         bit 2 appends a record after a successful open, reopens, and
 *         checks that the log replays the same records plus the new one.
 *         Open must succeed or fail with DataCorruptionDetected; replayed
 *         LSNs must be consecutive.
 *   scram mode (bit 0: SCRAM-SHA-1, else SCRAM-SHA-256), then a client-first
 *         message, a NUL, and a client-final message: SASLprep of the first,
 *         then the server's conversation with a fixed user's credentials.
 *         A client-first that parses must give a server-first "r=..."; no
 *         client-final can succeed (the server's nonce is random).
 */
#ifndef MF_TEST_FUZZ_H
#define MF_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#define MF_FUZZ_WAL_SALT 0x5eed5eed5eed5eedull

int mf_fuzz_bson(const uint8_t *data, size_t len);
int mf_fuzz_wire(const uint8_t *data, size_t len);
int mf_fuzz_wal(const uint8_t *data, size_t len);
int mf_fuzz_scram(const uint8_t *data, size_t len);

/* What the last call reached, for the C cases that check the targets do
 * what they are meant to: OP_MSGs parsed into a command, and records the
 * wal target's (first) open replayed. */
extern uint64_t mf_fuzz_wire_parsed;
extern uint64_t mf_fuzz_wal_replayed;

/* Quiet the log (torn tails are warnings).  Called before the first input. */
void mf_fuzz_init(void);
/* Remove the wal target's scratch directory ($MF_FUZZ_TMP, else /dev/shm,
 * else $TMPDIR: made on its first input); the libFuzzer binaries do it at
 * exit. */
void mf_fuzz_cleanup(void);

#endif /* MF_TEST_FUZZ_H */
