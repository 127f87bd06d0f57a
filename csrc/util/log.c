/*
 * log.c -- mongod-shaped structured log lines, to stderr and to a ring.
 *
 * Each line is one JSON document, as mongod 4.4+ writes them:
 *   {"t":{"$date":"2026-11-29T22:27:51.123+00:00"},"s":"I","c":"NETWORK",
 *    "id":22943,"ctx":"listener","msg":"Connection accepted"}
 * The last MF_LOG_RING lines are kept for the getLog command ("global"), and
 * warnings logged before the server accepts connections for
 * "startupWarnings".  One mutex guards both rings and the write to stderr,
 * so lines never interleave.
 */
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINE_MAX_BYTES 2048
#define STARTUP_RING 64

typedef struct ring {
    char *lines[MF_LOG_RING];
    size_t cap;
    uint64_t total; /* lines ever written; slot = total % cap */
} ring;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static mf_log_level log_level = MF_LOG_INFO;
static bool log_to_stderr = true;
static ring global_ring = {.cap = MF_LOG_RING};
static ring startup_ring = {.cap = STARTUP_RING};

void mf_log_configure(mf_log_level level, bool to_stderr)
{
    pthread_mutex_lock(&log_mu);
    log_level = level;
    log_to_stderr = to_stderr;
    pthread_mutex_unlock(&log_mu);
}

int mf_log_level_parse(const char *name)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* Append `s` to `out` (capacity `cap`, used `*n`) as JSON string content. */
static void json_escape(char *out, size_t cap, size_t *n, const char *s)
{
    for (; *s && *n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[(*n)++] = '\\';
            out[(*n)++] = (char)c;
        } else if (c < 0x20) {
            *n += (size_t)snprintf(out + *n, cap - *n, "\\u%04x", c);
        } else {
            out[(*n)++] = (char)c;
        }
    }
    out[*n] = '\0';
}

static void ring_push(ring *r, const char *line)
{
    size_t slot = (size_t)(r->total % r->cap);
    char *copy = strdup(line);
    if (!copy)
        return; /* losing a log line beats failing the caller */
    free(r->lines[slot]);
    r->lines[slot] = copy;
    r->total++;
}

static uint64_t ring_each(ring *r, void (*fn)(const char *, void *), void *arg)
{
    pthread_mutex_lock(&log_mu);
    uint64_t first = r->total > r->cap ? r->total - r->cap : 0;
    for (uint64_t i = first; i < r->total; i++)
        fn(r->lines[i % r->cap], arg);
    uint64_t total = r->total;
    pthread_mutex_unlock(&log_mu);
    return total;
}

static void format_line(char *line, size_t cap, mf_log_level level,
                        const char *component, int id, const char *ctx,
                        const char *msg)
{
    static const char *sev[] = {"E", "W", "I", "D1"};
    int64_t ms = mf_clock_wall_ms();
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = (size_t)snprintf(
        line, cap,
        "{\"t\":{\"$date\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03d+00:00\"},"
        "\"s\":\"%s\",\"c\":\"%-8s\",\"id\":%d,\"ctx\":\"",
        tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
        tm.tm_sec, (int)(ms % 1000), sev[level], component, id);
    if (n >= cap)
        n = cap - 1;
    json_escape(line, cap, &n, ctx);
    n += (size_t)snprintf(line + n, cap - n, "\",\"msg\":\"");
    if (n >= cap)
        n = cap - 1;
    json_escape(line, cap, &n, msg);
    snprintf(line + n, cap - n, "\"}");
}

static void log_emit(mf_log_level level, const char *component, int id,
                     const char *ctx, const char *fmt, va_list ap,
                     bool is_startup)
{
    char msg[LINE_MAX_BYTES / 2];
    char line[LINE_MAX_BYTES];

    /* The ring keeps informational lines whatever stderr's level, as
     * mongod's RamLog does: a quiet embedded server still answers getLog. */
    pthread_mutex_lock(&log_mu);
    bool wanted = level <= log_level;
    pthread_mutex_unlock(&log_mu);
    if (!wanted && level > MF_LOG_INFO && !is_startup)
        return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    format_line(line, sizeof line, level, component, id, ctx, msg);

    pthread_mutex_lock(&log_mu);
    ring_push(&global_ring, line);
    if (is_startup)
        ring_push(&startup_ring, line);
    if (log_to_stderr && wanted) {
        fputs(line, stderr);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&log_mu);
}

void mf_log(mf_log_level level, const char *component, int id, const char *ctx,
            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_emit(level, component, id, ctx, fmt, ap, false);
    va_end(ap);
}

void mf_log_attr(mf_log_level level, const char *component, int id, const char *ctx,
                 const char *msg, const char *attr_json)
{
    char head[LINE_MAX_BYTES];
    pthread_mutex_lock(&log_mu);
    bool wanted = level <= log_level;
    pthread_mutex_unlock(&log_mu);
    if (!wanted && level > MF_LOG_INFO)
        return;
    format_line(head, sizeof head, level, component, id, ctx, msg);
    /* head ends with "}": the attributes go before it */
    size_t hn = strlen(head) - 1, an = strlen(attr_json);
    char *line = malloc(hn + an + 10);
    if (!line)
        return; /* losing a log line beats failing the caller */
    memcpy(line, head, hn);
    memcpy(line + hn, ",\"attr\":", 8);
    /* without the blanks between tokens, as mongod writes its lines */
    size_t n = hn + 8;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < an; i++) {
        char ch = attr_json[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == ' ' || ch == '\n' || ch == '\t') {
            continue;
        }
        line[n++] = ch;
    }
    memcpy(line + n, "}", 2);
    pthread_mutex_lock(&log_mu);
    ring_push(&global_ring, line);
    if (log_to_stderr && wanted) {
        fputs(line, stderr);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&log_mu);
    free(line);
}

void mf_log_startup_warning(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_emit(MF_LOG_WARNING, "CONTROL", 22120, "initandlisten", fmt, ap, true);
    va_end(ap);
}

uint64_t mf_log_ring_each(void (*fn)(const char *line, void *arg), void *arg)
{
    return ring_each(&global_ring, fn, arg);
}

uint64_t mf_log_startup_each(void (*fn)(const char *line, void *arg), void *arg)
{
    return ring_each(&startup_ring, fn, arg);
}
