"""A run directory's files: the journal (answers as they come), the forecast table, the
run's contract and manifest reading, its lock, LLM transcripts, stance judgements, invalid
answers' reasons, and a run folder mirrored to object storage."""
