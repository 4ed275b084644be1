"""From measured requests to numbers: levels and engines summarised, the batching
model, energy per level."""
