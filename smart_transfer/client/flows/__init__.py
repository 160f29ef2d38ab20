"""The flows of the SDK, each over any transport: pull, push and follow, the local chain they offer, and
moving a list of objects through a channel's URLs with keep-alives."""
