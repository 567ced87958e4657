"""KServe v2 over HTTP/REST: the ASGI app and its codecs (``app``, ``codec``,
``wire``), the package's HTTP/1.1 server (``server``) and the metrics
frontend (``metrics``). Everything here translates between HTTP and the
dataplane (``frontends/dataplane``); nothing protocol-free lives here."""
