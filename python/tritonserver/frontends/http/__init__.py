"""KServe v2 over HTTP/REST: the ASGI app (``app``) and its codec
(``codec``). Everything here translates between KServe's HTTP protocol and
the dataplane (``frontends/dataplane``); the HTTP plumbing it stands on, which
the OpenAI frontend shares, is ``frontends/httpbase``."""
