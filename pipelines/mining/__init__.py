"""The mining jobs' DataFrame transformations: pure functions, DataFrame in, DataFrame out."""
