"""What the test folders share (one place: a folder's conftest holds only its own fixtures):
`samples` (paths, the samples and their decoding), `captures` (capture bytes made by hand),
`builders` (rows for the rules), `tabulated` (the one pass over captures, canonical rows),
`secrets` (where a secret could hide in an output)."""
