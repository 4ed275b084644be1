"""What a streamed answer's bytes can be wrong with, as the decoders raise it. The HTTP
engines (tui/engines/http/http_engine.py) and the proxy's observer
(tui/proxy/observe.py) turn them into Failed events alike."""


class StreamProtocolError(Exception):
    """The server's bytes are not the protocol; the message quotes what came (a Failed
    event of kind "protocol")."""


class StreamServerError(Exception):
    """The server reported an error inside the stream; the message is the server's (a
    Failed event of kind "engine")."""
