/*
 * py_int.h -- what the files of csrc/py share: the module's state, the
 * Server object, and the one converter of errors to exceptions.
 */
#ifndef MF_PY_INT_H
#define MF_PY_INT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../wire/wire.h"

/* Python 3.9, the floor pyproject.toml names, lacks these 3.10 additions.
 * A Reply type must not be instantiable from Python: on 3.9 its tp_new is
 * cleared after it is made (core_exec), which is what the flag does. */
#if PY_VERSION_HEX < 0x030A0000
#define Py_TPFLAGS_IMMUTABLETYPE 0
#define Py_TPFLAGS_DISALLOW_INSTANTIATION 0
static inline PyObject *Py_NewRef(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
static inline int PyModule_AddObjectRef(PyObject *mod, const char *name, PyObject *value)
{
    Py_XINCREF(value);
    if (PyModule_AddObject(mod, name, value) < 0) {
        Py_XDECREF(value);
        return -1;
    }
    return 0;
}
#endif

typedef struct {
    PyObject *error_type; /* multifora._core.MultiforaError */
    PyTypeObject *server_type;
    PyTypeObject *reply_type;
    PyTypeObject *faults_type; /* _Faults, a storage fault table (testhooks.c) */
} module_state;

typedef struct {
    PyObject_HEAD
    mf_server *srv;
    pid_t pid; /* the process that opened it; a forked child may not use it */
    bool started;
    PyObject *faults; /* the _Faults its engine checks, kept while it lives; or NULL */
} server_object;

/* The one converter from an mf_error to a Python exception: raises it
 * (with .code and .code_name) and returns NULL. */
PyObject *mfi_py_raise_error(module_state *st, const mf_error *err);

/* Add the test-only functions and the _Faults type (testhooks.c) to the
 * module `mod`.  Returns 0, or -1 with an exception set. */
int mfi_py_testhooks_add(PyObject *mod);

/* The fault table of `obj`, a _Faults, into `*out` (NULL for NULL or
 * None).  Returns 0, or -1 with TypeError for anything else. */
int mfi_py_faults_table(module_state *st, PyObject *obj, mf_os_faults **out);

#endif /* MF_PY_INT_H */
