"""MySQL client/server protocol primitives shared by the DN dump client and the Dumper server:
framing, encodings, authentication scrambles, capability flags and a small asyncio client."""
