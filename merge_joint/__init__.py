"""MergeJoint: k-way merge of the MergeSource streams by TSO (`Merger`), coalescing fragments
into logical transactions in TraceId order and applying markers. Other packages import only
from here."""

from merge_joint.joint import MergeJoint, SourceSet
from merge_joint.merger import MergeError, Merger, Transaction

__all__ = ["MergeError", "MergeJoint", "Merger", "SourceSet", "Transaction"]
