"""The stack file: schema, loading, secret references, problems, cross-section checks, validate, init."""
