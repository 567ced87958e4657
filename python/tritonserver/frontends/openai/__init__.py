"""OpenAI's API over HTTP (completions, chat completions, models): the app
and the OpenAI frontend (app.py), and the wire's documents and checks
(protocol.py). What is protocol-free lives in dataplane/text_generation.py."""
