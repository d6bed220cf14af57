"""Groundwire's shared service runtime: settings, errors, gRPC bootstrap, telemetry."""
