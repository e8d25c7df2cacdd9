"""The intraday track: will a stock's mid price be higher at 15:55 ET than at the horizon
(09:30, 12:30, 15:30), with an 80% interval of its log return (docs/spec.md). Its plugin:
:mod:`finbench.tracks.intraday.plugin`."""
