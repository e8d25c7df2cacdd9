"""The lowest layer, shared by all: errors, the config parts every track shares (data,
model bases, language models, replays, the executor, config files' text), times and the
exchange calendar, names, floats, atomic outputs, progress, Arrow look-ups, JSON text,
versions, local and object-storage locations."""
