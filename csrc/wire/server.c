/*
 * server.c -- the listener and the server's life cycle.
 *
 * States and the function for each transition:
 *
 *   (none) --mf_server_open--> OPEN --mf_server_start--> SERVING
 *   SERVING --mf_server_stop, or the shutdown command--> STOPPING --> STOPPED
 *   OPEN/STOPPED --mf_server_close--> (none)
 *
 * One listener thread polls the listening sockets and a self-pipe.  A stop
 * request (from mf_server_stop or from the shutdown command, on a
 * connection thread) writes the pipe; the listener then closes the
 * listening sockets, shuts down every open connection's socket, waits for
 * every connection thread to finish, marks the server STOPPED and wakes
 * mf_server_wait.  Doing that work on the listener means the shutdown
 * command never waits for its own thread.
 */
#include "wire_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void request_stop(void *arg)
{
    mf_server *srv = arg;
    pthread_mutex_lock(&srv->mu);
    srv->stop_requested = true;
    pthread_mutex_unlock(&srv->mu);
    /* A full pipe already holds a wake-up; nothing more is needed. */
    ssize_t r = write(srv->wake[1], "x", 1);
    (void)r;
}

/* --------------------------------------------------------------- binding */

static int listen_tcp(mf_server *srv, const char *host, int port, mf_error *err)
{
    struct addrinfo hints = {0}, *res = NULL;
    char portstr[16];
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof portstr, "%d", port);
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0)
        return mf_error_set(err, MF_BadValue, "cannot resolve bind address '%s': %s",
                            host, gai_strerror(gai));
    int rc = 0;
    struct addrinfo *ai = res;
    if (srv->nlisten >= MF_MAX_LISTENERS) {
        rc = mf_error_set(err, MF_BadValue, "too many listen addresses");
        goto done;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = mf_error_set(err, MF_BadValue, "socket(): %s", strerror(errno));
        goto done;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        rc = mf_error_set(err, e == EADDRINUSE ? 9001 /* SocketException */ : MF_BadValue,
                          "Failed to bind to %s:%d: %s", host, port, strerror(e));
        goto done;
    }
    if (srv->port <= 0) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        srv->port = ntohs(ss.ss_family == AF_INET6
                              ? ((struct sockaddr_in6 *)&ss)->sin6_port
                              : ((struct sockaddr_in *)&ss)->sin_port);
    }
    srv->listen_fds[srv->nlisten++] = fd;
done:
    freeaddrinfo(res);
    return rc;
}

static int listen_unix(mf_server *srv, const char *path, mf_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return mf_error_set(err, MF_BadValue, "unix socket path too long: %s", path);
    if (srv->nlisten >= MF_MAX_LISTENERS)
        return mf_error_set(err, MF_BadValue, "too many listen addresses");
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return mf_error_set(err, MF_BadValue, "socket(): %s", strerror(errno));
    /* A stale socket file from a dead server would make bind fail. */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);
    /* Create it private: the umask closes the window between bind and chmod. */
    mode_t old = umask(0177);
    int b = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (b != 0 || chmod(path, 0600) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return mf_error_set(err, MF_BadValue, "Failed to bind to unix socket %s: %s",
                            path, strerror(e));
    }
    snprintf(srv->unix_path, sizeof srv->unix_path, "%s", path);
    srv->listen_fds[srv->nlisten++] = fd;
    return 0;
}

static void close_listeners(mf_server *srv)
{
    for (int i = 0; i < srv->nlisten; i++)
        close(srv->listen_fds[i]);
    srv->nlisten = 0;
    if (srv->unix_path[0]) {
        unlink(srv->unix_path);
        srv->unix_path[0] = '\0';
    }
}

/* A replica set's hosts entry: the first address it listens on, as a
 * client connects to it -- "host:port" (the machine's name for a wildcard
 * address), or the Unix socket's path when there is no TCP. */
static void set_me(mf_server *srv, const mf_server_config *cfg)
{
    char me[512], first[256];
    if (srv->port < 0) {
        mf_instance_set_me(srv->inst, srv->unix_path);
        return;
    }
    const char *list = cfg->bind_ip && *cfg->bind_ip ? cfg->bind_ip : "127.0.0.1";
    size_t n = strcspn(list, ",");
    snprintf(first, sizeof first, "%.*s", (int)n, list);
    if (strcmp(first, "0.0.0.0") == 0 || strcmp(first, "::") == 0) {
        if (gethostname(first, sizeof first - 1) != 0)
            strcpy(first, "localhost");
        first[sizeof first - 1] = '\0';
    }
    if (strchr(first, ':'))
        snprintf(me, sizeof me, "[%s]:%d", first, srv->port);
    else
        snprintf(me, sizeof me, "%s:%d", first, srv->port);
    mf_instance_set_me(srv->inst, me);
}

int mf_server_open(const mf_server_config *cfg, mf_server **out, mf_error *err)
{
    int rc;
    mf_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return mf_error_oom(err);
    srv->wake[0] = srv->wake[1] = -1;
    srv->max_connections = cfg->max_connections > 0 ? cfg->max_connections : 1000;
    srv->read_deadline_ms = cfg->read_deadline_ms == 0  ? MF_READ_DEADLINE_MS_DEFAULT
                            : cfg->read_deadline_ms < 0 ? -1
                                                        : cfg->read_deadline_ms;
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->cond, NULL);
    atomic_init(&srv->next_conn_id, 1);
    /* TLS first: a bad certificate or option stops the server before it
     * opens its data (mongod's startup checks) */
    if ((rc = mf_tls_open(cfg, &srv->tls, err)) != 0)
        goto fail;

    mf_instance_config icfg = {
        .dbpath = cfg->dbpath,
        .max_connections = srv->max_connections,
        .enable_test_commands = cfg->enable_test_commands,
        .auth = cfg->auth,
        .ttl_monitor_sleep_secs = cfg->ttl_monitor_sleep_secs,
        .session_refresh_ms = cfg->session_refresh_ms,
        .huge_pages = cfg->huge_pages,
        .faults = cfg->faults,
        .repl_set = cfg->replica_set,
        .cmdline_argv = cfg->cmdline_argv,
        .cmdline_parsed = cfg->cmdline_parsed,
        .request_stop = request_stop,
        .request_stop_arg = srv,
    };
    if ((rc = mf_instance_open(&icfg, &srv->inst, err)) != 0)
        goto fail;
    if (pipe2(srv->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        rc = mf_error_set(err, MF_InternalError, "pipe(): %s", strerror(errno));
        goto fail;
    }

    srv->port = -1;
    if (cfg->port >= 0) {
        const char *list = cfg->bind_ip && *cfg->bind_ip ? cfg->bind_ip : "127.0.0.1";
        char host[256];
        srv->port = cfg->port;
        /* --bind takes a comma-separated list, as mongod's --bind_ip does. */
        for (const char *p = list; *p;) {
            size_t n = strcspn(p, ",");
            if (n == 0 || n >= sizeof host) {
                rc = mf_error_set(err, MF_BadValue, "invalid bind address list '%s'", list);
                goto fail;
            }
            memcpy(host, p, n);
            host[n] = '\0';
            if ((rc = listen_tcp(srv, host, srv->port, err)) != 0)
                goto fail;
            p += n;
            if (*p == ',')
                p++;
        }
    }
    if (cfg->unix_socket && *cfg->unix_socket &&
        (rc = listen_unix(srv, cfg->unix_socket, err)) != 0)
        goto fail;
    if (srv->nlisten == 0) {
        rc = mf_error_set(err, MF_BadValue, "nothing to listen on: no TCP port and no unix socket");
        goto fail;
    }
    set_me(srv, cfg);
    *out = srv;
    return 0;

fail:
    mf_server_close(srv);
    return rc;
}

/* -------------------------------------------------------------- accepting */

static void describe_peer(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "";
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        snprintf(out, cap, "%s:%u", ip, ntohs(a->sin_port));
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        snprintf(out, cap, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else {
        snprintf(out, cap, "anonymous unix socket");
    }
}

static void accept_one(mf_server *srv, int lfd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0)
        return; /* EAGAIN, ECONNABORTED, EMFILE: try again on the next poll */
    mf_counters *k = mf_instance_counters(srv->inst);
    char remote[64];
    describe_peer(&ss, remote, sizeof remote);

    pthread_mutex_lock(&srv->mu);
    bool full = srv->nconns >= srv->max_connections;
    pthread_mutex_unlock(&srv->mu);
    if (full) {
        mf_log(MF_LOG_INFO, "NETWORK", 22942, "listener",
               "Connection refused because there are too many open connections: %d "
               "(from %s)",
               srv->max_connections, remote);
        close(fd);
        return;
    }
    if (ss.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }

    mf_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->srv = srv;
    c->fd = fd;
    c->client.id = atomic_fetch_add(&srv->next_conn_id, 1);
    snprintf(c->client.remote, sizeof c->client.remote, "%s", remote);

    pthread_mutex_lock(&srv->mu);
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    int current = srv->nconns;
    pthread_mutex_unlock(&srv->mu);
    atomic_fetch_add_explicit(&k->conn_current, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->conn_total, 1, memory_order_relaxed);
    mf_log(MF_LOG_INFO, "NETWORK", 22943, "listener",
           "Connection accepted from %s #%lld (%d connection%s now open)", remote,
           (long long)c->client.id, current, current == 1 ? "" : "s");

    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 1u << 20);
    int e = pthread_create(&tid, &attr, mfi_conn_main, c);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        mf_log(MF_LOG_WARNING, "NETWORK", 22948, "listener",
               "Failed to start a thread for a connection: %s", strerror(e));
        /* Hand the connection to the exit path without a thread: shut the
         * socket so conn_main's loop ends at once, and run it here. */
        shutdown(fd, SHUT_RDWR);
        mfi_conn_main(c);
    }
}

static void finish_stop(mf_server *srv)
{
    mf_instance_begin_shutdown(srv->inst); /* wakes awaitable hellos */
    close_listeners(srv);
    pthread_mutex_lock(&srv->mu);
    for (mf_conn *c = srv->conns; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    while (srv->nconns > 0)
        pthread_cond_wait(&srv->cond, &srv->mu);
    srv->stopped = true;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->mu);
    mf_log(MF_LOG_INFO, "CONTROL", 20565, "listener", "Now exiting");
}

static void *listener_main(void *arg)
{
    mf_server *srv = arg;
    struct pollfd pfd[MF_MAX_LISTENERS + 1];
    int n = srv->nlisten;

    for (int i = 0; i < n; i++)
        pfd[i] = (struct pollfd){.fd = srv->listen_fds[i], .events = POLLIN};
    pfd[n] = (struct pollfd){.fd = srv->wake[0], .events = POLLIN};

    for (;;) {
        pthread_mutex_lock(&srv->mu);
        bool stop = srv->stop_requested;
        pthread_mutex_unlock(&srv->mu);
        if (stop)
            break;
        int r = poll(pfd, (nfds_t)n + 1, -1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            mf_log(MF_LOG_ERROR, "NETWORK", 23016, "listener", "poll(): %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++)
            if (pfd[i].revents & POLLIN)
                accept_one(srv, pfd[i].fd);
    }
    finish_stop(srv);
    return NULL;
}

int mf_server_start(mf_server *srv, mf_error *err)
{
    if (srv->listener_started)
        return mf_error_set(err, MF_IllegalOperation, "server already started");
    int e = pthread_create(&srv->listener, NULL, listener_main, srv);
    if (e != 0)
        return mf_error_set(err, MF_InternalError, "cannot start listener: %s", strerror(e));
    srv->listener_started = true;
    if (srv->port > 0)
        mf_log(MF_LOG_INFO, "NETWORK", 23016, "listener", "Waiting for connections on port %d",
               srv->port);
    if (srv->unix_path[0])
        mf_log(MF_LOG_INFO, "NETWORK", 23015, "listener", "Listening on %s", srv->unix_path);
    return 0;
}

bool mf_server_wait(mf_server *srv, int64_t timeout_ms)
{
    pthread_mutex_lock(&srv->mu);
    if (timeout_ms < 0) {
        while (!srv->stopped)
            pthread_cond_wait(&srv->cond, &srv->mu);
    } else if (!srv->stopped) {
        struct timespec ts;
        mf_clock_deadline(CLOCK_REALTIME, timeout_ms, &ts);
        while (!srv->stopped)
            if (pthread_cond_timedwait(&srv->cond, &srv->mu, &ts) != 0)
                break;
    }
    bool stopped = srv->stopped;
    pthread_mutex_unlock(&srv->mu);
    return stopped;
}

void mf_server_stop(mf_server *srv)
{
    if (!srv->listener_started) {
        pthread_mutex_lock(&srv->mu);
        bool done = srv->stopped;
        srv->stop_requested = true;
        pthread_mutex_unlock(&srv->mu);
        if (!done)
            finish_stop(srv);
        return;
    }
    request_stop(srv);
    pthread_join(srv->listener, NULL);
    srv->listener_started = false;
}

void mf_server_close(mf_server *srv)
{
    if (!srv)
        return;
    if (srv->inst)
        mf_server_stop(srv);
    close_listeners(srv);
    if (srv->wake[0] >= 0)
        close(srv->wake[0]);
    if (srv->wake[1] >= 0)
        close(srv->wake[1]);
    mf_instance_close(srv->inst);
    mf_tls_close(&srv->tls);
    pthread_cond_destroy(&srv->cond);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
}

int mf_server_port(const mf_server *srv)
{
    return srv->port;
}

/* ------------------------------------------------------------ in-process */

void mf_server_command(mf_server *srv, const uint8_t *doc, size_t len, const char *db,
                       bson_t *reply)
{
    mf_error err;
    mf_client client = {.id = 0, .is_internal = true};
    int flags = 0;
    bson_t in, cmd;

    snprintf(client.remote, sizeof client.remote, "internal");
    mf_error_clear(&err);
    if (mf_bsonx_validate(doc, len, &err) != 0) {
        mf_command_error_reply(reply, &err);
        return;
    }
    /* The caller names the database; a $db inside the document gives way,
     * as a driver would have overwritten it. */
    bson_init_static(&in, doc, len);
    bson_init(&cmd);
    bson_copy_to_excluding_noinit(&in, &cmd, "$db", NULL);
    BSON_APPEND_UTF8(&cmd, "$db", db);
    mf_command_run(srv->inst, &client, &cmd, reply, &flags);
    mf_command_client_end(&client); /* one command, one client: what it authenticated goes */
    bson_destroy(&cmd);
}
