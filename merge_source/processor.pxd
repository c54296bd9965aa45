# C types for processor.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python): the per-group objects it reads are cdef classes, their fields C struct members.
import cython

from cdc cimport named_tuple
from cdc.binlog cimport constants, header
from cdc.protocol cimport dump_packets
from merge_source.classifier cimport Classified, Classifier, xa_key
from merge_source.fragment cimport Fragment, Statement, Watermark, new_fragment
from merge_source.group cimport BinlogGroup

from merge_source.renamer cimport PackedRenamer
from merge_source.scan cimport timestamp as event_timestamp
from merge_source.sorter cimport Release, Sorter

cdef class _Held:
    cdef public Classified classified
    cdef public object timestamp
    cdef public tuple participants

@cython.locals(h=_Held)
cdef _Held _held(Classified classified, object timestamp)

cdef class SourceProcessor:
    cdef public object dn_id
    cdef public str dn_name
    cdef public object spill_dir
    cdef public object assembler
    cdef public Classifier classifier
    cdef public Sorter sorter
    cdef public object resume_after
    cdef public long long fragments_out
    cdef public object names
    cdef public bint started
    cdef public dict _foreign
    cdef public str _base
    cdef public object _last_end
    cdef public object groups
    cdef public str _file_name
    cdef public long long _file_no
    cdef public object _cp_file_no
    cdef public str _cp_file
    cdef public str _stream
    cdef public str _fde_file
    cdef public object restart_suspects
    cdef set _reported
    cdef PackedRenamer _packed_renamer
    cdef bint _one_mark
    cdef object _mark_key
    cdef object _mark_oldest
    cdef object _mark_open
    cdef object _mark_end
    cdef object _mark_tso
    cdef str _mark_base

    cpdef list _group(self, BinlogGroup group)
    cpdef list _apply(self, BinlogGroup group)
    cpdef list _outputs(self, list releases)
    @cython.locals(st=Statement, events=list, kept=list, k=Py_ssize_t,
                   packed_renamer=PackedRenamer)
    cpdef list _rename(self, list statements)
    cpdef object _seq(self, str file, long long pos)
    cpdef object checkpoint(self)
    cdef _note_mark(self, object key)
    cdef object _checkpoint_of(self, object oldest, object open_start, object last_end,
                               object max_tso_seen, str base)
