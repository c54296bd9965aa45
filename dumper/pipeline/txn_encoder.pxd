# C types for txn_encoder.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

@cython.locals(n=Py_ssize_t, ids=dict)
cpdef Py_ssize_t encode_rows(bytearray out, list statements, unsigned int timestamp,
                             unsigned int server_id, dict tm_ids, object encoder,
                             object txn) except -1

@cython.locals(p="const unsigned char*", code=int, at=Py_ssize_t, size=Py_ssize_t,
               q="unsigned char*", t="const unsigned char*")
cpdef int put_event(bytearray out, object e, dict ids, unsigned int timestamp,
                    unsigned int server_id, dict tm_ids, object encoder, object txn) except -1

@cython.locals(fragments=list)
cpdef unsigned int _timestamp(object txn) except? 0

cpdef bint has_events(list statements) except -1
