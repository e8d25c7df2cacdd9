"""A toy track written the way a new track is: one folder, registered by one line (the
contract test's :func:`finbench.tracks.register`), nothing edited outside it. Its question:
will a coin listed in a JSON file land heads; its forecasters state a constant."""
