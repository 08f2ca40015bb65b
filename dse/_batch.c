/* placeholder, replaced below */
#include "_engine.h"
PyObject *batch_run(PyObject *self, PyObject *args) { PyErr_SetString(PyExc_NotImplementedError, "batch"); return NULL; }
PyObject *batch_orders(PyObject *self, PyObject *args) { PyErr_SetString(PyExc_NotImplementedError, "batch"); return NULL; }
