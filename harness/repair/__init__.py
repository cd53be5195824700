"""Repairs that prove a diagnosis: small source edits at the diagnosed line, re-checked in the sandbox.

edit.py/sites.py/statements.py make candidate edits with LibCST on the file's text (parent side, nothing
runs); catalogue.py says which edits each cause expects; verify.py re-runs the checks on a patched copy
and keeps the edit that repairs; show.py turns a verified edit into a diff and its before/after numbers.
"""
