/*
 * module.c -- the CPython module multifora._core: the Server type and the
 * error type, over the wire server in csrc/wire.
 *
 * Multi-phase initialisation with module state (PEP 489/573): the error
 * type lives in the module's state, not in a C global, so the module can be
 * loaded in several interpreters.  Every call that may block (start, stop,
 * wait, command) releases the GIL; the server's own threads never take it.
 *
 * Errors become Python exceptions in exactly one place, mfi_py_raise_error().
 * The functions that exist only for the tests are in testhooks.c.
 */
#include "py_int.h"

#include <unistd.h>

static module_state *state_of_type(PyTypeObject *tp)
{
    return PyType_GetModuleState(tp);
}

/* The one converter from an mf_error to a Python exception. */
PyObject *mfi_py_raise_error(module_state *st, const mf_error *err)
{
    char scratch[24];
    PyObject *exc = PyObject_CallFunction(st->error_type, "s", err->msg);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(err->code);
    PyObject *name = PyUnicode_FromString(mf_error_name(err->code, scratch));
    if (code && name && PyObject_SetAttrString(exc, "code", code) == 0 &&
        PyObject_SetAttrString(exc, "code_name", name) == 0)
        PyErr_SetObject(st->error_type, exc);
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

static int check_usable(server_object *self, module_state *st)
{
    mf_error err;
    if (!self->srv) {
        mf_error_set(&err, MF_IllegalOperation, "the server is closed");
        mfi_py_raise_error(st, &err);
        return -1;
    }
    if (self->pid != getpid()) {
        mf_error_set(&err, MF_IllegalOperation,
                     "this server was opened by process %ld; a forked child must open its own",
                     (long)self->pid);
        mfi_py_raise_error(st, &err);
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- Server */

static int server_init(server_object *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"dbpath", "host", "port", "unix_socket",
                             "max_connections", "enable_test_commands", "argv",
                             "parsed_options", "log_level", "ttl_monitor_sleep_secs",
                             "read_deadline_ms", "huge_pages", "session_refresh_ms", "faults",
                             "replica_set", "auth", "tls_mode", "tls_certificate_key_file",
                             "tls_certificate_key_file_password", "tls_ca_file",
                             "tls_allow_connections_without_certificates",
                             "tls_allow_invalid_certificates", NULL};
    const char *dbpath, *host = "127.0.0.1", *unix_socket = NULL, *log_level = "warning";
    const char *huge_pages = "auto", *replica_set = NULL;
    int port = 27017, max_connections = 1000, test_commands = 0, ttl_sleep = 60;
    int read_deadline_ms = 0, session_refresh_ms = 0, auth = 0;
    const char *tls_mode = "disabled", *tls_cert = NULL, *tls_cert_pw = NULL, *tls_ca = NULL;
    int tls_no_cert = 0, tls_invalid = 0;
    Py_buffer argv = {0}, parsed = {0};
    PyObject *faults_obj = NULL;
    mf_os_faults *faults = NULL;
    module_state *st = state_of_type(Py_TYPE(self));
    mf_error err;
    int rc;

    if (self->srv) {
        PyErr_SetString(PyExc_RuntimeError, "Server.__init__ called twice");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|zizipy*y*siisiOzpszzzpp", kwlist, &dbpath, &host,
                                     &port, &unix_socket, &max_connections,
                                     &test_commands, &argv, &parsed, &log_level, &ttl_sleep,
                                     &read_deadline_ms, &huge_pages, &session_refresh_ms,
                                     &faults_obj, &replica_set, &auth, &tls_mode, &tls_cert,
                                     &tls_cert_pw, &tls_ca, &tls_no_cert, &tls_invalid))
        return -1;
    /* A storage fault table for this server's engine alone (tests). */
    if (mfi_py_faults_table(st, faults_obj, &faults) != 0) {
        rc = -1;
        goto out;
    }

    mf_huge_pages huge;
    if (strcmp(huge_pages, "auto") == 0)
        huge = MF_HUGE_AUTO;
    else if (strcmp(huge_pages, "on") == 0)
        huge = MF_HUGE_ON;
    else if (strcmp(huge_pages, "off") == 0)
        huge = MF_HUGE_OFF;
    else {
        PyErr_Format(PyExc_ValueError, "huge_pages must be 'auto', 'on' or 'off', not '%s'",
                     huge_pages);
        rc = -1;
        goto out;
    }

    static const char *const tls_modes[] = {"disabled", "allowTLS", "preferTLS", "requireTLS"};
    int tmode = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(tls_mode, tls_modes[i]) == 0)
            tmode = i;
    if (tmode < 0) {
        /* mongod's startup error */
        PyErr_Format(PyExc_ValueError, "unsupported value for tlsMode %s", tls_mode);
        rc = -1;
        goto out;
    }

    int level = mf_log_level_parse(log_level);
    if (level < 0) {
        PyErr_Format(PyExc_ValueError, "unknown log level '%s'", log_level);
        rc = -1;
        goto out;
    }
    mf_log_configure((mf_log_level)level, true);

    bson_t argv_doc, parsed_doc;
    bool has_argv = argv.buf && bson_init_static(&argv_doc, argv.buf, (size_t)argv.len);
    bool has_parsed = parsed.buf && bson_init_static(&parsed_doc, parsed.buf, (size_t)parsed.len);
    mf_server_config cfg = {
        .dbpath = dbpath,
        .bind_ip = host,
        .port = port,
        .unix_socket = unix_socket,
        .max_connections = max_connections,
        .enable_test_commands = test_commands != 0,
        .ttl_monitor_sleep_secs = ttl_sleep,
        .session_refresh_ms = session_refresh_ms,
        .read_deadline_ms = read_deadline_ms,
        .huge_pages = huge,
        .faults = faults,
        .replica_set = replica_set,
        .auth = auth != 0,
        .tls_mode = (mf_tls_mode)tmode,
        .tls_certificate_key_file = tls_cert,
        .tls_certificate_key_file_password = tls_cert_pw,
        .tls_ca_file = tls_ca,
        .tls_allow_connections_without_certificates = tls_no_cert != 0,
        .tls_allow_invalid_certificates = tls_invalid != 0,
        .cmdline_argv = has_argv ? &argv_doc : NULL,
        .cmdline_parsed = has_parsed ? &parsed_doc : NULL,
    };
    mf_server *srv = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = mf_server_open(&cfg, &srv, &err);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        mfi_py_raise_error(st, &err);
        rc = -1;
        goto out;
    }
    self->srv = srv;
    self->pid = getpid();
    if (faults) /* the engine checks it until the server is freed */
        self->faults = Py_NewRef(faults_obj);
out:
    if (argv.buf)
        PyBuffer_Release(&argv);
    if (parsed.buf)
        PyBuffer_Release(&parsed);
    return rc;
}

static void server_dealloc(server_object *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    /* Only the opening process may stop its threads and release the lock;
     * in a forked child the threads do not exist and the memory is a copy. */
    if (self->srv && self->pid == getpid()) {
        Py_BEGIN_ALLOW_THREADS
        mf_server_close(self->srv);
        Py_END_ALLOW_THREADS
    }
    self->srv = NULL;
    Py_CLEAR(self->faults); /* after the close: the engine used it to the end */
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *server_start(server_object *self, PyObject *noargs)
{
    (void)noargs;
    module_state *st = state_of_type(Py_TYPE(self));
    mf_error err;
    int rc;
    if (check_usable(self, st) != 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = mf_server_start(self->srv, &err);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return mfi_py_raise_error(st, &err);
    self->started = true;
    Py_RETURN_NONE;
}

static PyObject *server_stop(server_object *self, PyObject *noargs)
{
    (void)noargs;
    if (self->srv && self->pid == getpid()) {
        Py_BEGIN_ALLOW_THREADS
        mf_server_stop(self->srv);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *server_close(server_object *self, PyObject *noargs)
{
    (void)noargs;
    mf_server *srv = self->srv;
    if (srv && self->pid == getpid()) {
        self->srv = NULL;
        Py_BEGIN_ALLOW_THREADS
        mf_server_close(srv);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *server_wait(server_object *self, PyObject *args)
{
    double timeout = -1.0;
    bool stopped;
    if (!PyArg_ParseTuple(args, "|d", &timeout))
        return NULL;
    if (check_usable(self, state_of_type(Py_TYPE(self))) != 0)
        return NULL;
    int64_t ms = timeout < 0 ? -1 : (int64_t)(timeout * 1000.0);
    Py_BEGIN_ALLOW_THREADS
    stopped = mf_server_wait(self->srv, ms);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(stopped);
}

/* A command's reply, handed to Python without a copy: it owns the buffer
 * libbson built the reply in, and exports it read-only (server_command
 * returns a memoryview of it).  Copying a reply of a 10,000-document batch
 * into a bytes object cost about 3% of an indexed find in-process. */
typedef struct {
    PyObject_HEAD
    uint8_t *data; /* bson_free()d with the object */
    Py_ssize_t len;
} reply_object;

static int reply_getbuffer(reply_object *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->len, 1, flags);
}

static void reply_dealloc(reply_object *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    bson_free(self->data);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot reply_slots[] = {
    {Py_tp_dealloc, reply_dealloc},
    {Py_bf_getbuffer, reply_getbuffer},
    {Py_tp_doc, "The BSON bytes of one in-process command's reply (read-only buffer)."},
    {0, NULL},
};

static PyType_Spec reply_spec = {
    .name = "multifora._core.Reply",
    .basicsize = sizeof(reply_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = reply_slots,
};

/* A memoryview of `reply`'s bytes, which it takes (the bson_t is spent). */
static PyObject *reply_view(module_state *st, bson_t *reply)
{
    uint32_t len;
    uint8_t *data = bson_destroy_with_steal(reply, true, &len);
    if (!data)
        return PyErr_NoMemory();
    reply_object *r = PyObject_New(reply_object, st->reply_type);
    if (!r) {
        bson_free(data);
        return NULL;
    }
    r->data = data;
    r->len = (Py_ssize_t)len;
    PyObject *view = PyMemoryView_FromObject((PyObject *)r);
    Py_DECREF(r);
    return view;
}

static PyObject *server_command(server_object *self, PyObject *args)
{
    const char *db;
    Py_buffer doc;
    bson_t reply;
    if (!PyArg_ParseTuple(args, "sy*", &db, &doc))
        return NULL;
    if (check_usable(self, state_of_type(Py_TYPE(self))) != 0) {
        PyBuffer_Release(&doc);
        return NULL;
    }
    bson_init(&reply);
    Py_BEGIN_ALLOW_THREADS
    mf_server_command(self->srv, doc.buf, (size_t)doc.len, db, &reply);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&doc);
    return reply_view(state_of_type(Py_TYPE(self)), &reply);
}

static PyObject *server_port(server_object *self, void *closure)
{
    (void)closure;
    if (!self->srv)
        Py_RETURN_NONE;
    int port = mf_server_port(self->srv);
    if (port < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(port);
}

static PyMethodDef server_methods[] = {
    {"start", (PyCFunction)server_start, METH_NOARGS,
     "start()\n--\n\nStart accepting connections on server threads."},
    {"stop", (PyCFunction)server_stop, METH_NOARGS,
     "stop()\n--\n\nStop accepting, close every connection, join the threads."},
    {"close", (PyCFunction)server_close, METH_NOARGS,
     "close()\n--\n\nStop if needed and release the data directory."},
    {"wait", (PyCFunction)server_wait, METH_VARARGS,
     "wait(timeout=-1)\n--\n\nWait up to timeout seconds (negative: forever) for the "
     "server to stop; return whether it has."},
    {"command", (PyCFunction)server_command, METH_VARARGS,
     "command(db, bson)\n--\n\nRun one command (BSON bytes) in-process; return the "
     "reply's BSON as a read-only memoryview."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef server_getset[] = {
    {"port", (getter)server_port, NULL, "TCP port bound, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot server_slots[] = {
    {Py_tp_init, server_init},
    {Py_tp_dealloc, server_dealloc},
    {Py_tp_methods, server_methods},
    {Py_tp_getset, server_getset},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_doc, "Server(dbpath, host='127.0.0.1', port=27017, unix_socket=None, "
                "max_connections=1000, enable_test_commands=False, argv=None, "
                "parsed_options=None, log_level='warning', ttl_monitor_sleep_secs=60, "
                "read_deadline_ms=0, huge_pages='auto', session_refresh_ms=0, "
                "faults=None, replica_set=None, auth=False, tls_mode='disabled', "
                "tls_certificate_key_file=None, tls_certificate_key_file_password=None, "
                "tls_ca_file=None, tls_allow_connections_without_certificates=False, "
                "tls_allow_invalid_certificates=False)\n--\n\n"
                "The C wire server over one data directory; `faults`, a _Faults, is the "
                "storage fault table of its engine (tests); `replica_set` names the "
                "one-member replica set it is the primary of (None: a standalone); `auth` "
                "turns access control on (mongod's --auth); the tls_ options are mongod's "
                "net.tls ones."},
    {0, NULL},
};

static PyType_Spec server_spec = {
    .name = "multifora._core.Server",
    .basicsize = sizeof(server_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = server_slots,
};

/* ------------------------------------------------------------------ module */

static PyObject *core_crc32c(PyObject *mod, PyObject *args)
{
    (void)mod;
    Py_buffer b;
    unsigned long crc = 0;
    if (!PyArg_ParseTuple(args, "y*|k", &b, &crc))
        return NULL;
    uint32_t r = mf_crc32c((uint32_t)crc, b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(r);
}

static PyObject *core_log(PyObject *mod, PyObject *args)
{
    (void)mod;
    const char *level, *component, *msg;
    if (!PyArg_ParseTuple(args, "sss", &level, &component, &msg))
        return NULL;
    int lv = mf_log_level_parse(level);
    if (lv < 0) {
        PyErr_Format(PyExc_ValueError, "unknown log level '%s'", level);
        return NULL;
    }
    mf_log((mf_log_level)lv, component, 0, "main", "%s", msg);
    Py_RETURN_NONE;
}

static int core_exec(PyObject *mod)
{
    module_state *st = PyModule_GetState(mod);
    st->error_type = PyErr_NewExceptionWithDoc(
        "multifora._core.MultiforaError",
        "An error from the MultiforaDB server, with .code and .code_name as MongoDB's.",
        NULL, NULL);
    if (!st->error_type || PyModule_AddObjectRef(mod, "MultiforaError", st->error_type) < 0)
        return -1;
    st->server_type = (PyTypeObject *)PyType_FromModuleAndSpec(mod, &server_spec, NULL);
    if (!st->server_type || PyModule_AddType(mod, st->server_type) < 0)
        return -1;
    st->reply_type = (PyTypeObject *)PyType_FromModuleAndSpec(mod, &reply_spec, NULL);
    if (!st->reply_type)
        return -1;
#if PY_VERSION_HEX < 0x030A0000
    st->reply_type->tp_new = NULL;
#endif
    if (PyModule_AddStringConstant(mod, "MONGODB_VERSION", MF_VERSION) < 0 ||
        PyModule_AddIntConstant(mod, "MAX_WIRE_VERSION", MF_MAX_WIRE_VERSION) < 0)
        return -1;
    return mfi_py_testhooks_add(mod);
}

static int core_traverse(PyObject *mod, visitproc visit, void *arg)
{
    module_state *st = PyModule_GetState(mod);
    Py_VISIT(st->error_type);
    Py_VISIT(st->server_type);
    Py_VISIT(st->reply_type);
    Py_VISIT(st->faults_type);
    return 0;
}

static int core_clear(PyObject *mod)
{
    module_state *st = PyModule_GetState(mod);
    Py_CLEAR(st->error_type);
    Py_CLEAR(st->server_type);
    Py_CLEAR(st->reply_type);
    Py_CLEAR(st->faults_type);
    return 0;
}

static void core_free(void *mod)
{
    core_clear(mod);
}

static PyMethodDef core_methods[] = {
    {"crc32c", core_crc32c, METH_VARARGS,
     "crc32c(data, crc=0)\n--\n\nCRC-32C of data, continuing from crc."},
    {"log", core_log, METH_VARARGS,
     "log(level, component, msg)\n--\n\nWrite one line to the server log."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot core_slots[] = {
    {Py_mod_exec, core_exec},
    {0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "multifora._core",
    .m_doc = "MultiforaDB's C core: the wire server, command layer and storage engine.",
    .m_size = sizeof(module_state),
    .m_methods = core_methods,
    .m_slots = core_slots,
    .m_traverse = core_traverse,
    .m_clear = core_clear,
    .m_free = core_free,
};

PyMODINIT_FUNC PyInit__core(void)
{
    return PyModuleDef_Init(&core_module);
}
