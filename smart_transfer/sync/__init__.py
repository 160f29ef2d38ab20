"""Pure sync decisions shared by every path (smart and simple, server and client): what a pull
sends, whether pushed blocks attach (the force/Seed rule), whether a bundle of blocks and manifests
is complete, and whether uploaded objects may be committed. Drivers call these; none re-decides."""
