"""MergeSource: one per DN; reads the physical binlog, sorts branches by commit TSO and strips
XA and private events. Exports nothing yet."""
