"""KServe v2 over gRPC: ``inference.GRPCInferenceService`` (``service``), its
streams (``stream``), its codec (``codec``) and messages (``protos``). Like
``http/``, it only translates between its wire and the dataplane."""
