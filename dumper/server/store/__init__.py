"""The served files: what the binlog files hold as the server reads them (`binlog_files`), the
writer's progress (`notifiers`), the GTIDs in them (`gtid_state`, `mariadb_gtid_state`) and who
may purge which (`retention`). Both `sql/` and `dump/` read them; it imports neither. Modules
are imported by name."""
