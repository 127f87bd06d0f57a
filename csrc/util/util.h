/*
 * util.h -- the bottom layer: errors, byte buffers, logging, clocks, CRC-32C.
 *
 * Nothing here knows about BSON, storage or the wire.  Every other layer may
 * include this header; this header includes only the C library.
 *
 * Errors.  A fallible function returns `int rc`: 0 is success, anything else
 * is a MongoDB error code (2 BadValue, 59 CommandNotFound, ...).  The detail
 * travels in an `mf_error`, a fixed-size struct that never allocates, filled
 * by mf_error_set(), which returns the code so that
 *
 *     return mf_error_set(err, MF_BadValue, "bad %s", what);
 *
 * reads as one statement.  The table in error.c maps a code to its codeName.
 */
#ifndef MF_UTIL_H
#define MF_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MF_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define MF_UNUSED __attribute__((unused))
/* For a small function on a per-document path that the compiler would
 * leave as a call (it has several callers). */
#define MF_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define MF_PRINTF(f, a)
#define MF_UNUSED
#define MF_ALWAYS_INLINE inline
#endif

/* ------------------------------------------------------------------ errors */

/* MongoDB error codes used by this server.  Names follow error_codes.yml. */
enum {
    MF_OK = 0,
    MF_InternalError = 1,
    MF_BadValue = 2,
    MF_GraphContainsCycle = 5,
    MF_NoSuchKey = 4,
    MF_HostUnreachable = 6,
    MF_HostNotFound = 7,
    MF_FailedToParse = 9,
    MF_UnsupportedFormat = 12,
    MF_UserNotFound = 11,
    MF_Unauthorized = 13,
    MF_TypeMismatch = 14,
    MF_Overflow = 15,
    MF_InvalidLength = 16,
    MF_ProtocolError = 17,
    MF_AuthenticationFailed = 18,
    MF_IllegalOperation = 20,
    MF_RoleNotFound = 31,
    MF_InvalidBSON = 22,
    MF_AlreadyInitialized = 23,
    MF_LockTimeout = 24,
    MF_NamespaceNotFound = 26,
    MF_IndexNotFound = 27,
    MF_CursorNotFound = 43,
    MF_LockBusy = 46,
    MF_NoMatchingDocument = 47,
    MF_NamespaceExists = 48,
    MF_MaxTimeMSExpired = 50,
    MF_DollarPrefixedFieldName = 52,
    MF_InvalidIdField = 53,
    MF_CommandNotFound = 59,
    MF_ImmutableField = 66,
    MF_CannotCreateIndex = 67,
    MF_IndexAlreadyExists = 68,
    MF_InvalidOptions = 72,
    MF_InvalidNamespace = 73,
    MF_NoReplicationEnabled = 76,
    MF_UnknownReplWriteConcern = 79,
    MF_IndexOptionsConflict = 85,
    MF_IndexKeySpecsConflict = 86,
    MF_NetworkTimeout = 89,
    MF_ShutdownInProgress = 91,
    MF_InvalidReplicaSetConfig = 93,
    MF_WriteConflict = 112,
    MF_OperationFailed = 96,
    MF_DBPathInUse = 98,
    MF_UnsatisfiableWriteConcern = 100,
    MF_CommandNotSupported = 115,
    MF_ConflictingOperationInProgress = 117,
    MF_NotAReplicaSet = 123,
    MF_CommandFailed = 125,
    MF_CappedPositionLost = 136,
    MF_InvalidSSLConfiguration = 140,
    MF_SSLHandshakeFailed = 141,
    MF_DocumentValidationFailure = 121,
    MF_IncompatibleCollationVersion = 161,
    MF_ViewDepthLimitExceeded = 165,
    MF_CommandNotSupportedOnView = 166,
    MF_OptionNotSupportedOnView = 167,
    MF_InvalidPipelineOperator = 168,
    MF_CannotIndexParallelArrays = 171,
    MF_QueryPlanKilled = 175,
    MF_AmbiguousIndexKeyPattern = 181,
    MF_ClientMetadataCannotBeMutated = 186,
    MF_PrimarySteppedDown = 189,
    MF_InvalidIndexSpecificationOption = 197,
    MF_CannotBuildIndexKeys = 201,
    MF_InvalidUUID = 207,
    MF_IncompleteTransactionHistory = 217,
    MF_IllegalOpMsgFlag = 223,
    MF_QueryFeatureNotAllowed = 224,
    MF_TransactionTooOld = 225,
    MF_MaxSubPipelineDepthExceeded = 232,
    MF_SnapshotTooOld = 239,
    MF_TooManyDocumentSequences = 233,
    MF_NotImplemented = 238,
    MF_ConversionFailure = 241,
    MF_SnapshotUnavailable = 246,
    MF_InvalidResumeToken = 260,
    MF_NoSuchTransaction = 251,
    MF_TransactionCommitted = 256,
    MF_TransactionTooLarge = 257,
    MF_TooManyLogicalSessions = 261,
    MF_ExceededTimeLimit = 262,
    MF_OperationNotSupportedInTransaction = 263,
    MF_FailPointSetFailed = 266,
    MF_ClientDisconnect = 279,
    MF_ChangeStreamFatalError = 280,
    MF_ChangeStreamHistoryLost = 286,
    MF_ChecksumMismatch = 288,
    MF_NoQueryExecutionPlans = 291,
    MF_QueryExceededMemoryLimitNoDiskUseAllowed = 292,
    MF_DataCorruption = 301, /* DataCorruptionDetected */
    MF_APIVersionError = 322,
    MF_MechanismUnavailable = 334,
    MF_APIStrictError = 323,
    MF_APIDeprecationError = 324,
    MF_UnsupportedOpQueryCommand = 352,
    MF_CannotConvertIndexToUnique = 359,
    MF_SocketException = 9001,
    MF_NotWritablePrimary = 10107,
    MF_BSONObjectTooLarge = 10334,
    MF_DuplicateKey = 11000,
    MF_InterruptedAtShutdown = 11600,
    MF_InterruptedDueToReplStateChange = 11602,
    MF_MergeStageNoMatchingDocument = 13113,
    MF_NotPrimaryNoSecondaryOk = 13435,
    MF_NotPrimaryOrSecondary = 13436,
    MF_OutOfDiskSpace = 14031,
    MF_KeyTooLong = 17280, /* obsolete in mongod since 4.2 */
    MF_Location40430 = 40430,
    MF_Location40431 = 40431,
    MF_Location40432 = 40432,
    MF_Location40433 = 40433,
    MF_Location40571 = 40571,
    MF_Location40587 = 40587,
};

#define MF_ERRMSG_MAX 512

typedef struct mf_error {
    int code;
    char msg[MF_ERRMSG_MAX];
} mf_error;

/* Record `code` and a printf-formatted message in `err` (which may be NULL);
 * returns `code`.  A message longer than MF_ERRMSG_MAX-1 bytes is cut. */
int mf_error_set(mf_error *err, int code, const char *fmt, ...) MF_PRINTF(3, 4);
int mf_error_setv(mf_error *err, int code, const char *fmt, va_list ap);
/* An allocation failed: InternalError "out of memory".  Returns the code. */
int mf_error_oom(mf_error *err);
void mf_error_clear(mf_error *err);

/* The codeName for `code` ("BadValue"), or "Location<code>" for a code with
 * no name, as mongod spells it.  The result is static or lives in `scratch`
 * (at least 24 bytes), valid as long as `scratch` is. */
const char *mf_error_name(int code, char *scratch);

/* ------------------------------------------------------------------ buffers */

/* A growable byte buffer.  Zero-initialise (`mf_buf b = {0};`) to start. */
typedef struct mf_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} mf_buf;

/* Make room for `extra` more bytes.  Returns 0 or -1 on out of memory, in
 * which case the buffer is unchanged. */
int mf_buf_reserve(mf_buf *b, size_t extra);
int mf_buf_append(mf_buf *b, const void *p, size_t n);

/* `v` in decimal, as an array index key ("0", "1", ... "4294967295"): the
 * digits go at the end of `buf` (`size` >= 11 bytes) and `*out` points at
 * them; returns their length.  bson_uint32_to_string's contract, without
 * its snprintf past 999, which cost a tenth of a 10,000-document reply. */
size_t mf_uint32_to_key(uint32_t v, const char **out, char *buf, size_t size);
int mf_buf_put_i32le(mf_buf *b, int32_t v);
void mf_buf_free(mf_buf *b);

static inline int32_t mf_load_i32le(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
                     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static inline uint32_t mf_load_u32le(const uint8_t *p)
{
    return (uint32_t)mf_load_i32le(p);
}

static inline void mf_store_i32le(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    p[2] = (uint8_t)(u >> 16);
    p[3] = (uint8_t)(u >> 24);
}

/* ------------------------------------------------------------------ logging */

/* Severity, as mongod's structured log has it. */
typedef enum {
    MF_LOG_ERROR = 0, /* "E" */
    MF_LOG_WARNING,   /* "W" */
    MF_LOG_INFO,      /* "I" */
    MF_LOG_DEBUG,     /* "D1" */
} mf_log_level;

/* Set the level above which lines are dropped (default MF_LOG_INFO) and
 * whether lines also go to stderr (default: yes). */
void mf_log_configure(mf_log_level level, bool to_stderr);
/* Parse "error", "warning", "info", "debug".  Returns -1 when unknown. */
int mf_log_level_parse(const char *name);

/* Write one line in mongod's JSON log shape:
 *   {"t":{"$date":...},"s":"I","c":component,"id":id,"ctx":ctx,"msg":msg}
 * `msg` is formatted; it is escaped as a JSON string.  Thread-safe.  Lines
 * at or above the configured level go to stderr; every line at info or
 * above (or the configured level, if lower) is also kept in a ring of the
 * last MF_LOG_RING lines that getLog returns. */
void mf_log(mf_log_level level, const char *component, int id, const char *ctx,
            const char *fmt, ...) MF_PRINTF(5, 6);

/* The same with mongod's "attr": `attr_json` is a JSON object, written
 * whole as the line's last field; `msg` is taken as it is. */
void mf_log_attr(mf_log_level level, const char *component, int id, const char *ctx,
                 const char *msg, const char *attr_json);

#define MF_LOG_RING 1024

/* Call `fn(line, arg)` for each line in the ring, oldest first, under the
 * ring's lock (so `fn` must not log).  Returns the total number of lines
 * ever written. */
uint64_t mf_log_ring_each(void (*fn)(const char *line, void *arg), void *arg);

/* Startup warnings: lines logged with MF_LOG_WARNING before the first
 * connection.  Kept separately, as mongod keeps "startupWarnings". */
void mf_log_startup_warning(const char *fmt, ...) MF_PRINTF(1, 2);
uint64_t mf_log_startup_each(void (*fn)(const char *line, void *arg), void *arg);

/* ------------------------------------------------------------------ clocks */

/* Wall-clock milliseconds since the Unix epoch. */
int64_t mf_clock_wall_ms(void);
/* Monotonic microseconds from an arbitrary origin. */
int64_t mf_clock_mono_us(void);

/* maxTimeMS of one operation: its deadline on the monotonic clock
 * (microseconds; 0: none) and a count of the checks made against it.
 * Everything the operation runs -- scans, the stages of a pipeline and of
 * its sub-pipelines, the records a write command writes -- counts into the
 * one struct, so that work spread over many short scans (a $lookup's, a
 * bulk write's) reads the clock as often as one long scan does. */
typedef struct mf_deadline {
    int64_t at_us;
    uint32_t tick;
} mf_deadline;

/* Count one unit of work against `d` (may be NULL); every 128th reads the
 * clock.  False once the deadline has passed: the caller fails with
 * MaxTimeMSExpired (50) "operation exceeded time limit". */
static inline bool mf_deadline_ok(mf_deadline *d)
{
    return !d || !d->at_us || (++d->tick & 127) != 0 || mf_clock_mono_us() <= d->at_us;
}

/* Whether `d`'s deadline has passed, by the clock now (no tick): for a
 * wait that polls between sleeps. */
static inline bool mf_deadline_passed(const mf_deadline *d)
{
    return d && d->at_us && mf_clock_mono_us() > d->at_us;
}

/* mf_deadline_ok as an error: MaxTimeMSExpired (50) "operation exceeded
 * time limit" once the deadline has passed, else 0.  Inline: scans call
 * it once per work. */
int mf_deadline_expired(mf_error *err);
static inline int mf_deadline_check(mf_deadline *d, mf_error *err)
{
    return mf_deadline_ok(d) ? 0 : mf_deadline_expired(err);
}

struct timespec;
/* `*ts` = now on `clock` (CLOCK_REALTIME, CLOCK_MONOTONIC) plus `ms`: an
 * absolute deadline for pthread_cond_timedwait. */
void mf_clock_deadline(int clock, int64_t ms, struct timespec *ts);

/* ------------------------------------------------------------------ CRC-32C */

/* CRC-32C (Castagnoli), as OP_MSG's checksum uses it: initial value ~0,
 * final xor ~0.  `crc` is the running value: pass 0 to start, and the
 * previous result to continue.  Uses the SSE4.2 instruction when the CPU
 * has it, a table otherwise. */
uint32_t mf_crc32c(uint32_t crc, const void *data, size_t len);

#endif /* MF_UTIL_H */
