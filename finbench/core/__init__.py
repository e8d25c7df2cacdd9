"""The lowest layer, shared by all: errors, the shared config parts (data, models, executor)
and the intraday config, times and the exchange calendar, names, floats, atomic outputs,
progress, Arrow look-ups, JSON text, versions, local and object-storage locations."""
