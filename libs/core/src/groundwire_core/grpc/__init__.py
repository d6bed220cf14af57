"""gRPC plumbing shared by every service: bootstrap, interceptors, error mapping, clients."""
