"""The MySQL protocol loop: accept (`Listener`), connection packets, handshake and
authentication, the command switch (`Session`) and prepared statements; it answers nothing
itself but through the handlers of `dumper.server.handlers`."""
