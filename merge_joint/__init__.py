"""MergeJoint: k-way merge of the MergeSource streams by TSO, coalescing fragments into logical
transactions and applying markers. Exports nothing yet."""
