"""Checking a running server as each venue checks it: tfb (TFB's verifier), httparena (validate.sh)."""
