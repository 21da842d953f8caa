"""The gRPC services of the agent: OCR, status (health comes from grpcio-health-checking)."""
