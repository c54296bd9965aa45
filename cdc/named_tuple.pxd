# The C side of cdc/named_tuple.py for compiled modules (`from cdc cimport named_tuple`): a
# NamedTuple instance allocated by its type (`tp_alloc`, as `tuple.__new__` does for a subclass)
# and its fields set in place, without a Python call. `cls` must be a tuple subclass without
# extra fields (a NamedTuple); the callers pass their module's NamedTuple classes.
cdef extern from *:
    """
    static CYTHON_INLINE PyObject *cdc_named_tuple_set(PyObject *t, Py_ssize_t i, PyObject *v) {
        Py_INCREF(v);
        PyTuple_SET_ITEM(t, i, v);
        return t;
    }
    static CYTHON_INLINE PyObject *cdc_named_tuple3(PyObject *cls, PyObject *a, PyObject *b,
                                                    PyObject *c) {
        PyObject *t = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 3);
        if (t == NULL) return NULL;
        cdc_named_tuple_set(t, 0, a);
        cdc_named_tuple_set(t, 1, b);
        return cdc_named_tuple_set(t, 2, c);
    }
    static CYTHON_INLINE PyObject *cdc_named_tuple4(PyObject *cls, PyObject *a, PyObject *b,
                                                    PyObject *c, PyObject *d) {
        PyObject *t = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 4);
        if (t == NULL) return NULL;
        cdc_named_tuple_set(t, 0, a);
        cdc_named_tuple_set(t, 1, b);
        cdc_named_tuple_set(t, 2, c);
        return cdc_named_tuple_set(t, 3, d);
    }
    """
    object new3 "cdc_named_tuple3" (object cls, object a, object b, object c)
    object new4 "cdc_named_tuple4" (object cls, object a, object b, object c, object d)
