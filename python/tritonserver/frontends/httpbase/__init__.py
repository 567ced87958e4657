"""The HTTP layer the HTTP protocols stand on (KServe's, ``frontends/http``,
and OpenAI's, ``frontends/openai``): the package's HTTP/1.1 server
(``server``), ASGI plumbing, bodies within limits and Triton's error bodies
(``wire``), the endpoint class and the server behind an app (``endpoint``),
JSON (``json_codec``), and the metrics frontend both apps also serve
(``metrics``: the core's Prometheus text). Nothing here knows a protocol's
messages."""
