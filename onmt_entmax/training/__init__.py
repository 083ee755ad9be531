"""Training features that serve both toolkits (framework-free; the adapters wire them in)."""
