/*
 * error.c -- the one table of MongoDB error codes and their codeNames, and
 * the heap-free error record every layer fills.
 */
#include "util.h"

#include <stdio.h>
#include <string.h>

/* Code -> codeName, as src/mongo/base/error_codes.yml spells them.  Kept
 * sorted by code; lookups are a binary search. */
static const struct {
    int code;
    const char *name;
} codes[] = {
    {0, "OK"},
    {1, "InternalError"},
    {2, "BadValue"},
    {4, "NoSuchKey"},
    {5, "GraphContainsCycle"},
    {6, "HostUnreachable"},
    {7, "HostNotFound"},
    {8, "UnknownError"},
    {9, "FailedToParse"},
    {10, "CannotMutateObject"},
    {11, "UserNotFound"},
    {12, "UnsupportedFormat"},
    {13, "Unauthorized"},
    {14, "TypeMismatch"},
    {15, "Overflow"},
    {16, "InvalidLength"},
    {17, "ProtocolError"},
    {18, "AuthenticationFailed"},
    {20, "IllegalOperation"},
    {22, "InvalidBSON"},
    {23, "AlreadyInitialized"},
    {24, "LockTimeout"},
    {26, "NamespaceNotFound"},
    {27, "IndexNotFound"},
    {28, "PathNotViable"},
    {29, "NonExistentPath"},
    {30, "InvalidPath"},
    {31, "RoleNotFound"},
    {32, "RolesNotRelated"},
    {33, "PrivilegeNotFound"},
    {34, "CannotBackfillArray"},
    {40, "ConflictingUpdateOperators"},
    {43, "CursorNotFound"},
    {46, "LockBusy"},
    {47, "NoMatchingDocument"},
    {48, "NamespaceExists"},
    {50, "MaxTimeMSExpired"},
    {52, "DollarPrefixedFieldName"},
    {53, "InvalidIdField"},
    {54, "NotSingleValueField"},
    {55, "InvalidDBRef"},
    {56, "EmptyFieldName"},
    {57, "DottedFieldName"},
    {59, "CommandNotFound"},
    {61, "ShardKeyNotFound"},
    {64, "WriteConcernFailed"},
    {66, "ImmutableField"},
    {67, "CannotCreateIndex"},
    {68, "IndexAlreadyExists"},
    {72, "InvalidOptions"},
    {73, "InvalidNamespace"},
    {76, "NoReplicationEnabled"},
    {79, "UnknownReplWriteConcern"},
    {85, "IndexOptionsConflict"},
    {86, "IndexKeySpecsConflict"},
    {89, "NetworkTimeout"},
    {91, "ShutdownInProgress"},
    {93, "InvalidReplicaSetConfig"},
    {96, "OperationFailed"},
    {98, "DBPathInUse"},
    {100, "UnsatisfiableWriteConcern"},
    {112, "WriteConflict"},
    {115, "CommandNotSupported"},
    {117, "ConflictingOperationInProgress"},
    {121, "DocumentValidationFailure"},
    {123, "NotAReplicaSet"},
    {125, "CommandFailed"},
    {136, "CappedPositionLost"},
    {140, "InvalidSSLConfiguration"},
    {141, "SSLHandshakeFailed"},
    {146, "ExceededMemoryLimit"},
    {148, "ReadConcernMajorityNotEnabled"},
    {159, "DurationOverflow"},
    {160, "MaxStalenessOutOfRange"},
    {161, "IncompatibleCollationVersion"},
    {165, "ViewDepthLimitExceeded"},
    {166, "CommandNotSupportedOnView"},
    {167, "OptionNotSupportedOnView"},
    {168, "InvalidPipelineOperator"},
    {169, "CommandOnShardedViewNotSupportedOnMongod"},
    {170, "TooManyMatchingDocuments"},
    {171, "CannotIndexParallelArrays"},
    {175, "QueryPlanKilled"},
    {181, "AmbiguousIndexKeyPattern"},
    {186, "ClientMetadataCannotBeMutated"},
    {189, "PrimarySteppedDown"},
    {197, "InvalidIndexSpecificationOption"},
    {201, "CannotBuildIndexKeys"},
    {206, "NoSuchSession"},
    {207, "InvalidUUID"},
    {213, "DuplicateSession"},
    {217, "IncompleteTransactionHistory"},
    {223, "IllegalOpMsgFlag"},
    {224, "QueryFeatureNotAllowed"},
    {225, "TransactionTooOld"},
    {228, "SessionTransferIncomplete"},
    {232, "MaxSubPipelineDepthExceeded"},
    {233, "TooManyDocumentSequences"},
    {236, "ForTestingErrorExtraInfo"},
    {238, "NotImplemented"},
    {239, "SnapshotTooOld"},
    {241, "ConversionFailure"},
    {246, "SnapshotUnavailable"},
    {251, "NoSuchTransaction"},
    {256, "TransactionCommitted"},
    {257, "TransactionTooLarge"},
    {260, "InvalidResumeToken"},
    {261, "TooManyLogicalSessions"},
    {262, "ExceededTimeLimit"},
    {263, "OperationNotSupportedInTransaction"},
    {266, "FailPointSetFailed"},
    {276, "IndexBuildAborted"},
    {279, "ClientDisconnect"},
    {280, "ChangeStreamFatalError"},
    {285, "IndexBuildAlreadyInProgress"},
    {286, "ChangeStreamHistoryLost"},
    {288, "ChecksumMismatch"},
    {291, "NoQueryExecutionPlans"},
    {292, "QueryExceededMemoryLimitNoDiskUseAllowed"},
    {301, "DataCorruptionDetected"},
    {314, "ObjectIsBusy"},
    {322, "APIVersionError"},
    {323, "APIStrictError"},
    {324, "APIDeprecationError"},
    {334, "MechanismUnavailable"},
    {352, "UnsupportedOpQueryCommand"},
    {357, "InvalidBSONType"},
    {359, "CannotConvertIndexToUnique"},
    {372, "CloseConnectionForShutdownCommand"},
    {378, "NonConformantBSON"},
    {9001, "SocketException"},
    {10107, "NotWritablePrimary"},
    {10334, "BSONObjectTooLarge"},
    {11000, "DuplicateKey"},
    {11600, "InterruptedAtShutdown"},
    {11601, "Interrupted"},
    {11602, "InterruptedDueToReplStateChange"},
    {13113, "MergeStageNoMatchingDocument"},
    {13297, "DatabaseDifferCase"},
    {13435, "NotPrimaryNoSecondaryOk"},
    {13436, "NotPrimaryOrSecondary"},
    {14031, "OutOfDiskSpace"},
    {17280, "KeyTooLong"},
};

/* For the C tests: the table must stay sorted for the binary search. */
bool mfi_error_table_is_sorted(void);
bool mfi_error_table_is_sorted(void)
{
    for (size_t i = 1; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i - 1].code >= codes[i].code)
            return false;
    return true;
}

const char *mf_error_name(int code, char *scratch)
{
    size_t lo = 0, hi = sizeof codes / sizeof codes[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (codes[mid].code == code)
            return codes[mid].name;
        if (codes[mid].code < code)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* mongod names an unlisted assertion id "Location<id>". */
    snprintf(scratch, 24, "Location%d", code);
    return scratch;
}

/* Drop a UTF-8 sequence that truncation cut in two from the end of `s`:
 * the message goes into a reply as a BSON string, which must be UTF-8. */
static void trim_cut_sequence(char *s)
{
    size_t n = strlen(s), lead = n;
    while (lead > 0 && n - lead < 4 && ((unsigned char)s[lead - 1] & 0xc0) == 0x80)
        lead--;
    if (lead == 0)
        return;
    unsigned char c = (unsigned char)s[lead - 1];
    size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (n - (lead - 1) < want)
        s[lead - 1] = '\0';
}

int mf_error_setv(mf_error *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        if (n >= (int)sizeof err->msg)
            trim_cut_sequence(err->msg);
    }
    return code;
}

int mf_error_set(mf_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mf_error_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int mf_error_oom(mf_error *err)
{
    return mf_error_set(err, MF_InternalError, "out of memory");
}

void mf_error_clear(mf_error *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}
