"""What a streamed body can be wrong with, as the HTTP engines' parsers raise it (both
engines turn them into Failed events the same way: see tui/engines/http/http_engine.py)."""


class StreamProtocolError(Exception):
    """The server's bytes are not the protocol; the message quotes what came (a Failed
    event of kind "protocol")."""


class StreamServerError(Exception):
    """The server reported an error inside the stream; the message is the server's (a
    Failed event of kind "engine")."""
