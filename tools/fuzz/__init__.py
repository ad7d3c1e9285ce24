"""Mutation fuzzers for every file format rill reads (see README.md)."""
