"""Servers on this machine and elsewhere: found (discovery), told apart (detect), their
models listed, whose port they listen on.
"""
