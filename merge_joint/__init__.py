"""MergeJoint: k-way merge of the MergeSource streams by TSO (`merger.Merger`), coalescing
fragments into logical transactions in TraceId order and applying markers."""
