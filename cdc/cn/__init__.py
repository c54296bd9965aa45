"""Reference compute node (CN): TSO, catalogue, routing and the XA commit protocol that every
writer to the cluster follows so that a global binlog can be built from the DN binlogs."""
