"""The client data plane: parallel, verified HTTP transfers to and from presigned URLs."""
