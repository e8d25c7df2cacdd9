"""The live mode (docs/live.md): forecasts made in real time at each horizon, each answer
committed to a hash-chained ledger and the chain's head time-stamped by an RFC 3161 authority
before its target, the nonces revealed after it, and a verifier that anyone can run on the
published ledger and run directory."""
