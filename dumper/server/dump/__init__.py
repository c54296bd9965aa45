"""Binlog dump: the sender (shared reads, compiled framing), where a dump starts (file and
position, GTIDs, MariaDB GTID and UNTIL), the HA ack gate, the consumers list, and `handler.ReplicationAnswers`, a session's replication handler. Modules are
imported by name (this file imports none)."""
