"""The frontends' dataplane: what an endpoint does, free of any protocol.

Inference calls, model metadata and repository control, shared memory
regions, classification, log and trace settings. Each function takes and
returns plain values and raises TritonError subclasses; the protocol
folders (``http/``, ``grpc/``) only translate their wire to and from these.
"""
